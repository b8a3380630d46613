package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// weatherKey is the value of the secret WEATHER_API_KEY.
const weatherKey = "wk-9f8e7d6c5b4a3210-secret"

// startSecretWorker stores WEATHER_API_KEY and runs a real worker with the
// key that decrypts it.
func startSecretWorker(t *testing.T, srv *natsrv.Server) {
	t.Helper()
	key := newKey(t)
	c := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := secrets.Open(ctx, c.NATS(), c.Prefix(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "WEATHER_API_KEY", []byte(weatherKey)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, srv, browser.Config{ID: "hw1", MaxSessions: 1, SecretKey: key})
}

// apiServer is the endpoint of the HTTP tools: it records what it got
// and echoes the credentials back, as a careless API might.
type apiServer struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

func (a *apiServer) record(r *http.Request, body []byte) string {
	line := fmt.Sprintf("%s %s %s | auth=%s | key=%s | type=%s | %s", r.Host, r.Method, r.URL.RequestURI(),
		r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Content-Type"), body)
	a.mu.Lock()
	a.got = append(a.got, line)
	a.mu.Unlock()
	return line
}

func (a *apiServer) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.got) == 0 {
		return ""
	}
	return a.got[len(a.got)-1]
}

func (a *apiServer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got)
}

func startAPI(t *testing.T) *apiServer {
	t.Helper()
	a := &apiServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/current", func(w http.ResponseWriter, r *http.Request) {
		a.record(r, nil)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"city":%q,"temp_c":21,"you_sent":%q}`, r.URL.Query().Get("city"), r.Header.Get("Authorization"))
	})
	mux.HandleFunc("POST /issues", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.record(r, body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"created":true,"issue":%s}`, body)
	})
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		a.record(r, nil)
		fmt.Fprintf(w, "user %s", r.PathValue("id"))
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		a.record(r, nil)
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000")
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such thing", http.StatusNotFound)
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Server.Close)
	return a
}

