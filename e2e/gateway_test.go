package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// browserTools are the browser tools every gateway lists.
var browserTools = []string{
	"open", "back", "forward", "reload", "get_url", "get_title",
	"snapshot", "get_text", "get_html", "get_attr", "get_styles", "eval",
	"click", "fill", "type", "press", "scroll", "hover", "focus", "close",
	"tab_list", "tab_new", "tab_switch", "tab_close",
	"wait", "wait_for", "screenshot",
}

// TestGateway runs the protocol-level checks against one fleet: two
// workers and two gateways on one nats-server.
func TestGateway(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 2, gateways: 2, maxSessions: 3})
	site := newSite(t)
	gw1, gw2 := f.Gateways[0], f.Gateways[1]

	t.Run("seed_checks", func(t *testing.T) { testSeedChecks(t, gw1.MCP, site) })
	t.Run("fill_fires_input_events", func(t *testing.T) { testFillEvents(t, gw1.MCP, site) })
	t.Run("origin_guard", func(t *testing.T) { testOriginGuard(t, gw1.MCP) })
	t.Run("large_result", func(t *testing.T) { testLargeResult(t, gw2.MCP, site) })
	t.Run("modern_client_handles", func(t *testing.T) { testModernClient(t, f, gw1.MCP, gw2.MCP, site) })
	t.Run("typescript_sdk", func(t *testing.T) { testTypeScriptSDK(t, gw1.MCP, site) })
	t.Run("cross_gateway", func(t *testing.T) { testCrossGateway(t, f, gw1.MCP, gw2.MCP, site) })
}

