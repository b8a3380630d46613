package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

const chromium = "/usr/bin/chromium"

func needChromium(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Chromium; skipped with -short")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no Chromium at %s", chromium)
	}
}

// startWorker runs a real browser worker (real Chromium) on srv until the
// test ends.
func startWorker(t *testing.T, srv *natsrv.Server, id string, maxSessions int) {
	t.Helper()
	runWorker(t, srv, browser.Config{ID: id, MaxSessions: maxSessions, IdleTimeout: 5 * time.Minute})
}

// runWorker runs a real browser worker of cfg (Chrome set here) on srv
// until the test ends.
func runWorker(t *testing.T, srv *natsrv.Server, cfg browser.Config) {
	t.Helper()
	c := connect(t, srv)
	cfg.Chrome = chromium
	id := cfg.ID
	w, err := browser.New(context.Background(), cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	})
	waitForWorker(t, c, id, done)
}

// waitForWorker waits until worker id answers its ping and can open sessions.
func waitForWorker(t *testing.T, c *bus.Conn, id string, done <-chan error) {
	t.Helper()
	kittest.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("worker %s stopped while starting: %v", id, err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var resp browserv1.PingResponse
		if err := c.Request(ctx, c.Subject("browser", "w", id, "ping"), &browserv1.PingRequest{}, &resp); err != nil {
			return fmt.Errorf("worker %s does not answer its ping: %w", id, err)
		}
		return kittest.Check(inOpenGroup(c.NATS(), id), "worker %s answers its ping but is not in the open group", id)
	})
}

// inOpenGroup reports whether worker id has joined the open queue group.
func inOpenGroup(nc *nats.Conn, id string) bool {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.PING.sovereign-browser-open", inbox, nil); err != nil {
		return false
	}
	for {
		m, err := sub.NextMsg(300 * time.Millisecond)
		if err != nil {
			return false
		}
		var ping micro.Ping
		if json.Unmarshal(m.Data, &ping) == nil && ping.Metadata["worker_id"] == id {
			return true
		}
	}
}

// workerSessions asks worker id how many sessions it holds.
func workerSessions(t *testing.T, c *bus.Conn, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var resp browserv1.PingResponse
	if err := c.Request(ctx, c.Subject("browser", "w", id, "ping"), &browserv1.PingRequest{}, &resp); err != nil {
		t.Fatalf("ping %s: %v", id, err)
	}
	return int(resp.GetSessions())
}

const testPage = `<!doctype html>
<html><head><title>Sovereign test</title></head><body>
<h1>Hello</h1>
<a href="/next">Next page</a>
<label>Name <input id="name"></label>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked ' + document.getElementById('name').value">Go</button>
<p id="out"></p>
</body></html>`