// writeToolsFile writes a tools file for the API at base.
func writeToolsFile(t *testing.T, base string) string {
	t.Helper()
	file := strings.ReplaceAll(`{"tools": [
  {"name": "GetWeather", "description": "Get current weather for a city", "endpoint": "BASE/v1/current", "method": "GET",
   "parameters": {"city": {"type": "string", "description": "City name", "required": true}},
   "headers": {"Authorization": "Bearer {{secrets.WEATHER_API_KEY}}"}},
  {"name": "CreateIssue", "description": "File an issue", "endpoint": "BASE/issues", "method": "POST",
   "parameters": {"title": {"type": "string", "required": true}, "points": {"type": "integer"}},
   "headers": {"X-Api-Key": "{{secrets.WEATHER_API_KEY}}"}},
  {"name": "GetUser", "description": "Look a user up", "endpoint": "BASE/users/{{id}}",
   "parameters": {"id": {"type": "string", "description": "user id"}}},
  {"name": "Bounce", "description": "Follow a redirect", "endpoint": "BASE/redirect",
   "parameters": {"to": {"type": "string", "required": true}}, "redirects": ["localhost"]},
  {"name": "Stray", "description": "Follow a redirect, same origin only", "endpoint": "BASE/redirect",
   "parameters": {"to": {"type": "string", "required": true}}},
  {"name": "Big", "description": "A long answer", "endpoint": "BASE/big", "max_response_bytes": 1000},
  {"name": "Missing", "description": "A 404", "endpoint": "BASE/missing"},
  {"name": "NoSecret", "description": "Names a secret nobody set", "endpoint": "BASE/v1/current",
   "headers": {"Authorization": "Bearer {{secrets.NOT_SET}}"}}
]}`, "BASE", base)
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantToolError(t *testing.T, what string, r *mcp.CallToolResult, want string) {
	t.Helper()
	if !r.IsError || !strings.Contains(text(r), want) {
		t.Errorf("%s = %q (error %v), want an error with %q", what, text(r), r.IsError, want)
	}
}

// TestHTTPTools runs custom HTTP tools end to end: MCP client → gateway →
// sov.browser.http → a real worker with the secret key → an httptest API,
// and checks that the secret reaches the API but neither the result nor
// the audit trail, whatever the API echoes.
func TestHTTPTools(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startSecretWorker(t, srv)
	api := startAPI(t)
	tools := writeToolsFile(t, api.URL)
	open := startGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: tools}})
	blocked := startGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: tools}, PolicyConfig: gateway.PolicyConfig{URLBlock: []string{"127.0.0.1"}}})
	allowOnly := startGateway(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: tools}, PolicyConfig: gateway.PolicyConfig{URLAllow: []string{"127.0.0.1"}}})
	c := legacyClient(t, open, nil)
	calls := 0
	call := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}, name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		calls++
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	t.Run("listed with their schema", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]mcp.Tool{}
		for _, tool := range list.Tools {
			found[tool.Name] = tool
		}
		w, ok := found["GetWeather"]
		if !ok || len(found) != len(gateway.Tools())+8 {
			t.Fatalf("tools/list has %d tools, want the catalog's %d and 8 HTTP tools", len(found), len(gateway.Tools()))
		}
		if w.Description != "Get current weather for a city" || fmt.Sprint(w.InputSchema.Required) != "[city]" ||
			w.InputSchema.AdditionalProperties != false || w.Annotations.ReadOnlyHint == nil || !*w.Annotations.ReadOnlyHint {
			t.Errorf("GetWeather = %+v", w)
		}
		if u := found["GetUser"]; fmt.Sprint(u.InputSchema.Required) != "[id]" {
			t.Errorf("GetUser schema %+v: a path parameter is required", u.InputSchema)
		}
	})

	t.Run("GET with a secret header and a query", func(t *testing.T) {
		res := call(c, "GetWeather", map[string]any{"city": "Oslo"})
		got := mustOK(t, res, "GetWeather")
		if want := "GET /v1/current?city=Oslo | auth=Bearer " + weatherKey + " |"; !strings.Contains(api.last(), want) {
			t.Errorf("the API received %q, want %q", api.last(), want)
		}
		if !strings.Contains(got, `"city":"Oslo"`) || !strings.Contains(got, `"you_sent":"Bearer {{secrets.WEATHER_API_KEY}}"`) {
			t.Errorf("result = %s, want the body with the secret's placeholder", got)
		}
		if strings.Contains(fmt.Sprint(res), weatherKey) {
			t.Errorf("the result shows the secret: %v", res)
		}
	})

	t.Run("an argument is never a secret placeholder", func(t *testing.T) {
		mustOK(t, call(c, "GetWeather", map[string]any{"city": "{{secrets.WEATHER_API_KEY}}"}), "GetWeather")
		if got := api.last(); !strings.Contains(got, "city=%7B%7Bsecrets.WEATHER_API_KEY%7D%7D") {
			t.Errorf("the API received %q, want the placeholder as text", got)
		}
	})

	t.Run("POST with a JSON body", func(t *testing.T) {
		got := mustOK(t, call(c, "CreateIssue", map[string]any{"title": "Broken", "points": 3}), "CreateIssue")
		want := `POST /issues | auth= | key=` + weatherKey + ` | type=application/json | {"points":3,"title":"Broken"}`
		if !strings.Contains(api.last(), want) {
			t.Errorf("the API received %q, want %q", api.last(), want)
		}
		if got != `{"created":true,"issue":{"points":3,"title":"Broken"}}` {
			t.Errorf("result = %s", got)
		}
	})

	t.Run("path template", func(t *testing.T) {
		got := mustOK(t, call(c, "GetUser", map[string]any{"id": "ada lovelace"}), "GetUser")
		if !strings.Contains(api.last(), "GET /users/ada%20lovelace |") || got != "user ada lovelace" {
			t.Errorf("the API received %q, result %q", api.last(), got)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		n := api.count()
		wantToolError(t, "no city", call(c, "GetWeather", map[string]any{}), `GetWeather: missing required argument "city"`)
		wantToolError(t, "wrong type", call(c, "CreateIssue", map[string]any{"title": "x", "points": 1.5}), `argument "points" is 1.5, want a whole number`)
		if api.count() != n {
			t.Error("a call with bad arguments reached the API")
		}
	})

	t.Run("missing secret", func(t *testing.T) {
		n := api.count()
		wantToolError(t, "NoSecret", call(c, "NoSecret", nil), `unknown secret "NOT_SET"`)
		if api.count() != n {
			t.Error("the request went out")
		}
	})

	t.Run("error status", func(t *testing.T) {
		wantToolError(t, "Missing", call(c, "Missing", nil), "Missing: the endpoint answered HTTP 404 Not Found:\nno such thing")
	})

	t.Run("body cap", func(t *testing.T) {
		got := mustOK(t, call(c, "Big", nil), "Big")
		if want := strings.Repeat("x", 1000) + "\n[clipped: this is the first 1000 bytes of 5000]"; got != want {
			t.Errorf("result = %q (%d bytes), want 1000 bytes and the note", got, len(got))
		}
	})

	t.Run("URL policy blocks the endpoint", func(t *testing.T) {
		n := api.count()
		res := call(legacyClient(t, blocked, nil), "GetWeather", map[string]any{"city": "Oslo"})
		wantToolError(t, "blocked", res, `GetWeather: refused by policy: `+api.URL+`/v1/current is blocked by block rule "127.0.0.1" (global)`)
		if api.count() != n {
			t.Error("a blocked request went out")
		}
	})

	t.Run("redirect to a blocked host", func(t *testing.T) {
		ac := legacyClient(t, allowOnly, nil)
		mustOK(t, call(ac, "GetWeather", map[string]any{"city": "Bergen"}), "GetWeather on an allowed host")
		target := strings.Replace(api.URL, "127.0.0.1", "localhost", 1) + "/v1/current"
		n := api.count()
		res := call(ac, "Bounce", map[string]any{"to": target + "?city=x"})
		wantToolError(t, "Bounce", res, "Bounce: refused by policy: redirect to "+target+" refused: "+target+" is blocked by not in the allow list of the global tier")
		if api.count() != n+1 { // the redirect itself, not its target
			t.Errorf("the API got %d requests, want 1 (the redirect)", api.count()-n)
		}
		// A tool without "redirects" stays on its endpoint's origin.
		res = call(c, "Stray", map[string]any{"to": target + "?city=x"})
		wantToolError(t, "Stray", res, "Stray: refused by policy: redirect to "+target+" refused: it leaves the endpoint's origin "+api.URL)
		if api.count() != n+2 {
			t.Errorf("the API got %d requests, want 2 (the redirects)", api.count()-n)
		}
	})

	t.Run("audit trail", func(t *testing.T) {
		recs := auditRecords(t, srv, calls)
		var weather, denied *historyv1.AuditRecord
		for _, r := range recs {
			if strings.Contains(r.String(), weatherKey) {
				t.Errorf("audit record of %s holds the secret: %v", r.GetTool(), r)
			}
			switch {
			case r.GetTool() == "GetWeather" && r.GetArguments() == `{"city":"Oslo"}` && r.GetOutcome() == historyv1.Outcome_OUTCOME_OK:
				weather = r
			case r.GetTool() == "GetWeather" && r.GetOutcome() == historyv1.Outcome_OUTCOME_DENIED:
				denied = r
			}
		}
		if weather == nil || !strings.Contains(weather.GetResult(), `"you_sent":"Bearer {{secrets.WEATHER_API_KEY}}"`) {
			t.Errorf("no audit record of GetWeather(Oslo) with its result: %v", weather)
		}
		if denied == nil || !strings.Contains(denied.GetResult(), "block rule") {
			t.Errorf("the blocked call is not recorded as denied: %v", denied)
		}
	})
}

