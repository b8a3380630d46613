package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
)

// chainClient is one MCP session (2025-11-25, raw HTTP) with a page open
// and the form's refs from a snapshot.
type chainClient struct {
	c     *harness.MCPClient
	btn   string
	input string
}

func newChainClient(ctx context.Context, url, page string, form bool) (*chainClient, error) {
	c := harness.NewMCPClient(url)
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ictx); err != nil {
		return nil, err
	}
	cc := &chainClient{c: c}
	if err := cc.call(ctx, "open", map[string]any{"url": page}); err != nil {
		return nil, err
	}
	if !form {
		return cc, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	snap, err := c.Tool(sctx, "snapshot", nil)
	if err != nil {
		return nil, err
	}
	cc.btn = harness.FindRef(snap.Text(), "button", harness.FormButton)
	cc.input = harness.FindRef(snap.Text(), "textbox", harness.FormInput)
	if cc.btn == "" || cc.input == "" {
		return nil, fmt.Errorf("the form's snapshot lacks the button or textbox refs:\n%s", snap.Text())
	}
	return cc, nil
}

func (cc *chainClient) call(ctx context.Context, name string, args map[string]any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cc.c.Tool(ctx, name, args); err != nil {
		return fmt.Errorf("chain %s: %w", name, err)
	}
	return nil
}

func (cc *chainClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = cc.c.Delete(ctx)
}

func (cc *chainClient) getTitle(ctx context.Context) error {
	return cc.call(ctx, "get_title", nil)
}
func (cc *chainClient) eval(ctx context.Context) error {
	return cc.call(ctx, "eval", map[string]any{"script": "1+1"})
}
func (cc *chainClient) snapshot(ctx context.Context) error { return cc.call(ctx, "snapshot", nil) }
func (cc *chainClient) click(ctx context.Context) error {
	return cc.call(ctx, "click", map[string]any{"ref": cc.btn})
}
func (cc *chainClient) fill(ctx context.Context) error {
	return cc.call(ctx, "fill", map[string]any{"ref": cc.input, "value": "bench"})
}
func (cc *chainClient) getText(ctx context.Context) error {
	return cc.call(ctx, "get_text", map[string]any{"selector": "#out"})
}

// stats are latency percentiles.
type stats struct {
	n        int
	p50, p95 time.Duration
}

func percentiles(d []time.Duration) stats {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.5) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return stats{n: len(s), p50: at(0.50), p95: at(0.95)}
}

// timeOp runs op warmup times, then n timed times.
func timeOp(ctx context.Context, warmup, n int, op func() error) (stats, error) {
	for range warmup {
		if err := op(); err != nil {
			return stats{}, err
		}
	}
	d := make([]time.Duration, 0, n)
	for range n {
		if ctx.Err() != nil {
			return stats{}, errTimeout
		}
		start := time.Now()
		if err := op(); err != nil {
			return stats{}, err
		}
		d = append(d, time.Since(start))
	}
	return percentiles(d), nil
}

type toolRow struct {
	tool          string
	chain, direct stats
}

func measureTools(ctx context.Context, cfg config, url, site string, d *directBrowser, r *report) error {
	cc, err := newChainClient(ctx, url, site+"/form", true)
	if err != nil {
		return err
	}
	defer cc.close()
	tab, err := d.formTab(site)
	if err != nil {
		return err
	}
	defer tab.close()
	snap := func() error { _, err := tab.snapshot(); return err }
	for _, op := range []struct {
		tool   string
		chain  func(context.Context) error
		direct func() error
	}{
		{"get_title", cc.getTitle, tab.getTitle},
		{"eval", cc.eval, tab.eval},
		{"snapshot", cc.snapshot, snap},
		{"click", cc.click, tab.click},
		{"fill", cc.fill, tab.fill},
	} {
		row := toolRow{tool: op.tool}
		if row.chain, err = timeOp(ctx, cfg.warmup, cfg.n, func() error { return op.chain(ctx) }); err != nil {
			return err
		}
		if row.direct, err = timeOp(ctx, cfg.warmup, cfg.n, op.direct); err != nil {
			return fmt.Errorf("direct %s: %w", op.tool, err)
		}
		r.tools = append(r.tools, row)
	}
	return nil
}

type throughputRow struct {
	clients       int
	chain, direct float64 // ops/s
	// CPU time per op of each part of the chain and of the direct side.
	chainCPU, directCPU []cpuShare
}

