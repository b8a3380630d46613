package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Script tools and HTTP tools deployed to the fleet (extend.go), through
// real gateways on a real NATS, with a real worker and Chromium where a
// script browses.

// pagesScript is a script tool that browses: pages__heading opens a URL
// and returns the text of its first heading, through the browser tools.
const pagesScript = `
function describe() {
  return {
    name: "heading",
    description: "Open a page and return its first heading",
    inputSchema: {type: "object", properties: {url: {type: "string"}}, required: ["url"]},
  };
}
function heading(args) {
  tools.open({url: args.url});
  return tools.get_text({selector: "h1"});
}
`

// adminGateway starts a gateway with an admin token and serves its admin
// handler (the operator console with the admin API) over httptest. It
// returns the gateway, its /mcp URL and the admin base URL.
func adminGateway(t *testing.T, srv *natsrv.Server, cfg gateway.Config) (*gateway.Gateway, string, string) {
	t.Helper()
	cfg.AdminToken = adminToken
	g, url := startGatewayG(t, srv, cfg)
	h := g.AdminHandler()
	if h == nil {
		t.Fatal("a gateway with an admin token has no admin handler")
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return g, url, hs.URL
}

// admin sends an admin API request with the admin token and returns the
// status and the body.
func admin(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// adminOK sends an admin API request and fails the test unless it
// answers 200.
func adminOK(t *testing.T, base, method, path, body string) string {
	t.Helper()
	st, out := admin(t, base, method, path, body)
	if st != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, st, out)
	}
	return out
}

// toolNames lists the tools a client sees.
func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []string
	for _, tool := range list.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// listedTool returns the tools/list entry of name.
func listedTool(t *testing.T, c *client.Client, name string) (mcp.Tool, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range list.Tools {
		if tool.Name == name {
			return tool, true
		}
	}
	return mcp.Tool{}, false
}

