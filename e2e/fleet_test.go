package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// callText calls a tool and returns its trimmed text; an isError result is
// an error. For goroutines, where t.Fatal must not be called.
func callText(ctx context.Context, c *harness.MCPClient, name string, args map[string]any) (string, error) {
	res, err := c.Tool(ctx, name, args)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Text()), nil
}

// each runs fn for every client at once and fails the test (after all
// have finished) if any failed.
func each(t *testing.T, step string, clients []*harness.MCPClient, fn func(i int, c *harness.MCPClient) error) {
	t.Helper()
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = fn(i, c) })
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s, client %d: %v", step, i, err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

// want compares a tool's text with what the client should see.
func want(what, got, want string) error {
	if got != want {
		return fmt.Errorf("%s = %q, want %q", what, got, want)
	}
	return nil
}

// TestFleet browses with six concurrent clients spread over two gateways
// and two workers (three sessions each), checks that every client's cookies,
// storage and page state are its own, and that a seventh client is told
// promptly that the fleet is full, and is served once a session ends.
func TestFleet(t *testing.T) {
	t.Parallel()
	const clients, maxSessions = 6, 3
	f := startFleet(t, fleetSpec{workers: 2, gateways: 2, maxSessions: maxSessions})
	site := newSite(t)
	ctx := callCtx(t, 3*time.Minute)

	cs := make([]*harness.MCPClient, clients)
	for i := range cs {
		cs[i] = initClient(t, ctx, f.Gateways[i%len(f.Gateways)].MCP)
	}
	who := func(i int) string { return fmt.Sprintf("client-%d", i) }
	value := func(i int) string { return fmt.Sprintf("value of client %d", i) }
	clicks := func(i int) int { return i%3 + 1 }

	each(t, "set state", cs, func(i int, c *harness.MCPClient) error {
		if _, err := callText(ctx, c, "open", map[string]any{"url": site + "/cookie/set?v=" + who(i)}); err != nil {
			return err
		}
		if _, err := callText(ctx, c, "eval", map[string]any{"script": fmt.Sprintf("localStorage.setItem('who', %q); 'ok'", who(i))}); err != nil {
			return err
		}
		if _, err := callText(ctx, c, "open", map[string]any{"url": site + "/form"}); err != nil {
			return err
		}
		if _, err := callText(ctx, c, "fill", map[string]any{"selector": "#name", "value": value(i)}); err != nil {
			return err
		}
		for range clicks(i) {
			if _, err := callText(ctx, c, "click", map[string]any{"selector": "#save"}); err != nil {
				return err
			}
		}
		return nil
	})

	sessions := f.Sessions(ctx)
	t.Logf("sessions per worker: %v", sessions)
	if len(sessions) != 2 || sessions["w1"] == 0 || sessions["w2"] == 0 || total(sessions) != clients {
		t.Errorf("sessions per worker = %v, want %d sessions spread over both w1 and w2", sessions, clients)
	}

	each(t, "check state", cs, func(i int, c *harness.MCPClient) error {
		got, err := callText(ctx, c, "eval", map[string]any{"script": "document.querySelector('#name').value"})
		if err != nil {
			return err
		}
		if err := want("input value", unquote(got), value(i)); err != nil {
			return err
		}
		if got, err = callText(ctx, c, "get_text", map[string]any{"selector": "#out"}); err != nil {
			return err
		}
		if err := want("#out", got, fmt.Sprintf("clicked %d", clicks(i))); err != nil {
			return err
		}
		if _, err := callText(ctx, c, "open", map[string]any{"url": site + "/cookie/show"}); err != nil {
			return err
		}
		if got, err = callText(ctx, c, "get_text", map[string]any{"selector": "#who"}); err != nil {
			return err
		}
		if err := want("cookie the server received", got, who(i)); err != nil {
			return err
		}
		if got, err = callText(ctx, c, "eval", map[string]any{"script": "localStorage.getItem('who')"}); err != nil {
			return err
		}
		return want("localStorage who", unquote(got), who(i))
	})

	// The fleet is full: a seventh client is told so at once.
	late := initClient(t, ctx, f.Gateways[0].MCP)
	start := time.Now()
	res, err := late.CallTool(ctx, "get_url", nil)
	took := time.Since(start)
	msg := errorText(res, err)
	t.Logf("seventh client, after %s: %s", took.Round(time.Millisecond), msg)
	switch {
	case err == nil && !res.IsError:
		t.Errorf("a seventh session was opened on a fleet of %d×%d: %s", len(f.Workers), maxSessions, res.Text())
	case !strings.Contains(strings.ToLower(msg), "capacity"):
		t.Errorf("full fleet error = %q, want it to say there is no capacity", msg)
	}
	if took > 10*time.Second {
		t.Errorf("the full-fleet error took %s, want it promptly", took)
	}

	// Ending one session makes room for the waiting client.
	if status, err := cs[0].Delete(ctx); err != nil || status != http.StatusOK {
		t.Fatalf("DELETE client 0: %d, %v", status, err)
	}
	if r, err := cs[0].Post(ctx, "ping", nil, false); err != nil || r.Status != http.StatusNotFound {
		t.Errorf("ping after DELETE: %v, %v; want HTTP 404", r, err)
	}
	got := kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		got, err := callText(ctx, late, "get_url", nil)
		if err != nil {
			return "", fmt.Errorf("after a session ended, the seventh client still gets: %w", err)
		}
		return got, nil
	})
	if strings.Contains(got, site) {
		t.Errorf("the seventh client's new session shows %q, want a fresh page", got)
	}
	if s := f.Sessions(ctx); total(s) != clients {
		t.Errorf("sessions per worker after one DELETE and one open = %v, want %d in all", s, clients)
	}
}

