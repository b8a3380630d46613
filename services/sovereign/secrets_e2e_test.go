package sovereign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// TestSecretNeverLeaves fills a login form with {{secrets.PASSWORD}}
// through `sovereign up` and a real MCP client: the page receives the
// value, and no tool result, snapshot, error, log line, span (attributes,
// events, status) or audit record holds it, plain or encoded.
func TestSecretNeverLeaves(t *testing.T) {
	const value = "Tr0ub4dor&3 horse-battery"
	rec, tp := recordSpans()
	before := len(rec.Ended())
	logs := &syncBuilder{}
	prevLog := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prevLog) })

	// The site echoes what it received in its page, its title and its URL:
	// the worst case for a leak.
	var mu sync.Mutex
	var received []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pw := r.URL.Query().Get("pw"); pw != "" {
			mu.Lock()
			received = append(received, pw)
			mu.Unlock()
			fmt.Fprintf(w, `<!doctype html><title>Welcome %s</title><p id="echo">you typed %s</p><input id="again" value="%s">`,
				html.EscapeString(pw), html.EscapeString(pw), html.EscapeString(pw))
			return
		}
		fmt.Fprint(w, `<!doctype html><title>Log in</title>
<form action="/welcome" method="get"><input name="user" aria-label="User"><input type="password" name="pw" aria-label="Password">
<button type="submit">Log in</button></form>`)
	}))
	defer site.Close()

	listen, natsListen, dir := startUp(t)
	// The operator stores the secret with the key `up` created.
	key, err := secrets.LoadKeyFile(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://" + natsListen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := secrets.Open(ctx, nc, "", key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "PASSWORD", []byte(value)); err != nil {
		t.Fatal(err)
	}

	c := mcpSession(t, listen)
	var results []string // every result, as JSON
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res)
		results = append(results, b.String())
		return res
	}
	text := func(r *mcp.CallToolResult) string {
		var s string
		for _, ct := range r.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				s += tc.Text
			}
		}
		return s
	}
	if r := call("secrets_list", nil); r.IsError || !strings.Contains(text(r), "{{secrets.PASSWORD}}") {
		t.Fatalf("secrets_list = %s", text(r))
	}
	call("open", map[string]any{"url": site.URL})
	call("fill", map[string]any{"selector": "input[name=user]", "value": "ada"})
	// The worker's cache follows the bucket within moments of the set.
	kittest.Eventually(t, 30*time.Second, func() error {
		r := call("fill", map[string]any{"selector": "input[name=pw]", "value": "{{secrets.PASSWORD}}"})
		return kittest.Check(!r.IsError, "fill with the secret: %s", text(r))
	})
	call("click", map[string]any{"selector": "button"})
	call("wait_for", map[string]any{"selector": "#echo"})
	mu.Lock()
	got := append([]string(nil), received...)
	mu.Unlock()
	if len(got) != 1 || got[0] != value {
		t.Fatalf("the site received %q, want the secret's value", got)
	}
	// fill_form takes placeholders in its values too, and fill with
	// submit sends the form with Enter.
	call("open", map[string]any{"url": site.URL})
	if r := call("fill_form", map[string]any{"fields": []any{
		map[string]any{"selector": "input[name=user]", "value": "ada"},
		map[string]any{"selector": "input[name=pw]", "value": "{{secrets.PASSWORD}}"},
	}}); r.IsError {
		t.Fatalf("fill_form with the secret: %s", text(r))
	}
	call("fill", map[string]any{"selector": "input[name=user]", "value": "ada", "submit": true})
	call("wait_for", map[string]any{"selector": "#echo"})
	mu.Lock()
	got = append([]string(nil), received...)
	mu.Unlock()
	if len(got) != 2 || got[1] != value {
		t.Fatalf("after fill_form the site received %q, want the secret's value twice", got)
	}
	echo := text(call("get_text", map[string]any{"selector": "#echo"}))
	if !strings.Contains(echo, "{{secrets.PASSWORD}}") {
		t.Errorf("get_text of the echo = %q, want the placeholder in place of the value", echo)
	}
	call("snapshot", nil)
	call("get_url", nil)
	call("get_title", nil)
	call("get_html", map[string]any{"selector": "body"})
	call("get_attr", map[string]any{"selector": "#again", "attr": "value"})
	call("eval", map[string]any{"script": "({url: location.href, text: document.body.innerText, b64: btoa(document.getElementById('again').value)})"})
	call("screenshot", nil)
	// An error that quotes the page: a failing wait_for naming nothing,
	// and an unknown secret (the error names it, never a value).
	if r := call("fill", map[string]any{"selector": "#again", "value": "{{secrets.NOPE}}"}); !r.IsError || !strings.Contains(text(r), `"NOPE"`) {
		t.Errorf("unknown secret = %s", text(r))
	}
	call("eval", map[string]any{"script": "throw new Error(document.title)"})

	// The audit trail: wait until history stored the last call.
	var trail bytes.Buffer
	kittest.Eventually(t, 30*time.Second, func() error {
		trail.Reset()
		if err := auditCmd(ctx, []string{"--nats-url", "nats://" + natsListen, "--json", "--limit", "200"}, &trail); err != nil {
			t.Fatal(err)
		}
		n := strings.Count(trail.String(), `"tool":`)
		return kittest.Check(n >= len(results), "the audit trail holds %d records, want %d:\n%s", n, len(results), trail.String())
	})
	if !strings.Contains(trail.String(), "{{secrets.PASSWORD}}") {
		t.Errorf("the audit trail does not show the placeholder:\n%s", trail.String())
	}

	_ = tp.ForceFlush(context.Background())
	var spans strings.Builder
	ended := rec.Ended()[before:]
	for _, s := range ended {
		fmt.Fprintf(&spans, "%s %s %v\n", s.Name(), s.Status().Description, s.Attributes())
		for _, e := range s.Events() {
			fmt.Fprintf(&spans, "  %s %v\n", e.Name, e.Attributes)
		}
	}
	if len(ended) == 0 {
		t.Error("no spans were recorded")
	}

	forms := map[string]string{
		"plain":        value,
		"query-escape": url.QueryEscape(value),
		"path-escape":  url.PathEscape(value),
		"html-escape":  html.EscapeString(value),
		"base64":       base64.StdEncoding.EncodeToString([]byte(value)),
		"json-escape":  strings.ReplaceAll(value, "&", `\u0026`),
	}
	for where, s := range map[string]string{
		"tool results": strings.Join(results, "\n"),
		"log lines":    logs.String(),
		"spans":        spans.String(),
		"audit trail":  trail.String(),
	} {
		if s == "" {
			t.Errorf("%s: nothing to check", where)
		}
		for form, v := range forms {
			if strings.Contains(s, v) {
				t.Errorf("%s hold the secret (%s form)", where, form)
			}
		}
	}
}