// testSeedChecks is the seed's ten integration checks over raw HTTP.
func testSeedChecks(t *testing.T, url, site string) {
	ctx := callCtx(t, 90*time.Second)
	c := harness.NewMCPClient(url)

	// 1. initialize → Mcp-Session-Id header and a result.
	r, err := c.Post(ctx, "initialize", harness.InitializeParams("seed-checks"), false)
	if err != nil {
		t.Fatalf("1 initialize: %v", err)
	}
	if r.Status != http.StatusOK || r.Msg == nil || r.Msg.Error != nil {
		t.Fatalf("1 initialize: HTTP %d, body %s", r.Status, r.Body)
	}
	c.SessionID = r.Header.Get("Mcp-Session-Id")
	if c.SessionID == "" {
		t.Fatalf("1 initialize: no Mcp-Session-Id header (headers %v)", r.Header)
	}
	var init harness.InitializeResult
	if err := json.Unmarshal(r.Msg.Result, &init); err != nil {
		t.Fatalf("1 initialize result %s: %v", r.Msg.Result, err)
	}
	if init.ProtocolVersion != harness.ProtocolVersion {
		t.Errorf("1 initialize: protocolVersion = %q, want %q", init.ProtocolVersion, harness.ProtocolVersion)
	}
	if init.ServerInfo.Name == "" {
		t.Errorf("1 initialize: serverInfo.name is empty")
	}
	if _, ok := init.Capabilities["tools"]; !ok {
		t.Errorf("1 initialize: capabilities %s lack tools", r.Msg.Result)
	}
	c.Protocol = init.ProtocolVersion

	// 2. tools/list has the browser tools, screenshot included.
	raw, err := c.Request(ctx, "tools/list", nil)
	if err != nil {
		t.Fatalf("2 tools/list: %v", err)
	}
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("2 tools/list result: %v", err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema["type"] != "object" {
			t.Errorf("2 tools/list: tool %s has description %q and inputSchema type %v", tl.Name, tl.Description, tl.InputSchema["type"])
		}
	}
	for _, want := range browserTools {
		if !slices.Contains(names, want) {
			t.Errorf("2 tools/list: no %q tool in %v", want, names)
		}
	}
	if len(names) < len(browserTools) {
		t.Errorf("2 tools/list: %d tools, want at least %d", len(names), len(browserTools))
	}

	// 3. ping with the session → empty result.
	raw, err = c.Request(ctx, "ping", nil)
	if err != nil {
		t.Fatalf("3 ping: %v", err)
	}
	if s := strings.TrimSpace(string(raw)); s != "{}" {
		t.Errorf("3 ping: result %s, want {}", s)
	}

	// 4, 5. resources/list and prompts/list → empty lists.
	for _, check := range []struct{ n, method, field string }{{"4", "resources/list", "resources"}, {"5", "prompts/list", "prompts"}} {
		raw, err := c.Request(ctx, check.method, nil)
		if err != nil {
			t.Errorf("%s %s: %v", check.n, check.method, err)
			continue
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Errorf("%s %s: result %s: %v", check.n, check.method, raw, err)
			continue
		}
		var items []any
		if err := json.Unmarshal(res[check.field], &items); err != nil || len(items) != 0 {
			t.Errorf("%s %s: %s = %s, want []", check.n, check.method, check.field, res[check.field])
		}
	}

	// 6. notifications/initialized → 202 Accepted, no body.
	r, err = c.Post(ctx, "notifications/initialized", nil, true)
	if err != nil {
		t.Fatalf("6 notifications/initialized: %v", err)
	}
	if r.Status != http.StatusAccepted || len(strings.TrimSpace(string(r.Body))) != 0 {
		t.Errorf("6 notifications/initialized: HTTP %d body %q, want 202 and no body", r.Status, r.Body)
	}

	// 7. GET /mcp → an event stream.
	func() {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := c.Get(gctx)
		if err != nil {
			t.Errorf("7 GET: %v", err)
			return
		}
		defer resp.Body.Close()
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("7 GET: HTTP %d Content-Type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}()

	// 8. DELETE → 200.
	status, err := c.Delete(ctx)
	if err != nil {
		t.Fatalf("8 DELETE: %v", err)
	}
	if status != http.StatusOK {
		t.Errorf("8 DELETE: HTTP %d, want 200", status)
	}

	// 9. ping after DELETE → 404.
	r, err = c.Post(ctx, "ping", nil, false)
	if err != nil {
		t.Fatalf("9 ping after DELETE: %v", err)
	}
	if r.Status != http.StatusNotFound {
		t.Errorf("9 ping after DELETE: HTTP %d, want 404 (body %s)", r.Status, r.Body)
	}

	// 10. a tool call works (the seed used login_status; get_url is the
	// first browser tool of a new session here).
	c2 := initClient(t, ctx, url)
	res, err := c2.Tool(ctx, "get_url", nil)
	if err != nil {
		t.Fatalf("10 get_url: %v", err)
	}
	if strings.TrimSpace(res.Text()) == "" {
		t.Errorf("10 get_url: empty text result")
	}
	if got := text(t, ctx, c2, "open", map[string]any{"url": site + "/form"}); got == "" {
		t.Errorf("10 open: empty text result")
	}
	if got := text(t, ctx, c2, "get_title", nil); !strings.Contains(got, harness.FormTitle) {
		t.Errorf("10 get_title = %q, want it to contain %q", got, harness.FormTitle)
	}
	if status, err := c2.Delete(ctx); err != nil || status != http.StatusOK {
		t.Errorf("DELETE of the second session: %d, %v", status, err)
	}
}

// testFillEvents checks that fill behaves like typing for the page: the
// input's value is set and its input listeners run.
func testFillEvents(t *testing.T, url, site string) {
	ctx := callCtx(t, 60*time.Second)
	c := initClient(t, ctx, url)
	defer c.Delete(context.Background())
	tool(t, ctx, c, "open", map[string]any{"url": site + "/form"})
	ref := refOf(t, ctx, c, "textbox", harness.FormInput)
	tool(t, ctx, c, "fill", map[string]any{"ref": "@" + ref, "value": "first"})
	tool(t, ctx, c, "fill", map[string]any{"target": ref, "value": "second value"})
	if got := evalString(t, ctx, c, "document.querySelector('#name').value"); got != "second value" {
		t.Errorf("after fill, input value = %q, want %q (fill must clear first)", got, "second value")
	}
	if got := text(t, ctx, c, "get_text", map[string]any{"selector": "#echo"}); got != "second value" {
		t.Errorf("after fill, #echo (written by the input listener) = %q, want %q: fill did not fire input events", got, "second value")
	}
}

var handleLine = regexp.MustCompile(`^session: (sov_[A-Za-z0-9_-]+)`)

// metaSession is the _meta key of a result that carries its session handle
// (services/gateway: MetaSession).
const metaSession = "sovereign/session"

// metaHandle returns the handle in a result's _meta, or "".
func metaHandle(res *mcp.CallToolResult) string {
	if res.Meta == nil {
		return ""
	}
	h, _ := res.Meta.AdditionalFields[metaSession].(string)
	return h
}

// handleOf returns the new session handle a 2026-07-28 tool result
// announces: as its first text line, in structuredContent.session and in
// _meta["sovereign/session"], all three the same.
func handleOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var first string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			first, _, _ = strings.Cut(tc.Text, "\n")
			break
		}
	}
	m := handleLine.FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first text line %q carries no session handle (want `session: sov_…`)", first)
	}
	handle := m[1]
	sc, _ := res.StructuredContent.(map[string]any)
	if h, _ := sc["session"].(string); h != handle {
		t.Errorf("structuredContent.session = %q, the text says %q", h, handle)
	}
	if h := metaHandle(res); h != handle {
		t.Errorf("_meta[%q] = %q, the text says %q", metaSession, h, handle)
	}
	return handle
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// modernClient connects mcp-go's client at protocol 2026-07-28 with the
// given Authorization header.
func modernClient(t *testing.T, ctx context.Context, url, auth string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": auth}))
	if err != nil {
		t.Fatalf("streamable HTTP transport: %v", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start mcp-go client: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "sovereign-e2e-mcp-go", Version: "0.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("mcp-go Initialize: %v", err)
	}
	if got := c.ProtocolVersion(); got != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("mcp-go client negotiated %q, want %q (no server/discover support?)", got, mcp.LATEST_PROTOCOL_VERSION)
	}
	if id := c.GetSessionId(); id != "" {
		t.Errorf("a 2026-07-28 connection got a protocol session id %q", id)
	}
	return c
}