// cpuPart is a process, or a process and its descendants, whose CPU time
// a throughput run splits per op.
type cpuPart struct {
	name string
	pid  int
	tree bool
}

func (p cpuPart) read() (time.Duration, error) {
	if p.tree {
		return harness.TreeCPU(p.pid)
	}
	return harness.CPUTime(p.pid)
}

type cpuShare struct {
	name  string
	perOp time.Duration
}

// loop runs the scenario (snapshot, click, fill, get_text) in k workers
// until d has passed and returns the ops per second and the CPU time each
// of parts spent per op.
func loop(ctx context.Context, k int, d time.Duration, parts []cpuPart, steps func(i int) []func() error) (float64, []cpuShare, error) {
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, k)
	before := make([]time.Duration, len(parts))
	for i, p := range parts {
		var err error
		if before[i], err = p.read(); err != nil {
			return 0, nil, err
		}
	}
	start := time.Now()
	deadline := start.Add(d)
	for i := range k {
		s := steps(i)
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for _, step := range s {
					if err := step(); err != nil {
						errs[i] = err
						return
					}
					ops.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, nil, err
		}
	}
	if ctx.Err() != nil {
		return 0, nil, errTimeout
	}
	n := max(ops.Load(), 1)
	shares := make([]cpuShare, len(parts))
	for i, p := range parts {
		after, err := p.read()
		if err != nil {
			return 0, nil, err
		}
		shares[i] = cpuShare{p.name, (after - before[i]) / time.Duration(n)}
	}
	return float64(n) / elapsed.Seconds(), shares, nil
}

func measureThroughput(ctx context.Context, cfg config, url, site string, d *directBrowser, chainCPU, directCPU []cpuPart, r *report) error {
	for _, k := range []int{1, cfg.clients} {
		row := throughputRow{clients: k}
		clients := make([]*chainClient, k)
		for i := range clients {
			c, err := newChainClient(ctx, url, site+"/form", true)
			if err != nil {
				return err
			}
			defer c.close()
			clients[i] = c
		}
		var err error
		row.chain, row.chainCPU, err = loop(ctx, k, cfg.duration, chainCPU, func(i int) []func() error {
			c := clients[i]
			return []func() error{
				func() error { return c.snapshot(ctx) },
				func() error { return c.click(ctx) },
				func() error { return c.fill(ctx) },
				func() error { return c.getText(ctx) },
			}
		})
		if err != nil {
			return err
		}
		tabs := make([]*directTab, k)
		for i := range tabs {
			tab, err := d.formTab(site)
			if err != nil {
				return err
			}
			defer tab.close()
			tabs[i] = tab
		}
		row.direct, row.directCPU, err = loop(ctx, k, cfg.duration, directCPU, func(i int) []func() error {
			t := tabs[i]
			return []func() error{
				func() error { _, err := t.snapshot(); return err },
				t.click, t.fill, t.getText,
			}
		})
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		r.throughput = append(r.throughput, row)
	}
	return nil
}

func measureBigSnapshot(ctx context.Context, cfg config, url, site string, d *directBrowser, r *report) error {
	page := fmt.Sprintf("%s/many?n=%d", site, cfg.snapElems)
	cc, err := newChainClient(ctx, url, page, false)
	if err != nil {
		return err
	}
	defer cc.close()
	var last string
	r.bigChain, err = timeOp(ctx, 3, cfg.snapN, func() error {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := cc.c.Tool(sctx, "snapshot", nil)
		if err == nil {
			last = res.Text()
		}
		return err
	})
	if err != nil {
		return err
	}
	r.bigChainRefs = len(harness.ParseSnapshot(last))
	tab, err := d.newTab(page)
	if err != nil {
		return err
	}
	defer tab.close()
	r.bigDirect, err = timeOp(ctx, 3, cfg.snapN, func() error {
		n, err := tab.snapshot()
		r.bigDirectRefs = n
		return err
	})
	return err
}

