package gateway_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// seedChecks runs the seed's integration checks 1-9 with raw HTTP and
// returns the client positioned after initialize (check 10, a tool call,
// needs a worker and is done by the caller).
func seedChecks(t *testing.T, url string) {
	t.Helper()
	c := &rpc{t: t, url: url}

	// 1. initialize returns Mcp-Session-Id and a JSON or SSE body.
	r := c.call(initializeBody)
	if r.status != http.StatusOK {
		t.Fatalf("initialize: status %d: %s", r.status, r.body)
	}
	c.session = r.header.Get("Mcp-Session-Id")
	if c.session == "" {
		t.Fatal("initialize: no Mcp-Session-Id header")
	}
	if got := r.result()["protocolVersion"]; got != "2025-11-25" {
		t.Fatalf("initialize: protocolVersion = %v, want 2025-11-25 (body %s)", got, r.body)
	}
	caps, _ := r.result()["capabilities"].(map[string]any)
	for _, want := range []string{"tools", "resources", "prompts", "logging"} {
		if _, ok := caps[want]; !ok {
			t.Errorf("initialize: capabilities = %v, want %q declared", caps, want)
		}
	}
	c.header = http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}

	// 6 (the client's next step). notifications/initialized → 202.
	if r := c.call(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Errorf("notifications/initialized: status %d, want 202", r.status)
	}

	// 2. tools/list has the catalog.
	r = c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	tools, _ := r.result()["tools"].([]any)
	if len(tools) != len(gateway.Tools()) {
		t.Fatalf("tools/list: %d tools, want %d (body %.300s)", len(tools), len(gateway.Tools()), r.body)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		m := tl.(map[string]any)
		names[m["name"].(string)] = true
		if _, ok := m["inputSchema"].(map[string]any); !ok {
			t.Errorf("tools/list: %v has no inputSchema", m["name"])
		}
	}
	for _, want := range []string{"login_status", "login", "logout", "switch_identity",
		"open", "snapshot", "click", "screenshot", "get_url", "tab_list", "wait_for"} {
		if !names[want] {
			t.Errorf("tools/list: no %s", want)
		}
	}

	// 3. ping with the session.
	if r := c.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.status != http.StatusOK || r.msg["result"] == nil {
		t.Errorf("ping: status %d body %s", r.status, r.body)
	}

	// 4. resources/list (and templates) are empty lists.
	for _, m := range []struct{ method, field string }{{"resources/list", "resources"}, {"resources/templates/list", "resourceTemplates"}} {
		r := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":%q}`, m.method))
		if list, ok := r.result()[m.field].([]any); !ok || len(list) != 0 {
			t.Errorf("%s: status %d body %s, want an empty %s list", m.method, r.status, r.body, m.field)
		}
	}

	// 5. prompts/list is an empty list.
	if r := c.call(`{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`); r.result()["prompts"] == nil || len(r.result()["prompts"].([]any)) != 0 {
		t.Errorf("prompts/list: status %d body %s", r.status, r.body)
	}

	// logging/setLevel is acknowledged.
	if r := c.call(`{"jsonrpc":"2.0","id":6,"method":"logging/setLevel","params":{"level":"info"}}`); r.msg["result"] == nil {
		t.Errorf("logging/setLevel: status %d body %s", r.status, r.body)
	}

	// 7. GET /mcp opens an SSE stream.
	func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /mcp: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("GET /mcp: status %d content type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}()

	// 8. DELETE ends the session.
	if r := c.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
		t.Errorf("DELETE: status %d body %s, want 200", r.status, r.body)
	}

	// 9. ping after DELETE → 404, and so do GET and another DELETE.
	if r := c.call(`{"jsonrpc":"2.0","id":7,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("ping after DELETE: status %d, want 404", r.status)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := c.do(m, "", nil); r.status != http.StatusNotFound {
			t.Errorf("%s after DELETE: status %d, want 404", m, r.status)
		}
	}
}

func TestSeedChecks(t *testing.T) {
	t.Parallel()
	url := startGateway(t, startNATS(t, ""), gateway.Config{})
	seedChecks(t, url)
}

func TestSessionHeaderRequired(t *testing.T) {
	t.Parallel()
	url := startGateway(t, startNATS(t, ""), gateway.Config{})
	tests := []struct {
		name    string
		method  string
		session string
		body    string
		want    int
	}{
		{"post without session", http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusBadRequest},
		{"post with unknown session", http.MethodPost, "mcp-doesnotexist0000", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusNotFound},
		{"post with malformed session", http.MethodPost, "a.b>c*", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusNotFound},
		{"get without session", http.MethodGet, "", "", http.StatusBadRequest},
		{"get with unknown session", http.MethodGet, "mcp-doesnotexist0000", "", http.StatusNotFound},
		{"delete without session", http.MethodDelete, "", "", http.StatusBadRequest},
		{"delete with unknown session", http.MethodDelete, "mcp-doesnotexist0000", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &rpc{t: t, url: url, session: tt.session}
			if r := c.do(tt.method, tt.body, nil); r.status != tt.want {
				t.Errorf("%s: status %d (%s), want %d", tt.method, r.status, r.body, tt.want)
			}
		})
	}
}

func TestSessionBoundToCaller(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	aliceAuth, _ := newToken(t, srv, tokens.Spec{Name: "alice"})
	malloryAuth, _ := newToken(t, srv, tokens.Spec{Name: "mallory"})
	url := startGateway(t, srv, gateway.Config{})
	alice := &rpc{t: t, url: url, header: http.Header{"Authorization": {aliceAuth}}}
	r := alice.call(initializeBody)
	alice.session = r.header.Get("Mcp-Session-Id")
	mallory := &rpc{t: t, url: url, session: alice.session, header: http.Header{"Authorization": {malloryAuth}}}
	if r := mallory.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Errorf("another caller's session: status %d, want 404", r.status)
	}
	if r := mallory.do(http.MethodDelete, "", nil); r.status != http.StatusNotFound {
		t.Errorf("DELETE of another caller's session: status %d, want 404", r.status)
	}
	if r := alice.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.status != http.StatusOK {
		t.Errorf("owner's ping after the attempts: status %d, want 200", r.status)
	}
}

func TestHostAndOrigin(t *testing.T) {
	srv := startNATS(t, "")
	def := startGateway(t, srv, gateway.Config{})
	custom := startGateway(t, srv, gateway.Config{
		AllowedHosts:   []string{"mcp.example.com", "*.internal.test", "127.0.0.1"},
		AllowedOrigins: []string{"https://app.example.com", "localhost"},
	})
	// SOVEREIGN_ALLOWED_HOSTS and SOVEREIGN_ALLOWED_ORIGINS add to the
	// loopback names.
	t.Setenv("SOVEREIGN_ALLOWED_HOSTS", "mcp.example.com")
	t.Setenv("SOVEREIGN_ALLOWED_ORIGINS", "https://app.example.com")
	var errs []error
	envCfg := gateway.RegisterFlags(flag.NewFlagSet("test", flag.ContinueOnError), &errs)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	fromEnv := startGateway(t, srv, *envCfg)
	tests := []struct {
		name         string
		url          string
		host, origin string
		want         int
		wantBody     string
	}{
		{name: "default loopback host", url: def, want: http.StatusOK},
		{name: "default localhost any port", url: def, host: "localhost:9999", want: http.StatusOK},
		{name: "default ipv6 loopback", url: def, host: "[::1]:8080", want: http.StatusOK},
		{name: "default foreign host", url: def, host: "evil.example", want: http.StatusForbidden, wantBody: `Host "evil.example" is not allowed`},
		{name: "default rebinding host", url: def, host: "attacker.test:8080", want: http.StatusForbidden, wantBody: "--allowed-hosts"},
		{name: "default local origin", url: def, origin: "http://localhost:5173", want: http.StatusOK},
		{name: "default foreign origin", url: def, origin: "https://evil.example", want: http.StatusForbidden, wantBody: `Origin "https://evil.example" is not allowed`},
		{name: "default null origin", url: def, origin: "null", want: http.StatusForbidden},
		{name: "custom host", url: custom, host: "mcp.example.com", want: http.StatusOK},
		{name: "custom wildcard host", url: custom, host: "gw.internal.test:443", want: http.StatusOK},
		{name: "custom host not listed", url: custom, host: "other.example.com", want: http.StatusForbidden, wantBody: `Host "other.example.com" is not allowed`},
		{name: "custom keeps loopback names", url: custom, host: "localhost:8080", want: http.StatusOK},
		{name: "custom keeps ipv6 loopback", url: custom, host: "[::1]", want: http.StatusOK},
		{name: "custom origin not listed", url: custom, origin: "https://evil.example", want: http.StatusForbidden, wantBody: `Origin "https://evil.example" is not allowed`},
		{name: "custom keeps loopback origins", url: custom, origin: "http://127.0.0.1:5173", want: http.StatusOK},
		{name: "custom origin", url: custom, origin: "https://app.example.com", want: http.StatusOK},
		{name: "custom origin wrong scheme", url: custom, origin: "http://app.example.com", want: http.StatusForbidden},
		{name: "custom host-only origin", url: custom, origin: "http://localhost:3000", want: http.StatusOK},
		{name: "env host", url: fromEnv, host: "mcp.example.com", want: http.StatusOK},
		{name: "env keeps localhost", url: fromEnv, host: "localhost:8080", want: http.StatusOK},
		{name: "env host not listed", url: fromEnv, host: "other.example.com", want: http.StatusForbidden},
		{name: "env origin", url: fromEnv, origin: "https://app.example.com", want: http.StatusOK},
		{name: "env keeps loopback origins", url: fromEnv, origin: "http://localhost:3000", want: http.StatusOK},
		{name: "env origin not listed", url: fromEnv, origin: "https://evil.example", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, tt.url, strings.NewReader(initializeBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body strings.Builder
			_, _ = fmt.Fprint(&body, readAll(resp))
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body.String(), tt.want)
			}
			if tt.wantBody != "" && !strings.Contains(body.String(), tt.wantBody) {
				t.Errorf("body %q, want it to contain %q", body.String(), tt.wantBody)
			}
		})
	}
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	url := startGateway(t, startNATS(t, ""), gateway.Config{MaxBody: 4096})
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	tests := []struct {
		name    string
		chunked bool
	}{{"with content length", false}, {"chunked", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body = strings.NewReader(big)
			req, _ := http.NewRequest(http.MethodPost, url, body)
			if tt.chunked {
				req.ContentLength = -1
				req.Body = readerOnly{body}
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413", resp.StatusCode)
			}
		})
	}
	// A body under the limit still works.
	c := &rpc{t: t, url: url}
	if r := c.call(initializeBody); r.status != http.StatusOK {
		t.Errorf("small initialize: status %d", r.status)
	}
}

type readerOnly struct{ r *strings.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (readerOnly) Close() error                 { return nil }

func TestHealth(t *testing.T) {
	t.Parallel()
	url := strings.TrimSuffix(startGateway(t, startNATS(t, ""), gateway.Config{}), "/mcp")
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if path == "/readyz" && (!strings.Contains(body, `"nats":"ok"`) || !strings.Contains(body, `"kv":"ok"`)) {
			t.Errorf("GET /readyz = %s, want nats and kv ok", body)
		}
	}
}

// TestCrossGateway: a session initialized on one replica is served, and
// ended, by another on the same NATS.
func TestCrossGateway(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	a := startGateway(t, srv, gateway.Config{})
	b := startGateway(t, srv, gateway.Config{})

	ca := &rpc{t: t, url: a}
	r := ca.call(initializeBody)
	ca.session = r.header.Get("Mcp-Session-Id")
	cb := &rpc{t: t, url: b, session: ca.session}
	if r := cb.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != http.StatusOK || r.result()["tools"] == nil {
		t.Fatalf("tools/list on gateway B: status %d body %.200s", r.status, r.body)
	}
	if r := cb.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.status != http.StatusOK {
		t.Fatalf("ping on gateway B: status %d", r.status)
	}

	// A GET stream open on A ends when B ends the session.
	req, _ := http.NewRequest(http.MethodGet, a, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", ca.session)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET on gateway A: %v %v", stream, err)
	}
	defer stream.Body.Close()
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		_, _ = io.Copy(io.Discard, stream.Body)
	}()

	if r := cb.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
		t.Fatalf("DELETE on gateway B: status %d %s", r.status, r.body)
	}
	select {
	case <-streamEnded:
	case <-time.After(10 * time.Second):
		t.Error("the GET stream on gateway A is still open 10s after DELETE on B")
	}
	if r := ca.call(`{"jsonrpc":"2.0","id":4,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("ping on gateway A after DELETE on B: status %d, want 404", r.status)
	}
}

