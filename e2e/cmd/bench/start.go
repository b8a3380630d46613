package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// targetFirstCall8 is the target for the first tool call of a new session
// (p50) with 8 sessions arriving at once.
const targetFirstCall8 = 300 * time.Millisecond

type startRow struct {
	sessions int
	s        stats
}

// measureFirstCall times the first tool call of new MCP sessions (an open
// of a small local page, which opens the browser session too), k sessions
// arriving at once, 5 s after the last round (for the warm pool to refill).
// The MCP initialize handshake is not timed.
func measureFirstCall(ctx context.Context, url, site string, r *report) error {
	for _, k := range []int{1, 8} {
		var all []time.Duration
		for round := 0; round < 3; round++ {
			select { // the pool refills in the background
			case <-ctx.Done():
				return errTimeout
			case <-time.After(5 * time.Second):
			}
			d, err := firstCalls(ctx, url, site, k)
			if err != nil {
				return err
			}
			all = append(all, d...)
		}
		r.starts = append(r.starts, startRow{sessions: k, s: percentiles(all)})
	}
	return nil
}

// firstCalls initializes k MCP clients, then has them all call open at
// once, and returns how long each call took; the sessions are deleted.
func firstCalls(ctx context.Context, url, site string, k int) ([]time.Duration, error) {
	clients := make([]*harness.MCPClient, k)
	defer func() {
		for _, c := range clients {
			if c != nil {
				dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = c.Delete(dctx)
				cancel()
			}
		}
	}()
	for i := range clients {
		c := harness.NewMCPClient(url)
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.Initialize(ictx)
		cancel()
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	d := make([]time.Duration, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			<-start
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			t := time.Now()
			_, errs[i] = c.Tool(cctx, "open", map[string]any{"url": site + "/next"})
			d[i] = time.Since(t)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("first open of a new session: %w", err)
		}
	}
	return d, nil
}

func (r *report) printStarts(out io.Writer) {
	if len(r.starts) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "first tool call of a new session\tn\tp50\tp95\ttarget\t\n")
	for _, s := range r.starts {
		target := ""
		if s.sessions == 8 {
			target = fmt.Sprintf("p50 ≤ %s: %s", ms(targetFirstCall8), verdict(s.s.p50 <= targetFirstCall8))
		}
		fmt.Fprintf(w, "%d arriving at once\t%d\t%s\t%s\t%s\t\n", s.sessions, s.s.n, ms(s.s.p50), ms(s.s.p95), target)
	}
	w.Flush()
	fmt.Fprintln(out, "  open of a small local page as each new MCP session's first call (it opens the browser session: a warm")
	fmt.Fprintf(out, "  context from the worker's pool while one is left, else a cold one); --warm-sessions %d; 3 rounds, 5 s apart for the pool to refill\n", r.cfg.warm)
}
