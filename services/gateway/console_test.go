package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/history"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

const adminToken = "console-test-admin-token-0123456789"

// startHistory runs the history service in-process on SQLite in a temp dir.
func startHistory(t *testing.T, srv *natsrv.Server) {
	t.Helper()
	h, err := history.New(context.Background(), history.Config{DataDir: t.TempDir(), Retention: history.DefaultRetention}, connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kittest.RunService(t, h)
	select {
	case <-h.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("history did not attach to the audit stream")
	}
}

// serveGateway runs a gateway with ServeListener (so its admin listener
// runs too) until the test ends, and returns it with its /mcp URL.
func serveGateway(t *testing.T, srv *natsrv.Server, cfg gateway.Config) (*gateway.Gateway, string) {
	t.Helper()
	g, err := gateway.New(context.Background(), cfg, connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
		if err := g.Close(context.Background()); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	return g, "http://" + ln.Addr().String() + "/mcp"
}

// adminURL waits until g serves its console and returns its URL.
func adminURL(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		u := g.AdminURL()
		return u, kittest.Check(u != "", "the operator console has not started")
	})
}

// browserCtx starts a headless Chromium for the test to drive the console.
func browserCtx(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// step runs browser actions with a deadline, failing the test with what.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s: %v (page %s)", what, err, loc)
	}
}

// text reads an element's text.
func textOf(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

// screenshot saves the page as /tmp/console-<name>.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile("/tmp/console-"+name+".png", png, 0o644); err != nil {
		t.Logf("save screenshot: %v", err)
	}
}