func callModern(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

func mustModern(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := callModern(ctx, c, name, args)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, resultText(res))
	}
	return res
}

// testModernClient drives the gateway with mcp-go's client at 2026-07-28:
// explicit session handles, bound to the caller's credential.
func testModernClient(t *testing.T, f *harness.Fleet, url, url2, site string) {
	ctx := callCtx(t, 90*time.Second)
	aliceToken, malloryToken := newToken(t, ctx, f, "alice-e2e"), newToken(t, ctx, f, "mallory-e2e")
	alice := modernClient(t, ctx, url, "Bearer "+aliceToken)

	tools, err := alice.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(tools.Tools) < len(browserTools) {
		t.Errorf("tools/list: %d tools, want at least %d", len(tools.Tools), len(browserTools))
	}

	form := site + "/form"
	res := mustModern(t, ctx, alice, "open", map[string]any{"url": form})
	handle := handleOf(t, res)

	snap := mustModern(t, ctx, alice, "snapshot", map[string]any{"session": handle})
	if h := metaHandle(snap); h != handle {
		t.Errorf("_meta[%q] of a call with the handle = %q, want %q", metaSession, h, handle)
	}
	snapText := resultText(snap)
	if handleLine.MatchString(snapText) {
		t.Errorf("a call with a handle announces a session again:\n%s", snapText)
	}
	button := harness.FindRef(snapText, "button", harness.FormButton)
	input := harness.FindRef(snapText, "textbox", harness.FormInput)
	if button == "" || input == "" {
		t.Fatalf("snapshot lacks button %q or textbox %q refs:\n%s", harness.FormButton, harness.FormInput, snapText)
	}
	mustModern(t, ctx, alice, "click", map[string]any{"session": handle, "ref": button})
	mustModern(t, ctx, alice, "fill", map[string]any{"session": handle, "ref": "@" + input, "value": "alice was here"})
	out := mustModern(t, ctx, alice, "get_text", map[string]any{"session": handle, "selector": "#out"})
	if got := resultText(out); !strings.Contains(got, "clicked 1") {
		t.Errorf("get_text #out = %q, want it to contain %q", got, "clicked 1")
	}
	val := mustModern(t, ctx, alice, "eval", map[string]any{"session": handle, "script": "document.querySelector('#name').value"})
	if got := resultText(val); !strings.Contains(got, "alice was here") {
		t.Errorf("eval input value = %q, want it to contain %q", got, "alice was here")
	}

	// The same handle on the other gateway, same credential: same page.
	alice2 := modernClient(t, ctx, url2, "Bearer "+aliceToken)
	u := mustModern(t, ctx, alice2, "get_url", map[string]any{"session": handle})
	if got := resultText(u); !strings.Contains(got, form) {
		t.Errorf("get_url with the handle on gateway 2 = %q, want %q", got, form)
	}

	// Another credential presenting the handle is refused and learns nothing.
	mallory := modernClient(t, ctx, url, "Bearer "+malloryToken)
	bad, err := callModern(ctx, mallory, "get_url", map[string]any{"session": handle})
	switch {
	case err != nil:
		if strings.Contains(err.Error(), form) {
			t.Errorf("refusal leaks the page URL: %v", err)
		}
	case !bad.IsError:
		t.Errorf("get_url with alice's handle and mallory's credential succeeded: %s", resultText(bad))
	case strings.Contains(resultText(bad), form):
		t.Errorf("refusal leaks the page URL: %s", resultText(bad))
	default:
		t.Logf("foreign handle refused: %s", resultText(bad))
	}

	// A call without a handle gets a new session of its own.
	fresh := mustModern(t, ctx, alice, "get_url", nil)
	if h := handleOf(t, fresh); h == handle {
		t.Errorf("a call without a session argument reused handle %s", h)
	}
	if got := resultText(fresh); strings.Contains(got, form) {
		t.Errorf("a new session already shows %s: %q", form, got)
	}
}