func startSite(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, testPage)
	})
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Next</title><p id="n">second page</p>`)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

func mustOK(t *testing.T, r *mcp.CallToolResult, what string) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("%s: tool error %q", what, text(r))
	}
	return text(r)
}

var handleLine = regexp.MustCompile(`^session: (sov_[a-z0-9]+) \(pass it as "session" in later calls\)`)

// TestFleet runs tool calls end to end through real workers and Chromium.
// One NATS, one worker with two sessions, two gateways.
func TestFleet(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	workerBus := connect(t, srv)
	a := startGateway(t, srv, gateway.Config{})
	b := startGateway(t, srv, gateway.Config{})
	site := startSite(t)

	t.Run("seed checks with a tool call", func(t *testing.T) {
		seedChecks(t, a)
		c := &rpc{t: t, url: a}
		r := c.call(initializeBody)
		c.session = r.header.Get("Mcp-Session-Id")
		c.header = http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
		// 10. a tool call works.
		r = c.call(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_url","arguments":{}}}`)
		res := r.result()
		if r.status != http.StatusOK || res == nil || res["isError"] == true {
			t.Fatalf("tools/call get_url: status %d body %s", r.status, r.body)
		}
		if !strings.Contains(string(r.body), "about:blank") {
			t.Errorf("get_url of a new session = %s, want about:blank", r.body)
		}
		if r := c.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
			t.Fatalf("DELETE: %d", r.status)
		}
		waitSessions(t, workerBus, "w1", 0)
	})

	t.Run("2025 client", func(t *testing.T) {
		c := legacyClient(t, a, nil)
		mustOK(t, callTool(t, c, "open", map[string]any{"url": site}), "open")
		if got := mustOK(t, callTool(t, c, "get_url", nil), "get_url"); !strings.Contains(got, site) {
			t.Errorf("get_url = %q, want %s", got, site)
		}
		if got := mustOK(t, callTool(t, c, "get_title", nil), "get_title"); !strings.Contains(got, "Sovereign test") {
			t.Errorf("get_title = %q", got)
		}
		snap := mustOK(t, callTool(t, c, "snapshot", nil), "snapshot")
		m := regexp.MustCompile(`button "Go" \[ref=(\w+)\]`).FindStringSubmatch(snap)
		if m == nil {
			t.Fatalf("snapshot has no Go button with a ref:\n%s", snap)
		}
		mustOK(t, callTool(t, c, "fill", map[string]any{"selector": "#name", "value": "Ada"}), "fill")
		mustOK(t, callTool(t, c, "click", map[string]any{"ref": "@" + m[1]}), "click")
		if got := mustOK(t, callTool(t, c, "get_text", map[string]any{"selector": "#out"}), "get_text"); !strings.Contains(got, "clicked Ada") {
			t.Errorf("get_text after click = %q, want clicked Ada", got)
		}
		if got := mustOK(t, callTool(t, c, "eval", map[string]any{"script": "6 * 7"}), "eval"); !strings.Contains(got, "42") {
			t.Errorf("eval = %q, want 42", got)
		}
		for _, format := range []string{"png", "jpeg"} {
			res := callTool(t, c, "screenshot", map[string]any{"format": format})
			mustOK(t, res, "screenshot")
			img := imageOf(t, res)
			want := map[string][]byte{"png": []byte("\x89PNG"), "jpeg": {0xff, 0xd8}}[format]
			if img.MIMEType != "image/"+format || !bytes.HasPrefix(decode(t, img.Data), want) {
				t.Errorf("screenshot %s: mime %q, data starts %q", format, img.MIMEType, decode(t, img.Data)[:4])
			}
		}
		errs := []struct {
			tool string
			args map[string]any
			want string
		}{
			{"click", map[string]any{"ref": "e999"}, "click: not found"},
			{"eval", map[string]any{"script": "throw new Error('boom')"}, "JavaScript error"},
			{"open", map[string]any{"url": "file:///etc/passwd"}, "refused by policy"},
			{"click", map[string]any{}, "say which element"},
		}
		for _, e := range errs {
			res := callTool(t, c, e.tool, e.args)
			if !res.IsError || !strings.Contains(text(res), e.want) {
				t.Errorf("%s(%v) = %q (isError %v), want an error containing %q", e.tool, e.args, text(res), res.IsError, e.want)
			}
		}

		// The same MCP session on the other gateway reaches the same page.
		tr, err := transport.NewStreamableHTTP(b, transport.WithSession(c.GetSessionId()))
		if err != nil {
			t.Fatal(err)
		}
		onB := client.NewClient(tr, client.WithSession(), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
		if err := onB.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = onB.Close() })
		if got := mustOK(t, callTool(t, onB, "get_text", map[string]any{"selector": "#out"}), "get_text on gateway B"); !strings.Contains(got, "clicked Ada") {
			t.Errorf("get_text on gateway B = %q, want the page gateway A drove", got)
		}

		// DELETE (on B) closes the browser session.
		del := &rpc{t: t, url: b, session: c.GetSessionId()}
		if r := del.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
			t.Fatalf("DELETE on B: %d %s", r.status, r.body)
		}
		waitSessions(t, workerBus, "w1", 0)
	})

	t.Run("2026 client", func(t *testing.T) {
		aliceAuth, _ := newToken(t, srv, tokens.Spec{Name: "alice"})
		malloryAuth, _ := newToken(t, srv, tokens.Spec{Name: "mallory"})
		for _, gw := range []string{a, b} { // the gateways learn of the tokens through their KV watch
			awaitStatus(t, gw, aliceAuth, http.StatusOK)
			awaitStatus(t, gw, malloryAuth, http.StatusOK)
		}
		alice := modernClient(t, a, map[string]string{"Authorization": aliceAuth})
		res := callTool(t, alice, "open", map[string]any{"url": site})
		mustOK(t, res, "open without a session")
		m := handleLine.FindStringSubmatch(text(res))
		if m == nil {
			t.Fatalf("first result = %q, want a first line naming the new session", text(res))
		}
		h := m[1]
		if metaSession(res) != h {
			t.Errorf("_meta session = %q, want %q", metaSession(res), h)
		}
		var structured map[string]any
		raw, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(raw, &structured) != nil || structured["session"] != h {
			t.Errorf("structuredContent = %s, want session %q", raw, h)
		}

		// Later calls with the handle, on either gateway, see the same page.
		res = callTool(t, alice, "get_title", map[string]any{"session": h})
		if got := mustOK(t, res, "get_title"); !strings.Contains(got, "Sovereign test") || strings.Contains(got, "session: ") {
			t.Errorf("get_title with the handle = %q", got)
		}
		aliceB := modernClient(t, b, map[string]string{"Authorization": aliceAuth})
		mustOK(t, callTool(t, aliceB, "click", map[string]any{"selector": "a", "session": h}), "click on B")
		if got := mustOK(t, callTool(t, alice, "get_title", map[string]any{"session": h}), "get_title"); !strings.Contains(got, "Next") {
			t.Errorf("title after following the link on B = %q, want Next", got)
		}

		// Another caller cannot use it.
		mallory := modernClient(t, b, map[string]string{"Authorization": malloryAuth})
		if res := callTool(t, mallory, "get_url", map[string]any{"session": h}); !strings.HasPrefix(text(res), "unknown or expired session handle") {
			t.Errorf("mallory with alice's handle = %q", text(res))
		}
		if n := workerSessions(t, workerBus, "w1"); n != 1 {
			t.Errorf("worker holds %d sessions, want 1 (the handle's)", n)
		}
	})

	// A tool this worker cannot run (Lighthouse is not installed on it):
	// the model reads why, and the session is kept, not taken for lost.
	t.Run("a tool the worker lacks", func(t *testing.T) {
		c := legacyClient(t, a, nil)
		mustOK(t, callTool(t, c, "open", map[string]any{"url": site}), "open")
		res := callTool(t, c, "lighthouse_audit", map[string]any{"mode": "snapshot"})
		if got := text(res); !res.IsError || !strings.HasPrefix(got, "lighthouse_audit: Lighthouse is not installed on this worker") || !strings.Contains(got, "make lighthouse") {
			t.Errorf("lighthouse_audit on a worker without it = %v %q", res.IsError, got)
		}
		if got := mustOK(t, callTool(t, c, "get_url", nil), "get_url"); !strings.Contains(got, site) {
			t.Errorf("get_url after it = %q, want the same session on %s", got, site)
		}
	})
}