// TestHTTPToolsFileErrors: every bad tool of the file is reported naming
// the tool and the field, a name taken by a built-in tool is not
// registered, the good tools are; a file that is not a tools file stops
// the gateway.
func TestHTTPToolsFileErrors(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	path := filepath.Join(t.TempDir(), "tools.json")
	file := `{"tools": [
	  {"name": "Fine", "description": "ok", "endpoint": "http://127.0.0.1:9/x"},
	  {"name": "bad-name", "description": "d", "endpoint": "https://x.example/"},
	  {"name": "open", "description": "shadows the built-in", "endpoint": "https://x.example/"},
	  {"name": "Fine", "description": "twice", "endpoint": "https://x.example/"},
	  {"name": "Typed", "description": "d", "endpoint": "https://x.example/", "parameters": {"when": {"type": "date"}}},
	  {"name": "Verb", "description": "d", "endpoint": "https://x.example/", "method": "FETCH"},
	  {"name": "NoURL", "description": "d", "endpoint": "x.example/v1"}
	]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	g, url := startGatewayG(t, srv, gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: path}})
	got, errs, err := g.HTTPTools(context.Background())
	if err != nil || string(got) != file {
		t.Errorf("HTTPTools file = %q, %v", got, err)
	}
	want := []string{
		`tools[1] "bad-name": name: "bad-name" is not a tool name`,
		`tools[3] "Fine": name: duplicate: tools[0] has this name already`,
		`tools[4] "Typed": parameters.when.type: "date" is not a parameter type`,
		`tools[5] "Verb": method: "FETCH" is not one of GET, POST, PUT, PATCH, DELETE`,
		`tools[6] "NoURL": endpoint: "x.example/v1" is not an absolute http or https URL`,
		`tools[2] "open": name: a built-in or script tool has this name (they come first): not registered`,
	}
	if len(errs) != len(want) {
		t.Errorf("errors = %q, want %d", errs, len(want))
	}
	for i, w := range want {
		if i >= len(errs) || !strings.HasPrefix(errs[i], w) {
			t.Errorf("error %d = %q, want %q…", i, errs[i:min(i+1, len(errs))], w)
		}
	}
	c := legacyClient(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, tool := range list.Tools {
		names[tool.Name] = tool.Description
	}
	if len(names) != len(gateway.Tools())+1 || names["Fine"] != "ok" || strings.Contains(names["open"], "shadows") {
		t.Errorf("tools/list: %d tools, Fine %q, open %q; want the catalog and Fine only", len(names), names["Fine"], names["open"])
	}
	// No worker runs: the call says so.
	res := callTool(t, c, "Fine", nil)
	wantToolError(t, "Fine without workers", res, "Fine: no browser worker answers")

	// Not a tools file: the gateway does not start.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tools": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = gateway.New(context.Background(), gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: bad}, PolicyConfig: gateway.PolicyConfig{AllowPrivate: true}}, connect(t, srv))
	if err == nil || !strings.Contains(err.Error(), "--http-tools "+bad+": not a tools file") {
		t.Errorf("New with a broken file: %v", err)
	}
	err = gateway.Config{ExtendConfig: gateway.ExtendConfig{HTTPToolsFile: filepath.Join(t.TempDir(), "nope.json")}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "--http-tools: stat ") {
		t.Errorf("Validate with a missing file: %v", err)
	}
}