// testTypeScriptSDK runs e2e/client-ts/scenario.mjs (the official SDK).
func testTypeScriptSDK(t *testing.T, url, site string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (make deps installs it): %v", err)
	}
	dir, err := filepath.Abs("client-ts")
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeModules(t, dir)

	ctx := callCtx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, node, "scenario.mjs", url, site+"/form")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	t.Logf("scenario.mjs stdout: %s", strings.TrimSpace(string(stdout)))
	if stderr.Len() > 0 {
		t.Logf("scenario.mjs stderr: %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("scenario.mjs failed: %v", err)
	}
	var out struct {
		OK              bool   `json:"ok"`
		Error           string `json:"error"`
		ProtocolVersion string `json:"protocolVersion"`
		SessionID       string `json:"sessionId"`
		Tools           int    `json:"tools"`
		HasScreenshot   bool   `json:"hasScreenshot"`
		Title           string `json:"title"`
		ButtonRef       string `json:"buttonRef"`
		InputRef        string `json:"inputRef"`
		ClickText       string `json:"clickText"`
		InputValue      string `json:"inputValue"`
		Screenshot      struct {
			MimeType string `json:"mimeType"`
			Bytes    int    `json:"bytes"`
			PNG      bool   `json:"png"`
		} `json:"screenshot"`
		Terminated bool `json:"terminated"`
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("scenario.mjs output is not one JSON line: %v", err)
	}
	if !out.OK {
		t.Fatalf("scenario.mjs reported failure: %s", out.Error)
	}
	if out.ProtocolVersion != harness.ProtocolVersion {
		t.Errorf("SDK negotiated %q, want %q", out.ProtocolVersion, harness.ProtocolVersion)
	}
	if out.Tools < len(browserTools) || !out.HasScreenshot {
		t.Errorf("SDK saw %d tools (screenshot: %v), want at least %d with screenshot", out.Tools, out.HasScreenshot, len(browserTools))
	}
	if out.Title != harness.FormTitle {
		t.Errorf("get_title = %q, want %q", out.Title, harness.FormTitle)
	}
	if !strings.Contains(out.ClickText, "clicked 1") || !strings.Contains(out.InputValue, "typed by the TypeScript SDK") {
		t.Errorf("click/fill results: #out %q, input %q", out.ClickText, out.InputValue)
	}
	if out.Screenshot.MimeType != "image/png" || !out.Screenshot.PNG || out.Screenshot.Bytes < 1000 {
		t.Errorf("screenshot = %+v, want a PNG of some size", out.Screenshot)
	}
	if !out.Terminated {
		t.Errorf("the SDK still holds a session id after terminateSession")
	}
	// terminateSession (DELETE) really ended the session.
	c := harness.NewMCPClient(url)
	c.SessionID, c.Protocol = out.SessionID, harness.ProtocolVersion
	r, err := c.Post(ctx, "ping", nil, false)
	if err != nil {
		t.Fatalf("ping the terminated session: %v", err)
	}
	if r.Status != http.StatusNotFound {
		t.Errorf("ping with the SDK's session after terminateSession: HTTP %d, want 404", r.Status)
	}
}