// TestClients drives the gateway with mcp-go's client in both protocol
// generations, on a fleet with no workers.
func TestClients(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	someone, _ := newToken(t, srv, tokens.Spec{Name: "someone"})
	url := startGateway(t, srv, gateway.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("2025-11-25", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		if c.GetSessionId() == "" {
			t.Fatal("no MCP session id")
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil || len(tools.Tools) != len(gateway.Tools()) {
			t.Fatalf("ListTools = %d tools, %v; want %d", len(tools.Tools), err, len(gateway.Tools()))
		}
		if res, err := c.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(res.Resources) != 0 {
			t.Errorf("ListResources = %v, %v; want empty", res, err)
		}
		if res, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil || len(res.Prompts) != 0 {
			t.Errorf("ListPrompts = %v, %v; want empty", res, err)
		}
		lvl := mcp.SetLevelRequest{}
		lvl.Params.Level = mcp.LoggingLevelInfo
		if err := c.SetLevel(ctx, lvl); err != nil {
			t.Errorf("SetLevel: %v", err)
		}
		res := callTool(t, c, "get_url", nil)
		if !res.IsError || !strings.Contains(text(res), "no browser workers are running") {
			t.Errorf("get_url with no workers = %q (isError %v), want the no-workers error", text(res), res.IsError)
		}
		res = callTool(t, c, "click", map[string]any{"ref": 5})
		if !res.IsError || !strings.Contains(text(res), `argument "ref" must be a string`) {
			t.Errorf("click with a numeric ref = %q, want an argument error", text(res))
		}
	})

	t.Run("2026-07-28", func(t *testing.T) {
		c := modernClient(t, url, map[string]string{"Authorization": someone})
		if c.GetSessionId() != "" {
			t.Errorf("modern client has session id %q", c.GetSessionId())
		}
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil || len(tools.Tools) != len(gateway.Tools()) {
			t.Fatalf("ListTools = %v; want %d tools", err, len(gateway.Tools()))
		}
		tests := []struct {
			args map[string]any
			want string
		}{
			{nil, "no browser workers are running"},
			{map[string]any{"session": "sov_unknownunknownunknown"}, "unknown or expired session handle"},
			{map[string]any{"session": "s1234"}, "is not a session handle"},
			{map[string]any{"session": 12}, `argument "session" must be a string`},
		}
		for _, tt := range tests {
			res := callTool(t, c, "get_title", tt.args)
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("get_title(%v) = %q (isError %v), want %q", tt.args, text(res), res.IsError, tt.want)
			}
		}
	})
}

