package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// spreadRow is how many of the sessions of one run each worker took.
type spreadRow struct {
	how string
	per []int // in the order of spreadWorkers
}

var spreadWorkers = []string{"bench-w1", "bench-w2", "bench-w3"}

// measureSpread starts two more workers (fleet mode) and opens 24 MCP
// sessions through the gateway, one after the other and then all at once,
// counting the browser sessions each worker holds (by ping) after each run.
func measureSpread(ctx context.Context, f *harness.Fleet, url, site string, maxSessions int, r *report) error {
	for _, id := range spreadWorkers[1:] {
		if _, err := f.StartWorker(ctx, id, maxSessions, "--warm-sessions", fmt.Sprint(r.cfg.warm)); err != nil {
			return err
		}
	}
	nc, err := nats.Connect(f.NATS.URL)
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := bus.New(nc, "")
	if err != nil {
		return err
	}
	counts := func() ([]int, error) {
		out := make([]int, len(spreadWorkers))
		for i, id := range spreadWorkers {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var pong browserv1.PingResponse
			err := c.Request(pctx, browserbus.Of(id).Ping.Subject(c), &browserv1.PingRequest{}, &pong)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("ping %s: %w", id, err)
			}
			out[i] = int(pong.GetSessions())
		}
		return out, nil
	}
	time.Sleep(3 * time.Second) // the new workers' first load reports
	for _, conc := range []bool{false, true} {
		before, err := counts()
		if err != nil {
			return err
		}
		clients := make([]*harness.MCPClient, 24)
		errs := make([]error, 24)
		open := func(i int) {
			c := harness.NewMCPClient(url)
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if _, errs[i] = c.Initialize(cctx); errs[i] != nil {
				return
			}
			clients[i] = c
			_, errs[i] = c.Tool(cctx, "open", map[string]any{"url": site + "/next"})
		}
		if conc {
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() { open(i) })
			}
			wg.Wait()
		} else {
			for i := range clients {
				open(i)
			}
		}
		after, cerr := counts()
		for _, c := range clients {
			if c != nil {
				dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = c.Delete(dctx)
				cancel()
			}
		}
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("open for the spread: %w", err)
			}
		}
		if cerr != nil {
			return cerr
		}
		row := spreadRow{how: "24 sequential opens", per: make([]int, len(spreadWorkers))}
		if conc {
			row.how = "24 concurrent opens"
		}
		for i := range after {
			row.per[i] = after[i] - before[i]
		}
		r.spread = append(r.spread, row)
		time.Sleep(3 * time.Second) // the closes reach the workers' reports
	}
	return nil
}

func (r *report) printSpread(out io.Writer) {
	if len(r.spread) == 0 {
		return
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "placement over 3 workers (sessions each took; share 8)\n")
	for _, s := range r.spread {
		fmt.Fprintf(out, "  %-22s %v\n", s.how, s.per)
	}
	fmt.Fprintln(out, "  the gateway opens on the worker with the most headroom its load reports show (sov.browser.load)")
}

// restoreRow is what happened to sessions when their worker was killed.
type restoreRow struct {
	sessions, onKilled, kept int
	firstCall                []time.Duration // each client's first call after the kill
}

// measureRestore (fleet mode, after measureSpread) opens sessions with a
// cookie each, lets the workers checkpoint them, kills the worker holding
// the most, and times every client's next call: on the killed worker's
// sessions it includes restoring the session on another worker.
func measureRestore(ctx context.Context, f *harness.Fleet, url, site string, r *report) error {
	const n = 6
	clients := make([]*harness.MCPClient, n)
	for i := range clients {
		c := harness.NewMCPClient(url)
		if _, err := c.Initialize(ctx); err != nil {
			return err
		}
		if _, err := c.Tool(ctx, "open", map[string]any{"url": fmt.Sprintf("%s/cookie/set?v=r%d", site, i)}); err != nil {
			return fmt.Errorf("open for the restore: %w", err)
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = c.Delete(dctx)
			cancel()
		}
	}()
	time.Sleep(4 * time.Second) // a checkpoint of each (--checkpoint-every is 3 s)
	counts := f.Sessions(ctx)
	var victim *harness.Worker
	for _, w := range f.Workers {
		if victim == nil || counts[w.ID] > counts[victim.ID] {
			victim = w
		}
	}
	row := restoreRow{sessions: n, onKilled: counts[victim.ID], firstCall: make([]time.Duration, n)}
	if err := victim.Kill(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	kept := make([]bool, n)
	for i, c := range clients {
		wg.Go(func() {
			start := time.Now()
			if _, err := c.Tool(ctx, "open", map[string]any{"url": site + "/cookie/show"}); err != nil {
				return
			}
			row.firstCall[i] = time.Since(start)
			res, err := c.Tool(ctx, "get_text", map[string]any{"selector": "#who"})
			kept[i] = err == nil && strings.TrimSpace(res.Text()) == fmt.Sprintf("r%d", i)
		})
	}
	wg.Wait()
	for _, k := range kept {
		if k {
			row.kept++
		}
	}
	r.restore = &row
	return nil
}

func (r *report) printRestore(out io.Writer) {
	if r.restore == nil {
		return
	}
	rr := r.restore
	slowest := slices.Max(rr.firstCall)
	fmt.Fprintf(out, "\nsession restore: %d sessions (each with a cookie) over the workers, the one holding %d killed with SIGKILL;\n",
		rr.sessions, rr.onKilled)
	fmt.Fprintf(out, "  every client's next call took %s at the slowest (a restore on a live worker from the checkpoint, then the call);\n"+
		"  %d of %d sessions still had their cookie afterwards\n", ms(slowest), rr.kept, rr.sessions)
}
