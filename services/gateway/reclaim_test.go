package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// TestIdleRelease: an MCP session whose client went quiet (no request, no
// stream) gives its browser session back after --mcp-idle-timeout, and
// its next call works in a fresh one; a client holding a stream open
// keeps its browser session however long it is quiet.
func TestIdleRelease(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 4)
	url := startGateway(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{MCPIdleTimeout: 2 * time.Second}})
	site := titleSite(t)

	quiet := legacyClient(t, url, nil)
	callTool(t, quiet, "open", map[string]any{"url": site})

	tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	streaming := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	// The GET stream lives as long as Start's context.
	if err := streaming.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initClient(t, streaming)
	callTool(t, streaming, "open", map[string]any{"url": site})

	// Time passes, nothing to wait for: well past the idle timeout and a
	// few keeper rounds, so that a keeper that wrongly gave back the
	// streaming client's session too would have done so by now.
	time.Sleep(5 * time.Second)
	// The keeper has given the quiet session back (on a loaded machine it
	// may run late, or before the streaming client's open is recorded):
	// its record is one of the first three, with the two opens.
	var tools []string
	for _, rec := range auditRecords(t, srv, 3) {
		tools = append(tools, rec.GetTool())
	}
	if !slices.Contains(tools, "session.release") {
		t.Fatalf("audit records %v, want the quiet session's session.release among them", tools)
	}
	got := text(callTool(t, quiet, "get_url", nil))
	if !strings.HasSuffix(got, "\nabout:blank") || !strings.Contains(got, "new browser session: the previous one was given back, unused for") {
		t.Errorf("the quiet client's call after the idle timeout = %q, want a fresh session (about:blank) and a note saying why", got)
	}
	if got := text(callTool(t, streaming, "get_url", nil)); !strings.HasPrefix(got, site) {
		t.Errorf("the client holding a stream is at %q, want its page %s (its session kept)", got, site)
	}
	recs := auditRecords(t, srv, 5) // open, open, session.release, get_url, get_url
	var released int
	for _, r := range recs {
		if r.GetTool() == "session.release" {
			released++
			if r.GetCaller() != "gateway" || !strings.Contains(r.GetResult(), "unused for") {
				t.Errorf("release record = caller %q, result %q", r.GetCaller(), r.GetResult())
			}
		}
	}
	if released != 1 {
		t.Errorf("%d release records, want 1 (the quiet client's)", released)
	}
}

// TestSessionsPerCaller: one caller cannot take the fleet. A 2026 client
// that omits its handle opens a session per call only up to the limit,
// then is told to pass its handle; another caller still gets sessions.
func TestSessionsPerCaller(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 6)
	tok, _ := newToken(t, srv, tokens.Spec{Name: "other"})
	one, _ := newToken(t, srv, tokens.Spec{Name: "just-one", MaxSessions: 1})
	url := startGateway(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{SessionsPerCaller: 2}})
	greedy := modernClient(t, url, nil)
	for i := range 2 {
		if res := callTool(t, greedy, "get_url", nil); res.IsError {
			t.Fatalf("call %d without a session: %s", i+1, text(res))
		}
	}
	res := callTool(t, greedy, "get_url", nil)
	if !res.IsError || !strings.Contains(text(res), "limit") || !strings.Contains(text(res), `as "session"`) {
		t.Fatalf("third call without a session = %q, want a refusal naming the limit and how to reuse a handle", text(res))
	}
	// A caller with its own token is another caller.
	other := modernClient(t, url, map[string]string{"Authorization": tok})
	if res := callTool(t, other, "get_url", nil); res.IsError {
		t.Fatalf("another caller's first call: %s", text(res))
	}
	// A token's own limit wins over the gateway's.
	single := modernClient(t, url, map[string]string{"Authorization": one})
	callTool(t, single, "get_url", nil)
	if res := callTool(t, single, "get_url", nil); !res.IsError || !strings.Contains(text(res), "holds 1 browser sessions") {
		t.Errorf("a token with --max-sessions 1, second session = %q, want refused at 1", text(res))
	}
}

// TestReclaimAtCapacity: when every worker is full, a new session takes
// back the longest-idle one idle beyond the grace period instead of
// failing; the session that was taken back starts afresh at its next call.
func TestReclaimAtCapacity(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	// The grace leaves room for a slow open on a loaded machine: the last
	// check needs the third session, just opened, still within it.
	url := startGateway(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{ReclaimGrace: 2500 * time.Millisecond}})
	site := titleSite(t)
	first, second := legacyClient(t, url, nil), legacyClient(t, url, nil)
	callTool(t, first, "open", map[string]any{"url": site})
	time.Sleep(3 * time.Second) // time passes: first is now idle beyond the grace, and the longest idle
	callTool(t, second, "open", map[string]any{"url": site})
	time.Sleep(3 * time.Second) // time passes: both are idle beyond the grace, the reclaim must pick first
	third := legacyClient(t, url, nil)
	if res := callTool(t, third, "open", map[string]any{"url": site}); res.IsError {
		t.Fatalf("a new session on a full fleet: %s, want the idle one reclaimed", text(res))
	}
	if got := text(callTool(t, second, "get_url", nil)); !strings.HasPrefix(got, site) {
		t.Errorf("the younger idle session is at %q, want it kept", got)
	}
	// The reclaimed client's next call needs a session again: the fleet is
	// full of sessions just used, none idle beyond the grace period.
	res := callTool(t, first, "get_url", nil)
	if !res.IsError || !strings.Contains(text(res), "no browser capacity") {
		t.Errorf("the reclaimed client's next call on a full, busy fleet = %q, want no capacity", text(res))
	}
}