// ensureNodeModules runs `npm ci` in dir when the SDK is not installed
// there (make deps normally did it).
func ensureNodeModules(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("the TypeScript SDK is not installed in %s and npm is missing: run make deps", dir)
	}
	ctx := callCtx(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// testCrossGateway: a session started on gateway 1 continues on gateway 2
// (state lives in NATS KV), and DELETE on gateway 2 ends it for gateway 1.
func testCrossGateway(t *testing.T, f *harness.Fleet, url1, url2, site string) {
	ctx := callCtx(t, 90*time.Second)
	before := total(f.Sessions(ctx))

	c1 := initClient(t, ctx, url1)
	form := site + "/form"
	tool(t, ctx, c1, "open", map[string]any{"url": form})
	ref := refOf(t, ctx, c1, "textbox", harness.FormInput)
	tool(t, ctx, c1, "fill", map[string]any{"ref": ref, "value": "from gateway 1"})
	if got := total(f.Sessions(ctx)); got != before+1 {
		t.Errorf("workers hold %d sessions after the first tool call, want %d", got, before+1)
	}

	c2 := harness.NewMCPClient(url2)
	c2.SessionID, c2.Protocol = c1.SessionID, c1.Protocol
	if got := text(t, ctx, c2, "get_url", nil); !strings.Contains(got, form) {
		t.Errorf("get_url on gateway 2 = %q, want %q", got, form)
	}
	if got := evalString(t, ctx, c2, "document.querySelector('#name').value"); got != "from gateway 1" {
		t.Errorf("input value seen through gateway 2 = %q, want %q", got, "from gateway 1")
	}
	button := refOf(t, ctx, c2, "button", harness.FormButton)
	tool(t, ctx, c2, "click", map[string]any{"ref": button})
	if got := text(t, ctx, c1, "get_text", map[string]any{"selector": "#out"}); !strings.Contains(got, "clicked 1") {
		t.Errorf("get_text #out on gateway 1 after a click through gateway 2 = %q, want %q", got, "clicked 1")
	}

	// Another credential cannot use the session id, on either gateway.
	thief := harness.NewMCPClient(url2)
	thief.SessionID, thief.Protocol = c1.SessionID, c1.Protocol
	thief.Header.Set("Authorization", "Bearer "+newToken(t, ctx, f, "thief"))
	if r, err := thief.Post(ctx, "tools/call", map[string]any{"name": "get_url", "arguments": map[string]any{}}, false); err != nil {
		t.Errorf("thief get_url: %v", err)
	} else if r.Status != http.StatusNotFound {
		t.Errorf("get_url with the session id and another Authorization: HTTP %d, want 404 (body %s)", r.Status, r.Body)
	}

	status, err := c2.Delete(ctx)
	if err != nil || status != http.StatusOK {
		t.Fatalf("DELETE on gateway 2: %d, %v", status, err)
	}
	for _, m := range []string{"ping", "tools/call"} {
		var params any
		if m == "tools/call" {
			params = map[string]any{"name": "get_url", "arguments": map[string]any{}}
		}
		r, err := c1.Post(ctx, m, params, false)
		if err != nil {
			t.Fatalf("%s on gateway 1 after DELETE: %v", m, err)
		}
		if r.Status != http.StatusNotFound {
			t.Errorf("%s on gateway 1 after DELETE on gateway 2: HTTP %d, want 404 (body %s)", m, r.Status, r.Body)
		}
	}
	if got := total(f.Sessions(ctx)); got != before {
		t.Errorf("workers hold %d sessions after DELETE, want %d (the browser session was not closed)", got, before)
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// testOriginGuard: a web page's cross-origin request is refused (DNS
// rebinding protection), a loopback origin is served.
func testOriginGuard(t *testing.T, url string) {
	ctx := callCtx(t, 30*time.Second)
	for _, tt := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://127.0.0.1:1234", http.StatusOK},
	} {
		c := harness.NewMCPClient(url)
		c.Header.Set("Origin", tt.origin)
		r, err := c.Post(ctx, "initialize", harness.InitializeParams("origin-guard"), false)
		if err != nil {
			t.Fatalf("initialize with Origin %s: %v", tt.origin, err)
		}
		if r.Status != tt.want {
			t.Errorf("initialize with Origin %s: HTTP %d, want %d", tt.origin, r.Status, tt.want)
		}
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			c.SessionID = id
			_, _ = c.Delete(ctx)
		}
	}
}

// testLargeResult: a result larger than a NATS message (1 MiB by default)
// arrives whole and in order.
func testLargeResult(t *testing.T, url, site string) {
	const kb = 1536
	ctx := callCtx(t, 60*time.Second)
	c := initClient(t, ctx, url)
	defer c.Delete(context.Background())
	tool(t, ctx, c, "open", map[string]any{"url": fmt.Sprintf("%s/big?kb=%d", site, kb)})
	// Above the default cap (20,000 characters): max_chars lets it through.
	got := tool(t, ctx, c, "get_html", map[string]any{"selector": "#big", "max_chars": 2 * kb * 1024}).Text()
	want := harness.BigText(kb)
	if got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("get_html of a %d KiB element: %d bytes, want %d; they differ from byte %d (got %q…)",
			kb, len(got), len(want), i, got[i:min(len(got), i+40)])
	}
}

// newToken creates an API token on the fleet and waits until every
// gateway knows it (they follow the token bucket through a watch).
func newToken(t *testing.T, ctx context.Context, f *harness.Fleet, name string) string {
	t.Helper()
	tok, err := f.Token(ctx, name)
	if err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	for _, gw := range f.Gateways {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.MCP, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("probe %s: %v", gw.MCP, err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("gateway %s did not learn token %s", gw.MCP, name)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return tok
}