func waitSessions(t *testing.T, c *bus.Conn, worker string, want int) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		n := workerSessions(t, c, worker)
		return kittest.Check(n == want, "worker %s holds %d sessions, want %d", worker, n, want)
	})
}

func imageOf(t *testing.T, r *mcp.CallToolResult) mcp.ImageContent {
	t.Helper()
	for _, c := range r.Content {
		if img, ok := c.(mcp.ImageContent); ok {
			return img
		}
	}
	t.Fatalf("result has no image content: %q", text(r))
	return mcp.ImageContent{}
}

func decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) < 4 {
		t.Fatalf("image data is not base64 of an image: %v", err)
	}
	return b
}

// TestNoCapacity: with every worker at its limit, opening a session says so.
func TestNoCapacity(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "solo", 1)
	url := startGateway(t, srv, gateway.Config{})

	first := legacyClient(t, url, nil)
	mustOK(t, callTool(t, first, "get_url", nil), "first session")
	second := modernClient(t, url, nil)
	res := callTool(t, second, "get_url", nil)
	want := "no browser capacity: every worker is at its session limit (1 worker, 1 of 1 sessions in use)"
	if !res.IsError || !strings.HasPrefix(text(res), want) {
		t.Fatalf("second session = %q, want %q…", text(res), want)
	}
}