// TestConsole drives the operator console in a real browser: log in with
// the admin token, see an approval request arrive live and approve it, find
// a tool call in the audit trail and open it, and close a live session.
func TestConsole(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "console-w1", 2)
	startHistory(t, srv)
	g, mcpURL := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: "127.0.0.1:0", AdminToken: adminToken}, ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval"}}, PolicyConfig: gateway.PolicyConfig{AllowPrivate: true}})
	admin := adminURL(t, g)

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>Console test page</title><h1>hello</h1>")
	}))
	t.Cleanup(site.Close)
	pageURL := site.URL + "/page?q=console-marker"
	nc := connect(t, srv)
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	apiToken, _, err := g.Tokens().Create(sctx, tokens.Spec{Name: "ci-agent"})
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	sec, err := secrets.Open(sctx, nc.NATS(), nc.Prefix(), key)
	if err != nil {
		t.Fatal(err)
	}
	const secretValue = "hunter2-console-secret-value"
	if err := sec.Set(sctx, "GITHUB_PASSWORD", []byte(secretValue)); err != nil {
		t.Fatal(err)
	}
	client := legacyClient(t, mcpURL, map[string]string{"Authorization": "Bearer " + apiToken})
	if res := callTool(t, client, "open", map[string]any{"url": pageURL}); res.IsError {
		t.Fatalf("open: %s", text(res))
	}

	ctx := browserCtx(t)

	// Not logged in: the console sends the browser to the login page.
	step(t, ctx, "open the console", chromedp.Navigate(admin+"approvals"), chromedp.WaitVisible(chromedp.ID("token")))
	screenshot(t, ctx, "login")
	step(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.SendKeys(chromedp.ID("name"), "ada"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("approval-lists")),
	)
	if got := textOf(t, ctx, "#approval-lists"); !strings.Contains(got, "Nothing is waiting") {
		t.Fatalf("approvals page before any request: %q", got)
	}

	// A call of a monitored tool waits; the open page shows it without a
	// reload.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	called := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "eval"
		req.Params.Arguments = map[string]any{"script": `document.title + "<img src=x onerror=alert(1)>"`}
		res, err := client.CallTool(ctx, req)
		called <- answer{res, err}
	}()
	step(t, ctx, "see the request arrive live", chromedp.WaitVisible(chromedp.CSS("article.approval")))
	if got := textOf(t, ctx, "article.approval pre.args"); !strings.Contains(got, `<img src=x onerror=alert(1)>`) {
		t.Errorf("the arguments are not shown as text: %q", got)
	}
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("article.approval img").length`))
	if err != nil || imgs != 0 {
		t.Errorf("the model's arguments became markup: %d img elements (%v)", imgs, err)
	}
	if got := textOf(t, ctx, "#pending-count"); got != "1" {
		t.Errorf("nav count of pending approvals = %q, want 1", got)
	}
	time.Sleep(1100 * time.Millisecond) // time passes: the countdown ticks once for the screenshot
	screenshot(t, ctx, "approvals")
	step(t, ctx, "approve once",
		chromedp.Click(chromedp.CSS(`article.approval button[value="once"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice.ok")),
	)
	select {
	case a := <-called:
		if a.err != nil || a.res.IsError || !strings.Contains(text(a.res), "Console test page<img src=x") {
			t.Fatalf("eval after the approval = %v, %v; want the page title and the string", a.res, a.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("eval did not return after the console approved it")
	}
	if got := textOf(t, ctx, "#approval-lists"); !strings.Contains(got, "console:ada") || !strings.Contains(got, "approved · once") {
		t.Errorf("recent decisions do not show the approval: %q", got)
	}
	screenshot(t, ctx, "approvals-decided")

	// The open call is in the audit trail, with its arguments.
	kittest.Eventually(t, 30*time.Second, func() error {
		step(t, ctx, "search the audit trail", chromedp.Navigate(admin+"audit?text=console-marker"), chromedp.WaitVisible(chromedp.CSS("main")))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#audit-table tbody tr").length`))
		if err != nil {
			return err
		}
		return kittest.Check(n > 0, "the open call did not show in the audit trail: %s", textOf(t, ctx, "main"))
	})
	screenshot(t, ctx, "audit")
	step(t, ctx, "open the record", chromedp.Click(chromedp.CSS("#audit-table tbody tr td:nth-child(3)")), chromedp.WaitVisible(chromedp.ID("arguments")))
	if got := textOf(t, ctx, "#arguments"); !strings.Contains(got, pageURL) {
		t.Errorf("the record's arguments = %q, want the URL %s", got, pageURL)
	}
	if got := textOf(t, ctx, "main h1"); !strings.Contains(got, "open") {
		t.Errorf("the record's heading = %q, want the tool", got)
	}
	// The approved eval's record says who approved it.
	step(t, ctx, "open the eval record", chromedp.Navigate(admin+"audit?tool=eval"), chromedp.WaitVisible(chromedp.ID("audit-table")),
		chromedp.Click(chromedp.CSS("#audit-table tbody tr td:nth-child(3)")), chromedp.WaitVisible(chromedp.ID("approval")))
	if got := textOf(t, ctx, "#approval"); !strings.Contains(got, "console:ada") || !strings.Contains(got, "approved · once") {
		t.Errorf("the eval record's approval = %q, want approved once by console:ada", got)
	}
	if got := textOf(t, ctx, "#arguments"); !strings.Contains(got, "<img src=x") {
		t.Errorf("the eval record's arguments = %q", got)
	}
	screenshot(t, ctx, "audit-detail")

	// The session is live; closing it makes the next call start afresh.
	step(t, ctx, "open the sessions", chromedp.Navigate(admin+"sessions"), chromedp.WaitVisible(chromedp.ID("sessions-table")))
	row := textOf(t, ctx, "#sessions-table tbody")
	if !strings.Contains(row, "console-w1") || !strings.Contains(row, "console-marker") || !strings.Contains(row, "mcp") || !strings.Contains(row, "ci-agent") {
		t.Errorf("sessions table = %q, want ci-agent's MCP session on console-w1 at %s", row, pageURL)
	}
	screenshot(t, ctx, "sessions")
	step(t, ctx, "close the session",
		chromedp.Click(chromedp.CSS(`#sessions-table button`)),
		chromedp.WaitVisible(chromedp.CSS(".notice.ok")),
	)
	if got := textOf(t, ctx, "main"); !strings.Contains(got, "No live browser sessions") {
		t.Errorf("after Close the sessions page shows %q", got)
	}
	if got := text(callTool(t, client, "get_url", map[string]any{})); strings.Contains(got, "console-marker") {
		t.Errorf("after Close the MCP session still has its old page: get_url = %q", got)
	}

	for p, want := range map[string]string{"tokens": "ci-agent", "secrets": "GITHUB_PASSWORD"} {
		step(t, ctx, "open "+p, chromedp.Navigate(admin+p), chromedp.WaitVisible(chromedp.CSS("main h1")))
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(html, want) {
			t.Errorf("the %s page does not list %s", p, want)
		}
		if strings.Contains(html, apiToken) || strings.Contains(html, secretValue) {
			t.Errorf("the %s page shows a token or a secret value", p)
		}
		screenshot(t, ctx, p)
	}
}

// TestConsoleHTTP checks the console's guard on a real gateway: no token, a
// wrong token, cross-site POSTs, and the JSON API with the Bearer token.
func TestConsoleHTTP(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	g, _ := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: "127.0.0.1:0", AdminToken: adminToken}})
	admin := strings.TrimSuffix(adminURL(t, g), "/")
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, body io.Reader, h map[string]string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, admin+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	if st, h, _ := do("GET", "/approvals", nil, nil); st != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("GET /approvals without login: %d %s, want 303 to /login", st, h.Get("Location"))
	}
	if st, h, _ := do("GET", "/api/approvals", nil, nil); st != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Errorf("GET /api/approvals without token: %d, want 401 with WWW-Authenticate", st)
	}
	if st, _, _ := do("GET", "/api/approvals", nil, map[string]string{"Authorization": "Bearer " + adminToken + "x"}); st != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", st)
	}
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	formType := "application/x-www-form-urlencoded"
	if st, _, _ := do("POST", "/login", form(url.Values{"token": {"not-the-token-at-all"}}), map[string]string{"Content-Type": formType, "Origin": admin}); st != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", st)
	}
	if st, _, _ := do("POST", "/login", form(url.Values{"token": {adminToken}}), map[string]string{"Content-Type": formType, "Origin": "http://evil.example"}); st != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", st)
	}
	if st, _, _ := do("POST", "/login", form(url.Values{"token": {adminToken}}), map[string]string{"Content-Type": formType, "Origin": admin}); st != http.StatusSeeOther {
		t.Fatalf("login: %d, want 303", st)
	}

	// A pending request: a cross-site POST riding on the cookie cannot
	// decide it; the same POST from the console's origin can.
	nc := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	queue, err := approval.Open(ctx, nc.NATS(), nc.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	req, err := queue.Submit(ctx, approval.Request{Tool: "eval", Arguments: `{"expression":"1"}`, Caller: "ci-agent"})
	if err != nil {
		t.Fatal(err)
	}
	deny := url.Values{"decision": {"deny"}}
	if st, _, _ := do("POST", "/approvals/"+req.ID, form(deny), map[string]string{"Content-Type": formType, "Origin": "http://evil.example"}); st != http.StatusForbidden {
		t.Errorf("cross-site decision: %d, want 403", st)
	}
	if cur, err := queue.Get(ctx, req.ID); err != nil || cur.State != approval.Pending {
		t.Fatalf("after a cross-site POST the request is %+v, %v; want pending", cur, err)
	}
	if st, _, _ := do("POST", "/sessions/mcp."+strings.Repeat("0", 64)+"/close", nil, map[string]string{"Origin": "http://evil.example"}); st != http.StatusForbidden {
		t.Errorf("cross-site close: %d, want 403", st)
	}
	if st, h, _ := do("POST", "/approvals/"+req.ID, form(deny), map[string]string{"Content-Type": formType, "Origin": admin}); st != http.StatusSeeOther || h.Get("Location") != "/approvals?done=deny" {
		t.Fatalf("same-origin decision: %d %s", st, h.Get("Location"))
	}
	if cur, err := queue.Get(ctx, req.ID); err != nil || cur.State != approval.Denied || cur.DecidedBy != "console:admin" {
		t.Fatalf("after the decision the request is %+v, %v; want denied by console:admin", cur, err)
	}
	// Deciding it again says it was decided.
	st, _, body := do("POST", "/api/approvals/"+req.ID, strings.NewReader(`{"decision":"once"}`), map[string]string{"Authorization": "Bearer " + adminToken})
	if st != http.StatusConflict || !strings.Contains(body, "already decided") {
		t.Errorf("deciding twice over the API: %d %s, want 409", st, body)
	}
	// The JSON API never shows the request's owner digest.
	if st, _, body := do("GET", "/api/approvals", nil, map[string]string{"Authorization": "Bearer " + adminToken}); st != 200 || !strings.Contains(body, req.ID) || strings.Contains(body, `"owner"`) {
		t.Errorf("GET /api/approvals: %d %s", st, body)
	}
	// No history service runs here: the audit page says so.
	if st, _, body := do("GET", "/audit", nil, nil); st != 200 || !strings.Contains(body, "no history service answers") {
		t.Errorf("audit page without history: %d, want the reason in the page", st)
	}
}