// writeScripts writes files (name → source) into a new directory.
func writeScripts(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestScriptToolBrowses: a script deployed through the admin API browses
// in its caller's session through the browser tools; each inner call is
// audited with the caller; agents see and call it on the bus.
func TestScriptToolBrowses(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 4)
	_, url, base := adminGateway(t, srv, gateway.Config{})
	site := startSite(t)

	out := adminOK(t, base, http.MethodPut, "/admin/scripts/pages", pagesScript)
	var info struct {
		Name  string   `json:"name"`
		Tools []string `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Name != "pages" || !slices.Equal(info.Tools, []string{"pages__heading"}) {
		t.Fatalf("PUT /admin/scripts/pages = %s (%v), want the script with its tool pages__heading", out, err)
	}
	if got := adminOK(t, base, http.MethodGet, "/admin/scripts/pages", ""); got != pagesScript {
		t.Errorf("GET /admin/scripts/pages = %q, want the source", got)
	}

	auth, _ := newToken(t, srv, tokens.Spec{Name: "alice"})
	awaitStatus(t, url, auth, http.StatusOK)

	t.Run("legacy client", func(t *testing.T) {
		c := legacyClient(t, url, map[string]string{"Authorization": auth})
		tool, ok := listedTool(t, c, "pages__heading")
		if !ok {
			t.Fatalf("tools/list lacks pages__heading: %v", toolNames(t, c))
		}
		if _, ok := tool.InputSchema.Properties["url"]; tool.Description != "Open a page and return its first heading" || !ok || !slices.Contains(tool.InputSchema.Required, "url") {
			t.Errorf("pages__heading as listed: %q %+v", tool.Description, tool.InputSchema)
		}
		got := mustOK(t, callTool(t, c, "pages__heading", map[string]any{"url": site}), "pages__heading")
		if !strings.Contains(got, "Hello") {
			t.Errorf("pages__heading = %q, want the page's heading Hello", got)
		}
		// The script browsed in the client's own browser session.
		if got := mustOK(t, callTool(t, c, "get_url", nil), "get_url"); !strings.Contains(got, site) {
			t.Errorf("get_url after the script = %q, want %s: the script's calls act in the caller's session", got, site)
		}

		recs := auditRecords(t, srv, 4)
		var tools []string
		for _, r := range recs {
			tools = append(tools, r.GetTool())
			if r.GetCaller() != "alice" {
				t.Errorf("the record of %s names caller %q, want alice", r.GetTool(), r.GetCaller())
			}
		}
		for _, want := range []string{"open", "get_text", "pages__heading", "get_url"} {
			if !slices.Contains(tools, want) {
				t.Errorf("the audit trail lacks %s: %v", want, tools)
			}
		}
		for _, r := range recs {
			if r.GetTool() == "open" && (!strings.Contains(r.GetArguments(), site) || r.GetBrowserSession() == "") {
				t.Errorf("the script's open is recorded as %v", r)
			}
		}
	})

	t.Run("modern client", func(t *testing.T) {
		// A 2026 client has no protocol session: the script's first
		// browser call opens a session, and the next ones act in it.
		c := modernClient(t, url, map[string]string{"Authorization": auth})
		res := callTool(t, c, "pages__heading", map[string]any{"url": site})
		if got := mustOK(t, res, "pages__heading"); !strings.Contains(got, "Hello") {
			t.Errorf("pages__heading = %q, want Hello", got)
		}
		h := metaSession(res)
		if h == "" {
			t.Fatalf("the result names no session handle: %v", res.Meta)
		}
		if m := handleLine.FindStringSubmatch(text(res)); m == nil || m[1] != h {
			t.Errorf("the result does not announce its new handle %s first: %q", h, text(res))
		}
		if strings.Count(text(res), "session: ") != 1 {
			t.Errorf("the result announces more than one handle: %q", text(res))
		}
		got := mustOK(t, callTool(t, c, "get_url", map[string]any{"session": h}), "get_url")
		if !strings.Contains(got, site) {
			t.Errorf("get_url in the script's session = %q, want %s", got, site)
		}
		// With the handle, the script acts in that session.
		res = callTool(t, c, "pages__heading", map[string]any{"url": site + "/again", "session": h})
		if got := mustOK(t, res, "pages__heading again"); got != "Hello" {
			t.Errorf("pages__heading with the handle = %q, want Hello and no new handle", got)
		}
		if got := metaSession(res); got != h {
			t.Errorf("pages__heading with the handle: _meta session %q, want %s", got, h)
		}
		got = mustOK(t, callTool(t, c, "get_url", map[string]any{"session": h}), "get_url")
		if !strings.Contains(got, site+"/again") {
			t.Errorf("get_url after the script in the handle's session = %q, want %s/again", got, site)
		}
	})

	t.Run("agent on the bus", func(t *testing.T) {
		bc := connect(t, srv)
		var found *toolsv1.Tool
		for _, tool := range busList(t, bc, true) {
			if tool.GetName() == "pages__heading" {
				found = tool
			}
		}
		if found == nil {
			t.Fatal("sov.tools.list for_agent lacks pages__heading")
		}
		if strings.Contains(found.GetInputSchemaJson(), `"session"`) || !strings.Contains(found.GetInputSchemaJson(), `"url"`) {
			t.Errorf("pages__heading for agents has schema %s, want url and no session", found.GetInputSchemaJson())
		}
		resp, got := busOK(t, bc, &toolsv1.CallToolRequest{Caller: busAlice, Name: "pages__heading", ArgumentsJson: `{"url":"` + site + `"}`, RunId: "r_script"})
		if !strings.Contains(got, "Hello") {
			t.Errorf("pages__heading on the bus = %q, want Hello", got)
		}
		h := resp.GetSession()
		if h == "" {
			t.Fatal("the bus response names no session")
		}
		if strings.Contains(got, h) {
			t.Errorf("the handle is in the content: %q", got)
		}
		_, got = busOK(t, bc, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", Session: h})
		if !strings.Contains(got, site) {
			t.Errorf("get_url in the run's session = %q, want %s", got, site)
		}
		// The run's session given, the script acts in it.
		_, got = busOK(t, bc, &toolsv1.CallToolRequest{Caller: busAlice, Name: "pages__heading", Session: h, ArgumentsJson: `{"url":"` + site + `"}`})
		if !strings.Contains(got, "Hello") {
			t.Errorf("pages__heading in the run's session = %q", got)
		}
	})
}

// TestScriptsReported: of a tools dir with a good script and bad ones,
// only the good one's tools load, and each bad one is reported with its
// reason by sovereign__list_scripts, GET /admin/scripts and the log.
func TestScriptsReported(t *testing.T) {
	logs := captureLogs(t)
	dir := writeScripts(t, map[string]string{
		"good.js": `function describe() { return [{name: "hello", description: "Say hello"}, {name: "echo",
  inputSchema: {type: "object", properties: {text: {type: "string"}}}}]; }
function hello() { return "hello from good"; }
function echo(args) { return args.text; }`,
		"Bad-Name.js":    `function describe() { return {name: "x"}; } function x() { return 1; }`,
		"nodescribe.js":  `function search() { return 1; }`,
		"badschema.js":   `function describe() { return {name: "x", inputSchema: "x"}; } function x() { return 1; }`,
		"strschema.js":   `function describe() { return {name: "x", inputSchema: {type: "string"}}; } function x() { return 1; }`,
		"slow.js":        `function describe() { while (true) {} } function x() { return 1; }`,
		"slow2.js":       `function describe() { for (;;) {} }`,
		"notascript.txt": `not a script`,
	})
	srv := startNATS(t, "")
	_, url, base := adminGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{ToolsDir: dir}})
	c := legacyClient(t, url, nil)

	var script []string
	for _, name := range toolNames(t, c) {
		if strings.Contains(name, "__") && !strings.HasPrefix(name, "sovereign__") {
			script = append(script, name)
		}
	}
	slices.Sort(script)
	if !slices.Equal(script, []string{"good__echo", "good__hello"}) {
		t.Fatalf("script tools served: %v, want good__echo and good__hello only", script)
	}
	if got := mustOK(t, callTool(t, c, "good__echo", map[string]any{"text": "ping"}), "good__echo"); got != "ping" {
		t.Errorf("good__echo = %q", got)
	}

	// Each bad file with the words of its reason.
	reasons := map[string][]string{
		"Bad-Name.js": {"bad script name", "Bad-Name"},
		"nodescribe":  {"no describe()"},
		"badschema":   {"inputSchema", "not an object"},
		"strschema":   {"inputSchema", "not an object", `"string"`},
		"slow":        {"describe()", "time budget", "5s"},
		"slow2":       {"describe()", "time budget", "5s"},
	}

	res := callTool(t, c, "sovereign__list_scripts", nil)
	listed := mustOK(t, res, "sovereign__list_scripts")
	lines := map[string]string{}
	for _, line := range strings.Split(listed, "\n") {
		if name, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), ":"); ok && strings.HasPrefix(line, "- ") {
			lines[name] = line
		}
	}
	if !strings.Contains(lines["good"], "good__echo") || !strings.Contains(lines["good"], "good__hello") || strings.Contains(lines["good"], "NOT") {
		t.Errorf("sovereign__list_scripts on good: %q\n%s", lines["good"], listed)
	}
	for name, words := range reasons {
		line := lines[name]
		if !strings.Contains(line, "NOT LOADED") && !strings.Contains(line, "NOT STORED") {
			t.Errorf("sovereign__list_scripts does not report %s as not loaded: %q\n%s", name, line, listed)
		}
		for _, w := range words {
			if !strings.Contains(line, w) {
				t.Errorf("sovereign__list_scripts on %s: %q lacks %q", name, line, w)
			}
		}
	}
	if strings.Contains(listed, "notascript") {
		t.Errorf("a .txt file is taken for a script:\n%s", listed)
	}

	var adminList struct {
		Scripts []struct {
			Name  string   `json:"name"`
			Tools []string `json:"tools"`
			Error string   `json:"error"`
		} `json:"scripts"`
	}
	out := adminOK(t, base, http.MethodGet, "/admin/scripts", "")
	if err := json.Unmarshal([]byte(out), &adminList); err != nil {
		t.Fatalf("GET /admin/scripts: %v: %s", err, out)
	}
	seen := map[string]bool{}
	for _, s := range adminList.Scripts {
		seen[s.Name] = true
		if s.Name == "good" {
			if s.Error != "" || !slices.Equal(slices.Sorted(slices.Values(s.Tools)), []string{"good__echo", "good__hello"}) {
				t.Errorf("GET /admin/scripts on good: %+v", s)
			}
			continue
		}
		words, ok := reasons[s.Name]
		if !ok {
			t.Errorf("GET /admin/scripts lists %q: %+v", s.Name, s)
			continue
		}
		if len(s.Tools) != 0 {
			t.Errorf("GET /admin/scripts: %s serves %v", s.Name, s.Tools)
		}
		for _, w := range words {
			if !strings.Contains(s.Error, w) {
				t.Errorf("GET /admin/scripts on %s: error %q lacks %q", s.Name, s.Error, w)
			}
		}
	}
	for name := range reasons {
		if !seen[name] {
			t.Errorf("GET /admin/scripts does not report %s: %s", name, out)
		}
	}

	// The log names each of them too.
	log := logs.String()
	for name := range reasons {
		if !strings.Contains(log, name) {
			t.Errorf("the log does not name %s", name)
		}
	}
}

// TestScriptBudget: a script call in an endless loop is stopped by its
// time budget with an error result that names it, and the gateway serves
// the next call.
func TestScriptBudget(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	_, url, base := adminGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{ScriptTimeout: time.Second}})
	adminOK(t, base, http.MethodPut, "/admin/scripts/spin", `
function describe() { return [{name: "forever"}, {name: "quick"}]; }
function forever() { while (true) {} }
function quick() { return "still here"; }`)
	c := legacyClient(t, url, nil)
	res := callTool(t, c, "spin__forever", nil)
	if !res.IsError || !strings.Contains(text(res), "time budget of 1s") {
		t.Fatalf("spin__forever = %q (error %v), want an error naming the 1s time budget", text(res), res.IsError)
	}
	if got := mustOK(t, callTool(t, c, "spin__quick", nil), "spin__quick"); got != "still here" {
		t.Errorf("spin__quick after the loop = %q", got)
	}
	// Again, while another client calls meanwhile.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "spin__forever"
		r, err := c.CallTool(ctx, req)
		if err != nil {
			r = mcp.NewToolResultError("protocol error: " + err.Error())
		}
		done <- r
	}()
	other := legacyClient(t, url, nil)
	if got := mustOK(t, callTool(t, other, "spin__quick", nil), "spin__quick (other client)"); got != "still here" {
		t.Errorf("spin__quick of another client = %q", got)
	}
	if r := <-done; !r.IsError || !strings.Contains(text(r), "time budget") {
		t.Errorf("the second spin__forever = %q", text(r))
	}
	mustOK(t, callTool(t, c, "sovereign__list_scripts", nil), "sovereign__list_scripts")
}

// TestScriptTimeoutFlag: SOVEREIGN_SCRIPT_TIMEOUT and --script-timeout
// are read and checked.
func TestScriptTimeoutFlag(t *testing.T) {
	for env, want := range map[string]time.Duration{"": gateway.DefaultScriptTimeout, "2s": 2 * time.Second} {
		t.Setenv("SOVEREIGN_SCRIPT_TIMEOUT", env)
		var errs []error
		cfg := gateway.RegisterFlags(flag.NewFlagSet("gateway", flag.ContinueOnError), &errs)
		if len(errs) > 0 || cfg.ScriptTimeout != want {
			t.Errorf("SOVEREIGN_SCRIPT_TIMEOUT=%q: %s %v, want %s", env, cfg.ScriptTimeout, errs, want)
		}
	}
	t.Setenv("SOVEREIGN_SCRIPT_TIMEOUT", "soon")
	var errs []error
	gateway.RegisterFlags(flag.NewFlagSet("gateway", flag.ContinueOnError), &errs)
	if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), "SOVEREIGN_SCRIPT_TIMEOUT") {
		t.Errorf("SOVEREIGN_SCRIPT_TIMEOUT=soon: %v, want an error naming it", err)
	}

	srv := startNATS(t, "")
	for _, d := range []time.Duration{-time.Second, 2 * time.Hour} {
		_, err := gateway.New(context.Background(), gateway.Config{ExtendConfig: gateway.ExtendConfig{ScriptTimeout: d}}, connect(t, srv))
		if err == nil || !strings.Contains(err.Error(), "--script-timeout") {
			t.Errorf("ScriptTimeout %s: %v, want an error naming --script-timeout", d, err)
		}
	}
}

// precedenceFile is an HTTP tools file whose tools take a built-in name,
// a script tool's name and a name a script takes later.
const precedenceFile = `{"tools": [
  {"name": "open", "description": "HTTP open", "endpoint": "http://127.0.0.1:9/open"},
  {"name": "pages__heading", "description": "HTTP heading", "endpoint": "http://127.0.0.1:9/heading"},
  {"name": "later__tool", "description": "HTTP later", "endpoint": "http://127.0.0.1:9/later"},
  {"name": "Ping", "description": "HTTP ping", "endpoint": "http://127.0.0.1:9/ping"}
]}`

// TestToolPrecedence: built-in tools, then scripts, then HTTP tools: an
// HTTP tool never takes an earlier source's name, whichever was deployed
// first, and listing and calling agree.
func TestToolPrecedence(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	_, url, base := adminGateway(t, srv, gateway.Config{})
	adminOK(t, base, http.MethodPut, "/admin/scripts/pages", `
function describe() { return {name: "heading", description: "Script heading"}; }
function heading() { return "from the script"; }`)
	adminOK(t, base, http.MethodPut, "/admin/http-tools", precedenceFile)

	httpErrors := func() []string {
		t.Helper()
		var got struct {
			Errors []string `json:"errors"`
		}
		out := adminOK(t, base, http.MethodGet, "/admin/http-tools", "")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("GET /admin/http-tools: %v: %s", err, out)
		}
		return got.Errors
	}
	reported := func(errs []string, name string) bool {
		return slices.ContainsFunc(errs, func(e string) bool {
			return strings.Contains(e, `"`+name+`"`) || strings.Contains(e, " "+name+" ") || strings.Contains(e, name+":")
		})
	}
	errs := httpErrors()
	for _, name := range []string{"open", "pages__heading"} {
		if !reported(errs, name) {
			t.Errorf("GET /admin/http-tools errors %q do not report %s", errs, name)
		}
	}
	if reported(errs, "Ping") || reported(errs, "later__tool") {
		t.Errorf("GET /admin/http-tools reports tools that loaded: %q", errs)
	}

	c := legacyClient(t, url, nil)
	names := toolNames(t, c)
	for _, name := range []string{"open", "pages__heading", "later__tool", "Ping"} {
		if n := countOf(names, name); n != 1 {
			t.Errorf("tools/list has %s %d times", name, n)
		}
	}
	if tool, _ := listedTool(t, c, "open"); tool.Description == "HTTP open" {
		t.Errorf("open is listed as the HTTP tool")
	}
	if tool, _ := listedTool(t, c, "pages__heading"); tool.Description != "Script heading" {
		t.Errorf("pages__heading is listed as %q, want the script's", tool.Description)
	}
	if got := mustOK(t, callTool(t, c, "pages__heading", nil), "pages__heading"); got != "from the script" {
		t.Errorf("pages__heading = %q, want the script's result", got)
	}

	// A script deployed later takes the name from the HTTP tool, and
	// gives it back when it goes.
	adminOK(t, base, http.MethodPut, "/admin/scripts/later", `
function describe() { return {name: "tool", description: "Script later"}; }
function tool() { return "later from the script"; }`)
	if tool, _ := listedTool(t, c, "later__tool"); tool.Description != "Script later" {
		t.Errorf("after the script: later__tool is listed as %q, want the script's", tool.Description)
	}
	if got := mustOK(t, callTool(t, c, "later__tool", nil), "later__tool"); got != "later from the script" {
		t.Errorf("later__tool = %q, want the script's result", got)
	}
	if errs := httpErrors(); !reported(errs, "later__tool") {
		t.Errorf("GET /admin/http-tools errors %q do not report later__tool once the script has it", errs)
	}
	adminOK(t, base, http.MethodDelete, "/admin/scripts/later", "")
	if tool, ok := listedTool(t, c, "later__tool"); !ok || tool.Description != "HTTP later" {
		t.Errorf("after the script's delete: later__tool listed %v as %q, want the HTTP tool back", ok, tool.Description)
	}
	if errs := httpErrors(); reported(errs, "later__tool") {
		t.Errorf("GET /admin/http-tools still reports later__tool: %q", errs)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// notifications records the notifications a client receives.
type notifications struct {
	mu   sync.Mutex
	seen []string
}

func (n *notifications) add(m mcp.JSONRPCNotification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, m.Method)
}

// await waits up to 30 s for a notification of method after the first
// skip ones and returns how many there are then.
func (n *notifications) await(t *testing.T, method string, skip int) int {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (int, error) {
		n.mu.Lock()
		seen := slices.Clone(n.seen)
		n.mu.Unlock()
		return len(seen), kittest.Check(slices.Contains(seen[min(skip, len(seen)):], method), "no %s after the first %d; the client got %v", method, skip, seen)
	})
}

// awaitListed polls tools/list up to 30 s until name is listed (or not).
func awaitListed(t *testing.T, c *client.Client, name string, want bool) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(slices.Contains(toolNames(t, c), name) == want, "tools/list: %s listed is not %v", name, want)
	})
}

// TestReloadAcrossGateways: a script deployed through one gateway's admin
// API reaches a client of another gateway: it gets
// notifications/tools/list_changed and the new tool, and again when the
// script is deleted.
func TestReloadAcrossGateways(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	_, _, baseA := adminGateway(t, srv, gateway.Config{})
	urlB := startGateway(t, srv, gateway.Config{})

	tr, err := transport.NewStreamableHTTP(urlB, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	n := &notifications{}
	c.OnNotification(n.add)
	// The GET stream lives as long as Start's context: not initClient's,
	// which ends when it returns.
	listen, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := c.Start(listen); err != nil {
		t.Fatal(err)
	}
	initClient(t, c) // Start again is a no-op
	if slices.Contains(toolNames(t, c), "fresh__ping") {
		t.Fatal("fresh__ping is listed before it is deployed")
	}
	// A notification sent before the client's GET stream is up waits in
	// its session's queue.
	adminOK(t, baseA, http.MethodPut, "/admin/scripts/fresh", `
function describe() { return {name: "ping", description: "Fresh ping"}; }
function ping() { return "pong"; }`)
	seen := n.await(t, string(mcp.MethodNotificationToolsListChanged), 0)
	awaitListed(t, c, "fresh__ping", true)
	if got := mustOK(t, callTool(t, c, "fresh__ping", nil), "fresh__ping on B"); got != "pong" {
		t.Errorf("fresh__ping on B = %q", got)
	}

	// Changed on A: B serves the new version.
	adminOK(t, baseA, http.MethodPut, "/admin/scripts/fresh", `
function describe() { return {name: "ping", description: "Fresh ping, version 2"}; }
function ping() { return "pong 2"; }`)
	seen = n.await(t, string(mcp.MethodNotificationToolsListChanged), seen)
	kittest.Eventually(t, 30*time.Second, func() error {
		got := mustOK(t, callTool(t, c, "fresh__ping", nil), "fresh__ping v2")
		return kittest.Check(got == "pong 2", "fresh__ping on B = %q, want the second version", got)
	})

	adminOK(t, baseA, http.MethodDelete, "/admin/scripts/fresh", "")
	n.await(t, string(mcp.MethodNotificationToolsListChanged), seen)
	awaitListed(t, c, "fresh__ping", false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "fresh__ping"
	if res, err := c.CallTool(ctx, req); err == nil && !res.IsError {
		t.Errorf("fresh__ping after its delete = %q, want an error", text(res))
	}
}

// TestHTTPToolsAcrossGateways: a tools file stored through one gateway's
// admin API is served by another gateway, and its tools go there when the
// stored file is deleted.
func TestHTTPToolsAcrossGateways(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	_, _, baseA := adminGateway(t, srv, gateway.Config{})
	c := legacyClient(t, startGateway(t, srv, gateway.Config{}), nil)

	adminOK(t, baseA, http.MethodPut, "/admin/http-tools",
		`{"tools": [{"name": "fleet_ping", "description": "HTTP ping", "endpoint": "http://127.0.0.1:9/ping"}]}`)
	awaitListed(t, c, "fleet_ping", true)

	conn := connect(t, srv)
	js, err := jetstream.New(conn.NATS())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketName(conn.Prefix(), "_http_tools"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "tools_json"); err != nil {
		t.Fatal(err)
	}
	awaitListed(t, c, "fleet_ping", false)
}

// TestReloadKeepsOldSet: when the tools dir cannot be read at a reload,
// sovereign__reload fails saying so, and the scripts served before stay.
func TestReloadKeepsOldSet(t *testing.T) {
	t.Parallel()
	dir := writeScripts(t, map[string]string{
		"keep.js": `function describe() { return {name: "me"}; } function me() { return "kept"; }`,
	})
	srv := startNATS(t, "")
	url := startGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{ToolsDir: dir}})
	c := legacyClient(t, url, nil)
	if got := mustOK(t, callTool(t, c, "keep__me", nil), "keep__me"); got != "kept" {
		t.Fatalf("keep__me = %q", got)
	}
	mustOK(t, callTool(t, c, "sovereign__reload", map[string]any{"target": "scripts"}), "a reload that works")

	// Unreadable: chmod 000, or gone where chmod does not stop reads (root).
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	if _, err := os.ReadDir(dir); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{"scripts", "all"} {
		res := callTool(t, c, "sovereign__reload", map[string]any{"target": target})
		if !res.IsError || !strings.Contains(text(res), dir) || !strings.Contains(text(res), "served before are kept") {
			t.Errorf("sovereign__reload %s with an unreadable tools dir = %q (error %v), want an error naming it and saying the old set is kept", target, text(res), res.IsError)
		}
	}
	if !slices.Contains(toolNames(t, c), "keep__me") {
		t.Error("keep__me is no longer listed")
	}
	if got := mustOK(t, callTool(t, c, "keep__me", nil), "keep__me after the failed reload"); got != "kept" {
		t.Errorf("keep__me = %q", got)
	}
	listed := mustOK(t, callTool(t, c, "sovereign__list_scripts", nil), "sovereign__list_scripts")
	if !strings.Contains(listed, "keep: keep__me") || !strings.Contains(listed, "tools dir: ") {
		t.Errorf("sovereign__list_scripts after the failed reload:\n%s", listed)
	}
}

// TestAdminNotMountedWithoutToken: without an admin token there is no
// admin handler, and the MCP listener serves no /admin route.
func TestAdminNotMountedWithoutToken(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	g, url := startGatewayG(t, srv, gateway.Config{})
	if g.AdminHandler() != nil {
		t.Fatal("a gateway without an admin token has an admin handler")
	}
	base := strings.TrimSuffix(url, "/mcp")
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/scripts"}, {"PUT", "/admin/scripts/pages"}, {"GET", "/admin/http-tools"},
		{"PUT", "/admin/http-tools"}, {"POST", "/admin/reload"}, {"GET", "/admin/profiles"}, {"GET", "/admin/sessions"},
	} {
		for _, auth := range []string{"", "Bearer " + adminToken} {
			req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(pagesScript))
			if err != nil {
				t.Fatal(err)
			}
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s (auth %v) on the MCP listener: %d, want 404", r.method, r.path, auth != "", resp.StatusCode)
			}
		}
	}
	// Nothing was deployed.
	c := legacyClient(t, url, nil)
	if slices.Contains(toolNames(t, c), "pages__heading") {
		t.Error("a script was deployed through a gateway without an admin token")
	}
}