// TestWorkerKilled: a worker process killed with SIGKILL mid-call fails that
// call within about a second with a clear error; the gateway and the other
// sessions carry on, and the client's next call gets a fresh session on a
// live worker.
func TestWorkerKilled(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "127.0.0.1:0")
	bin := buildWorker(t)
	obs := connect(t, srv)

	// The doomed worker, a real process holding one session at most.
	cmd := exec.Command(bin, "--nats-url", srv.ClientURL(), "--worker-id", "doomed", "--chrome", chromium, "--max-sessions", "1", "--listen", "")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("doomed worker output:\n%s", logs.String())
		}
	})
	waitForWorker(t, obs, "doomed", exited)

	url := startGateway(t, srv, gateway.Config{})
	victim := legacyClient(t, url, nil)
	mustOK(t, callTool(t, victim, "get_url", nil), "session on the doomed worker")
	if n := workerSessions(t, obs, "doomed"); n != 1 {
		t.Fatalf("doomed worker holds %d sessions, want the victim's", n)
	}

	// A live worker and a bystander session on it.
	startWorker(t, srv, "live", 2)
	site := startSite(t)
	bystander := modernClient(t, url, nil)
	res := callTool(t, bystander, "open", map[string]any{"url": site})
	mustOK(t, res, "bystander open")
	h := handleLine.FindStringSubmatch(text(res))[1]

	// Kill the doomed worker in the middle of a 20 s wait: once the call
	// is on its way to the worker (a copy of it reaches obs).
	calls, err := obs.NATS().SubscribeSync(browserbus.Of("doomed").Call.Subject(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = calls.Unsubscribe() }()
	var wg sync.WaitGroup
	var waitRes *mcp.CallToolResult
	var returned time.Time
	wg.Go(func() {
		waitRes = callTool(t, victim, "wait", map[string]any{"ms": 20000})
		returned = time.Now()
	})
	if _, err := calls.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("the wait call did not reach the doomed worker: %v", err)
	}
	killed := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	took := returned.Sub(killed)
	t.Logf("the call failed %s after SIGKILL", took.Round(time.Millisecond))
	if !waitRes.IsError || !strings.Contains(text(waitRes), "the browser session was lost (its worker or its browser stopped); the next call opens a fresh session") {
		t.Fatalf("wait on the killed worker = %q, want the lost-session error", text(waitRes))
	}
	// It should notice within about a second (liveness pings every
	// 300 ms); the bound only has to tell that from waiting out the 20 s,
	// with room for a loaded machine.
	if took > 15*time.Second {
		t.Errorf("the call failed %s after the kill; it should notice within about a second, not wait out its 20 s", took)
	}

	// The bystander carries on; the victim's next call gets a fresh session.
	if got := mustOK(t, callTool(t, bystander, "get_title", map[string]any{"session": h}), "bystander"); !strings.Contains(got, "Sovereign test") {
		t.Errorf("bystander title = %q", got)
	}
	if got := mustOK(t, callTool(t, victim, "get_url", nil), "victim's next call"); !strings.Contains(got, "about:blank") {
		t.Errorf("victim's fresh session url = %q, want about:blank", got)
	}
	if n := workerSessions(t, obs, "live"); n != 2 {
		t.Errorf("live worker holds %d sessions, want 2 (bystander and the victim's fresh one)", n)
	}
}

// buildWorker builds the browser worker command into a temporary directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the worker")
	}
	out := filepath.Join(t.TempDir(), "browser")
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/sovereign-fleet/sovereign/services/browser/cmd/browser")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the worker: %v\n%s", err, b)
	}
	return out
}