// TestConsoleOffWithoutToken: without an admin token the console's routes
// do not exist anywhere, and an explicit --admin-listen gets a warning.
func TestConsoleOffWithoutToken(t *testing.T) {
	logs := captureLogs(t)

	srv := startNATS(t, "")
	// The test holds --admin-listen's port (a port closed to be free
	// again could be taken by anyone before the check): a gateway that
	// tried to listen there would fail to serve at all.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().String()
	g, mcpURL := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: port}})
	if g.AdminHandler() != nil {
		t.Fatal("a console exists without an admin token")
	}
	base := strings.TrimSuffix(mcpURL, "/mcp")
	for _, p := range []string{"/approvals", "/login", "/api/approvals", "/admin/approvals"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the MCP listener: %d, want 404", p, resp.StatusCode)
		}
	}
	if g.AdminURL() != "" {
		t.Errorf("the console serves at %s without an admin token", g.AdminURL())
	}
	out := logs.take()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "operator console is off") {
		t.Errorf("no warning about the console being off:\n%s", out)
	}

	// Without --admin-listen there is nothing to warn about.
	serveGateway(t, srv, gateway.Config{})
	out = logs.take()
	if strings.Contains(out, "operator console") {
		t.Errorf("a gateway without console settings logged about the console:\n%s", out)
	}
}