// TestReclaimSparesRunningCall: a session whose call is still running is
// in use, however long ago the call started: a full fleet does not take
// it back for another caller past the grace period.
func TestReclaimSparesRunningCall(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 1)
	g, url := startGatewayG(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{ReclaimGrace: time.Second}})
	busy := legacyClient(t, url, nil)
	callTool(t, busy, "open", map[string]any{"url": titleSite(t)})
	done := startWait(t, g, busy, 6000)
	time.Sleep(2 * time.Second) // time passes: past the grace since the wait started
	if res := callTool(t, legacyClient(t, url, nil), "get_url", nil); !res.IsError || !strings.Contains(text(res), "no browser capacity") {
		t.Errorf("a new session while the only one runs a call = %q, want no capacity (not the running session reclaimed)", text(res))
	}
	if res := <-done; res.IsError {
		t.Errorf("the wait on the session another caller wanted = %q, want it finished", text(res))
	}
}

func TestSessionLimitsConfig(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{SessionsConfig: gateway.SessionsConfig{MCPIdleTimeout: time.Millisecond, SessionsPerCaller: -1, ReclaimGrace: -time.Second}}
	err := cfg.Validate()
	for _, flag := range []string{"--mcp-idle-timeout", "--sessions-per-caller", "--reclaim-grace"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", cfg.SessionsConfig, err, flag)
		}
	}
}

// With --open-queue, a call that finds every worker full and nothing to
// reclaim waits its turn instead of failing: it hears its place through
// progress notifications and gets the first session that frees up; a call
// beyond the queue's length is refused at once, naming --open-queue, and
// one that waits past --open-queue-timeout is refused, naming that.
func TestOpenQueue(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 1)
	g, url := startGatewayG(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{
		// The queue timeout runs from when the first call queues, across
		// the steps below until the holder frees its session: 10 s leaves
		// room for a loaded machine (3 s might have run out first).
		ReclaimGrace: time.Hour, OpenQueue: 2, OpenQueueTimeout: 10 * time.Second}})
	site := titleSite(t)
	holder := legacyClient(t, url, nil)
	callTool(t, holder, "open", map[string]any{"url": site})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, second := legacyClient(t, url, nil), legacyClient(t, url, nil)
	progress := watchProgress(first)
	firstRes := asyncCall(ctx, first, "open", map[string]any{"url": site}, "queue-1")
	progress.awaitContaining(t, "place 1 in the queue")
	secondRes := asyncCall(ctx, second, "open", map[string]any{"url": site}, "")
	kittest.Eventually(t, 30*time.Second, func() error {
		n := gateway.OpenQueueLen(g)
		return kittest.Check(n >= 2, "%d calls wait in the open queue, want 2", n)
	})
	res := callTool(t, legacyClient(t, url, nil), "open", map[string]any{"url": site})
	if !res.IsError || !strings.Contains(text(res), "no browser capacity") || !strings.Contains(text(res), "--open-queue") {
		t.Errorf("a third call with 2 waiting in a queue of 2 = %q, want no capacity naming --open-queue", text(res))
	}
	// The holder ends its MCP session (DELETE), which gives its browser
	// session back: the head of the queue gets it.
	if err := holder.Close(); err != nil {
		t.Fatalf("end the holder's MCP session: %v", err)
	}
	if res := <-firstRes; res.IsError {
		t.Errorf("the first queued call after a session freed up = %q, want it opened", text(res))
	}
	res = <-secondRes
	if !res.IsError || !strings.Contains(text(res), "--open-queue-timeout") {
		t.Errorf("the second queued call, with no session freed for it = %q, want refused naming --open-queue-timeout", text(res))
	}
}

// startWait starts a wait tool call of ms on c and returns once g runs
// it; its result comes on the returned channel.
func startWait(t *testing.T, g *gateway.Gateway, c *client.Client, ms int) <-chan *mcp.CallToolResult {
	t.Helper()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "wait", map[string]any{"ms": ms}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			res = mcp.NewToolResultError(err.Error())
		}
		done <- res
	}()
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(gateway.RunningCalls(g) > 0, "the wait call has not started")
	})
	return done
}