// measureMemory opens cfg.idle sessions (about:blank) and measures the
// worker's process tree, then loads a page of 2,000 elements plus 256 KiB
// of text in each and measures again.
func measureMemory(ctx context.Context, cfg config, url, site string, pid int, r *report) error {
	settle := func() (harness.Memory, error) {
		time.Sleep(2 * time.Second)
		return harness.TreeMemory(pid)
	}
	before, err := settle()
	if err != nil {
		return err
	}
	var clients []*harness.MCPClient
	defer func() {
		for _, c := range clients {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = c.Delete(dctx)
			cancel()
		}
	}()
	for range cfg.idle {
		c := harness.NewMCPClient(url)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.Initialize(cctx)
		if err == nil {
			clients = append(clients, c)
			_, err = c.Tool(cctx, "get_url", nil) // opens the session (about:blank)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("open idle session: %w", err)
		}
	}
	after, err := settle()
	if err != nil {
		return err
	}
	r.memBefore, r.memAfter = before, after
	for _, c := range clients {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err := c.Tool(cctx, "open", map[string]any{"url": site + "/many?n=2000"})
		if err == nil {
			_, err = c.Tool(cctx, "eval", map[string]any{"script": "document.body.insertAdjacentHTML('beforeend', '<p>' + 'x'.repeat(262144) + '</p>'); document.querySelectorAll('*').length"})
		}
		cancel()
		if err != nil {
			return fmt.Errorf("load a page in a session: %w", err)
		}
	}
	r.memLoaded, err = settle()
	return err
}

// breakdownRow is one layer's share of a tool call.
type breakdownRow struct {
	what string
	s    stats
}

// measureBreakdown times get_title and eval layer by layer: over the bus
// straight to the worker (no gateway), and an MCP ping (HTTP and the
// gateway's session check, no worker), to show where the chain's time goes.
func measureBreakdown(ctx context.Context, cfg config, f *harness.Fleet, url, site string, r *report) error {
	bc := f.Bus()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var opened browserv1.OpenSessionResponse
	if err := bc.Request(octx, browserbus.Open.Subject(bc), &browserv1.OpenSessionRequest{Owner: "bench"}, &opened); err != nil {
		return fmt.Errorf("open a session over the bus: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp browserv1.CloseSessionResponse
		_ = bc.Request(cctx, browserbus.Of(opened.GetWorkerId()).Close.Subject(bc),
			&browserv1.CloseSessionRequest{SessionId: opened.GetSessionId()}, &resp)
	}()
	subject := browserbus.Of(opened.GetWorkerId()).Call.Subject(bc)
	call := func(req *browserv1.ToolRequest) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req.SessionId = opened.GetSessionId()
		var res browserv1.ToolResult
		if err := bc.Request(cctx, subject, req, &res); err != nil {
			return fmt.Errorf("bus call: %w", err)
		}
		return nil
	}
	if err := call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: site + "/form"}}}); err != nil {
		return err
	}
	s, err := timeOp(ctx, cfg.warmup, cfg.n, func() error {
		return call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}})
	})
	if err != nil {
		return err
	}
	r.breakdown = append(r.breakdown, breakdownRow{"get_title over the bus to the worker (no gateway)", s})
	s, err = timeOp(ctx, cfg.warmup, cfg.n, func() error {
		return call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: "1+1"}}})
	})
	if err != nil {
		return err
	}
	r.breakdown = append(r.breakdown, breakdownRow{"eval over the bus to the worker (no gateway)", s})

	c := harness.NewMCPClient(url)
	if _, err := c.Initialize(octx); err != nil {
		return err
	}
	defer c.Delete(context.Background())
	s, err = timeOp(ctx, cfg.warmup, cfg.n, func() error {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := c.Request(pctx, "ping", nil)
		return err
	})
	if err != nil {
		return err
	}
	r.breakdown = append(r.breakdown, breakdownRow{"MCP ping: HTTP → gateway, session check, no worker", s})

	// CPU time, unlike wall time, hardly moves with what else the machine
	// runs: the gateway's (fleet) or the whole process's (up) per call.
	if _, err := c.CallTool(octx, "open", map[string]any{"url": site + "/form"}); err != nil {
		return err
	}
	before, err := harness.CPUTime(f.Gateways[len(f.Gateways)-1].PID())
	if err != nil {
		return err
	}
	for range cfg.n {
		if _, err := c.CallTool(ctx, "get_title", nil); err != nil {
			return err
		}
	}
	after, err := harness.CPUTime(f.Gateways[len(f.Gateways)-1].PID())
	if err != nil {
		return err
	}
	r.cpuPerCall = (after - before) / time.Duration(cfg.n)
	return nil
}