// TestConsoleBeyondLoopbackWarning: a console listening on every interface
// is warned about, unless --admin-published says the container runtime
// publishes it on loopback only (compose: 127.0.0.1:8086), in which case
// the published URL is the one logged.
func TestConsoleBeyondLoopbackWarning(t *testing.T) {
	logs := captureLogs(t)
	srv := startNATS(t, "")
	for _, tc := range []struct {
		published string
		warn      bool
		url       string
	}{
		{"", true, ""},
		{"127.0.0.1:18086", false, "url=http://127.0.0.1:18086/"},
		{"localhost:18086", false, "url=http://localhost:18086/"},
		{"192.0.2.10:8086", true, "url=http://192.0.2.10:8086/"},
	} {
		logs.take()
		g, _ := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: "0.0.0.0:0", AdminPublished: tc.published, AdminToken: adminToken}})
		adminURL(t, g)
		out := logs.take()
		if got := strings.Contains(out, "operator console listens beyond loopback"); got != tc.warn {
			t.Errorf("published %q: warned %v, want %v:\n%s", tc.published, got, tc.warn, out)
		}
		if !strings.Contains(out, "operator console serving") || !strings.Contains(out, tc.url) {
			t.Errorf("published %q: the console's URL is not logged as %q:\n%s", tc.published, tc.url, out)
		}
	}
	if _, err := gateway.New(context.Background(), gateway.Config{AdminConfig: gateway.AdminConfig{AdminToken: adminToken, AdminPublished: "8086"}}, connect(t, srv)); err == nil || !strings.Contains(err.Error(), "--admin-published") {
		t.Errorf("--admin-published 8086: %v, want an error naming the flag", err)
	}
}

// TestConsoleConfigErrors: a short token and a taken port are clear errors.
func TestConsoleConfigErrors(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	_, err := gateway.New(context.Background(), gateway.Config{AdminConfig: gateway.AdminConfig{AdminToken: "too-short"}}, connect(t, srv))
	if err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("New with a 9-character admin token: %v, want an error saying at least 16", err)
	}
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.New(context.Background(), gateway.Config{AdminConfig: gateway.AdminConfig{AdminToken: adminToken, AdminTokenFile: file}}, connect(t, srv)); err == nil || !strings.Contains(err.Error(), "one or the other") {
		t.Errorf("token and token file both set: %v", err)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	g, err := gateway.New(context.Background(), gateway.Config{AdminConfig: gateway.AdminConfig{AdminTokenFile: file, AdminListen: taken.Addr().String()}}, connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = g.ServeListener(ctx, ln)
	if err == nil || !strings.Contains(err.Error(), "--admin-listen") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("ServeListener with the admin port taken: %v, want an error naming the address and --admin-listen", err)
	}
	_ = g.Close(context.Background())
}