func TestToolsCatalogExport(t *testing.T) {
	t.Parallel()
	for _, tool := range gateway.Tools() {
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
			t.Errorf("%s: schema: %v", tool.Name, err)
		}
	}
	if !strings.Contains(gateway.ToolsMarkdown(), "## screenshot") {
		t.Error("ToolsMarkdown has no screenshot section")
	}
}

// TestServeListener: the gateway serves until its context ends, then shuts
// down gracefully, ending open GET streams instead of waiting on them.
func TestServeListener(t *testing.T) {
	t.Parallel()
	g, err := gateway.New(context.Background(), gateway.Config{}, connect(t, startNATS(t, "")))
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

	url := "http://" + ln.Addr().String() + "/mcp"
	c := &rpc{t: t, url: url}
	r := c.call(initializeBody)
	if r.status != http.StatusOK {
		t.Fatalf("initialize: %d", r.status)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", r.header.Get("Mcp-Session-Id"))
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeListener() = %v, want nil after a clean shutdown", err)
		}
	// A GET stream that held the shutdown would make ServeListener fail
	// after its own 10 s: the error above says so. 30 s here is only a
	// bound for a hang, which a loaded machine cannot reach by accident.
	case <-time.After(30 * time.Second):
		t.Fatal("ServeListener did not return within 30s of its context ending (a GET stream held it?)")
	}
	if err := g.Close(context.Background()); err != nil {
		t.Errorf("Close after ServeListener: %v", err)
	}
}
