package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// TestObserve scrapes every service of a fleet of real processes
// (nats-server, a worker with its --listen, a gateway, history, the
// signer, an agent replica): after a few tool calls each /metrics has the
// series operators watch, with values that match the calls made; every
// /readyz is 200, turns 503 within seconds of NATS stopping, and 200 again
// once NATS is back on the same port and store, with the reconnect counted.
func TestObserve(t *testing.T) {
	t.Parallel()
	f := harness.NewFleet(binaries(t), t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the fleet's processes:\n%s", f.Logs())
		}
		f.Close()
	})
	ctx := callCtx(t, 3*time.Minute)
	start := time.Now()
	if _, err := f.StartNATS(ctx); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	_, workerBase, err := f.StartObservedWorker(ctx, "obs1", 1)
	if err != nil {
		t.Fatalf("start worker: %v", err)
	}
	g, err := f.StartGateway(ctx)
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	h, err := f.StartHistory(ctx, filepath.Join(f.Dir, "history"), "")
	if err != nil {
		t.Fatalf("start history: %v", err)
	}
	s, err := f.StartSigner(ctx, filepath.Join(f.Dir, "signer"), nil)
	if err != nil {
		t.Fatalf("start signer: %v", err)
	}
	ag, err := f.StartAgent(ctx, "obs", nil)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Logf("fleet up in %s", time.Since(start).Round(time.Millisecond))
	services := []struct{ name, base string }{
		{"gateway", g.Base}, {"worker", workerBase}, {"history", h.Base}, {"signer", s.Base},
		{"agent", ag.Base},
	}
	for _, svc := range services {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body, err := harness.Status(ctx, svc.base+path); err != nil || code != 200 {
				t.Errorf("%s %s = %d %s %v, want 200", svc.name, path, code, body, err)
			}
		}
	}

	// A few calls: one session (the worker's only one), a failing call,
	// and a second client that finds the fleet full.
	site := newSite(t)
	c := initClient(t, ctx, g.MCP)
	tool(t, ctx, c, "open", map[string]any{"url": site + "/form"})
	for range 3 {
		tool(t, ctx, c, "get_title", nil)
	}
	if _, err := c.Tool(ctx, "click", map[string]any{"ref": "e999"}); err == nil {
		t.Fatal("click on a missing ref succeeded")
	}
	full := initClient(t, ctx, g.MCP)
	if _, err := full.Tool(ctx, "get_title", nil); err == nil || !strings.Contains(err.Error(), "no browser capacity") {
		t.Fatalf("a second session with the only worker full: %v, want no browser capacity", err)
	}
	const calls = 6

	scrape := func(name, base string) harness.Metrics {
		t.Helper()
		m, err := harness.Scrape(ctx, base+"/metrics")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	expect := func(name string, m harness.Metrics, want map[string]float64) {
		t.Helper()
		for key, v := range want {
			got, ok := m[key]
			switch {
			case !ok:
				t.Errorf("%s /metrics has no %s", name, key)
			case got != v:
				t.Errorf("%s /metrics: %s = %v, want %v", name, key, got, v)
			}
		}
	}
	k := harness.Key
	gm := scrape("gateway", g.Base)
	expect("gateway", gm, map[string]float64{
		k("sovereign_tool_calls_total", "tool", "open", "outcome", "ok"):         1,
		k("sovereign_tool_calls_total", "tool", "get_title", "outcome", "ok"):    3,
		k("sovereign_tool_calls_total", "tool", "get_title", "outcome", "error"): 1,
		k("sovereign_tool_calls_total", "tool", "click", "outcome", "error"):     1,
		k("sovereign_tool_call_duration_seconds_count", "tool", "get_title"):     4,
		k("sovereign_tool_call_duration_seconds_count", "tool", "open"):          1,
		k("sovereign_no_capacity_total"):                                         1,
		k("sovereign_nats_disconnects_total"):                                    0,
		k("sovereign_nats_reconnects_total"):                                     0,
	})
	if sum := gm[k("sovereign_tool_call_duration_seconds_sum", "tool", "open")]; sum <= 0 || sum > 60 {
		t.Errorf("gateway: the open took %v s by the histogram", sum)
	}
	if _, ok := gm[k("sovereign_audit_buffered", "source", "gateway")]; !ok {
		t.Error("gateway /metrics has no sovereign_audit_buffered{source=\"gateway\"} (its audit backlog)")
	}
	expect("worker", scrape("worker", workerBase), map[string]float64{
		k("sovereign_browser_sessions_open", "worker", "obs1"):           1,
		k("sovereign_browser_sessions_capacity", "worker", "obs1"):       1,
		k("sovereign_browser_chromium_restarts_total", "worker", "obs1"): 0,
		k("sovereign_browser_sessions_lost_total", "worker", "obs1"):     0,
		k("sovereign_nats_reconnects_total"):                             0,
	})
	expect("signer", scrape("signer", s.Base), map[string]float64{
		k("sovereign_signer_identities"):     0,
		k("sovereign_nats_reconnects_total"): 0,
	})
	expect("agent", scrape("agent", ag.Base), map[string]float64{
		k("sovereign_agent_runs_active"):     0,
		k("sovereign_nats_reconnects_total"): 0,
	})
	// History stores every call's record; the stream backlog drains to 0.
	hm := kittest.EventuallyValue(t, 30*time.Second, func() (harness.Metrics, error) {
		hm := scrape("history", h.Base)
		return hm, kittest.Check(hm[k("sovereign_history_audit_stored_total")] >= calls && hm[k("sovereign_audit_backlog")] == 0,
			"history: stored %v records (want %d) with a backlog of %v", hm[k("sovereign_history_audit_stored_total")], calls, hm[k("sovereign_audit_backlog")])
	})
	expect("history", hm, map[string]float64{
		k("sovereign_history_audit_stored_total"): calls,
		k("sovereign_nats_reconnects_total"):      0,
	})

	// NATS stops: every service says it is not ready, naming NATS.
	stopped := time.Now()
	if err := f.StopNATS(5 * time.Second); err != nil {
		t.Fatalf("stop nats-server: %v", err)
	}
	allStatus(t, ctx, services, 503, 10*time.Second, `"nats":"NATS connection is`)
	t.Logf("every /readyz answered 503 within %s of NATS stopping", time.Since(stopped).Round(time.Millisecond))

	// NATS is back on the same port and store: ready again, reconnect counted.
	if _, err := f.RestartNATS(ctx); err != nil {
		t.Fatalf("restart nats-server: %v", err)
	}
	back := time.Now()
	allStatus(t, ctx, services, 200, 10*time.Second, "")
	t.Logf("every /readyz answered 200 within %s of NATS being back", time.Since(back).Round(time.Millisecond))
	// The counters are bumped by nats.go's connection callbacks, which run
	// on their own goroutine after the status (what /readyz reads) has
	// changed: read them until they show the outage.
	for _, svc := range services {
		kittest.Eventually(t, 30*time.Second, func() error {
			m := scrape(svc.name, svc.base)
			d, r := m[k("sovereign_nats_disconnects_total")], m[k("sovereign_nats_reconnects_total")]
			return kittest.Check(d >= 1 && r >= 1, "%s: sovereign_nats_disconnects_total = %v and sovereign_nats_reconnects_total = %v after the outage, want both ≥ 1", svc.name, d, r)
		})
	}
}

// allStatus waits, for every service at once, until its /readyz answers
// code (with a body containing want, when set).
func allStatus(t *testing.T, ctx context.Context, services []struct{ name, base string }, code int, within time.Duration, want string) {
	t.Helper()
	errs := make([]error, len(services))
	var wg sync.WaitGroup
	for i, svc := range services {
		wg.Go(func() {
			body, took, err := harness.WaitStatus(ctx, svc.base+"/readyz", code, within)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s: %w", svc.name, err)
			case !strings.Contains(body, want):
				errs[i] = fmt.Errorf("%s /readyz = %d %s, want it to name %s", svc.name, code, body, want)
			default:
				t.Logf("%s /readyz %d after %s: %s", svc.name, code, took.Round(time.Millisecond), body)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