// errorText is the message of a failed call: the error, or the text of an
// isError result.
func errorText(res *harness.ToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res != nil {
		return res.Text()
	}
	return ""
}

// TestWorkerKilled kills a worker (SIGKILL, Chromium included) while one of
// its sessions runs a long wait: the call fails at once with a clear error,
// a session on the other worker keeps working, and the killed session's
// client gets a fresh session on the live worker at its next call.
func TestWorkerKilled(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 2, gateways: 1, maxSessions: 3})
	site := newSite(t)
	ctx := callCtx(t, 3*time.Minute)
	url := f.Gateways[0].MCP
	form := site + "/form"

	// place opens the form in c's (new) session and returns its worker.
	place := func(c *harness.MCPClient, value string) string {
		t.Helper()
		before := f.Sessions(ctx)
		tool(t, ctx, c, "open", map[string]any{"url": form})
		tool(t, ctx, c, "fill", map[string]any{"selector": "#name", "value": value})
		after := f.Sessions(ctx)
		for id, n := range after {
			if n == before[id]+1 {
				return id
			}
		}
		t.Fatalf("no worker gained a session: before %v, after %v", before, after)
		return ""
	}

	a := initClient(t, ctx, url)
	victim := place(a, "text of A")
	var b *harness.MCPClient
	survivor := ""
	for range 3 { // the victim fills up after two more, so this ends
		c := initClient(t, ctx, url)
		if w := place(c, "text of B"); w != victim {
			b, survivor = c, w
			break
		}
	}
	if b == nil {
		t.Fatalf("no session landed on the worker other than %s", victim)
	}
	t.Logf("A is on %s, B on %s", victim, survivor)

	done := waitInFlight(ctx, a)
	select {
	case o := <-done:
		t.Fatalf("wait 20000 ms returned before the kill: %s", errorText(o.res, o.err))
	case <-time.After(1500 * time.Millisecond): // the call is running on the worker
	}
	var w *harness.Worker
	for _, x := range f.Workers {
		if x.ID == victim {
			w = x
		}
	}
	killed := time.Now()
	if err := w.Kill(); err != nil {
		t.Fatal(err)
	}
	lostInFlight(t, done, killed, 5*time.Second)

	// B, on the other worker, is untouched.
	if got := evalString(t, ctx, b, "document.querySelector('#name').value"); got != "text of B" {
		t.Errorf("B's input after the kill = %q, want %q", got, "text of B")
	}

	// A's next call gets a fresh session on the live worker.
	before := f.Sessions(ctx)
	got, err := callText(ctx, a, "get_url", nil)
	if err != nil {
		t.Fatalf("A's next call after the kill: %v", err)
	}
	if strings.Contains(got, form) {
		t.Errorf("A's next call shows %q: want a fresh session, not the lost page", got)
	}
	after := f.Sessions(ctx)
	if after[survivor] != before[survivor]+1 {
		t.Errorf("sessions on %s went from %d to %d at A's next call, want one more", survivor, before[survivor], after[survivor])
	}
	if _, ok := after[victim]; ok {
		t.Errorf("the killed worker %s still answers ping", victim)
	}
	// And the fresh session works.
	tool(t, ctx, a, "open", map[string]any{"url": form})
	if got := text(t, ctx, a, "get_title", nil); !strings.Contains(got, harness.FormTitle) {
		t.Errorf("get_title in A's fresh session = %q, want %q", got, harness.FormTitle)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// inFlight is how a call running when its worker died ended.
type inFlight struct {
	res *harness.ToolResult
	err error
	at  time.Time
}

// waitInFlight starts a 20 s wait on c's session and returns how it ends.
func waitInFlight(ctx context.Context, c *harness.MCPClient) <-chan inFlight {
	done := make(chan inFlight, 1)
	go func() {
		res, err := c.CallTool(ctx, "wait", map[string]any{"ms": 20000})
		done <- inFlight{res, err, time.Now()}
	}()
	return done
}

// lostInFlight checks that the call on done, running on a worker killed
// at killed, failed within the bound and said its browser session was
// lost, and returns how long it took.
func lostInFlight(t *testing.T, done <-chan inFlight, killed time.Time, within time.Duration) time.Duration {
	t.Helper()
	var o inFlight
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the wait call still runs 30 s after its worker was killed")
	}
	took := o.at.Sub(killed)
	msg := errorText(o.res, o.err)
	t.Logf("in-flight call failed %s after the kill: %s", took.Round(time.Millisecond), msg)
	if o.err == nil && !o.res.IsError {
		t.Fatalf("the wait call on the killed worker succeeded: %s", msg)
	}
	lower := strings.ToLower(msg)
	if !strings.Contains(lower, "session") || !containsAny(lower, "lost", "gone", "died", "unavailable", "no longer", "not running") {
		t.Errorf("error of the in-flight call = %q, want it to say the browser session was lost", msg)
	}
	var rpcErr *harness.RPCError
	if errors.As(o.err, &rpcErr) {
		t.Logf("(the failure came as JSON-RPC error %d rather than a tool result with isError)", rpcErr.Code)
	}
	if took > within {
		t.Errorf("the in-flight call failed %s after the kill; want it within %s (it must not wait for its timeout)", took, within)
	}
	return took
}
