package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// formsPage has the widgets of the form tools: selects, a native and a
// custom ARIA checkbox, text and password fields, an HTML5 drag-and-drop
// list and an article.
const formsPage = `<!doctype html><title>forms</title>
<label>Size <select id="size"><option value="s">Small</option><option value="m">Medium</option></select></label>
<label>Toppings <select id="tops" multiple><option value="ham">Ham</option><option value="egg">Egg</option><option value="olive">Olives</option></select></label>
<label><input type="checkbox" id="agree"> Agree</label>
<div id="news" role="checkbox" aria-checked="false" aria-label="Newsletter" tabindex="0" style="width:60px;height:20px;background:#eee"></div>
<input id="name" aria-label="Name"><input id="pw" type="password" aria-label="Password">
<ul id="list"><li draggable="true" id="a">Apple</li><li draggable="true" id="b">Banana</li><li draggable="true" id="c">Cherry</li></ul>
<article><h2>Shipping</h2><p>Orders ship in <strong>two days</strong>; see <a href="/faq">the FAQ</a>.</p></article>
<script>
const news = document.getElementById('news');
news.addEventListener('click', () => news.setAttribute('aria-checked', String(news.getAttribute('aria-checked') !== 'true')));
let dragged = null;
for (const li of document.querySelectorAll('#list li')) {
  li.addEventListener('dragstart', () => { dragged = li; });
  li.addEventListener('dragover', (e) => e.preventDefault());
  li.addEventListener('drop', (e) => { e.preventDefault(); li.after(dragged); });
}
</script>`

// TestFormTools drives select_option, check, fill_form, drag and
// get_markdown through a real MCP client and gateway, checks their errors
// and that the audit trail keeps a password typed by fill_form out.
func TestFormTools(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 2})
	ctx := callCtx(t, 3*time.Minute)
	if _, err := f.StartHistory(ctx, filepath.Join(f.Dir, "history"), ""); err != nil {
		t.Fatalf("start history: %v", err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, formsPage)
	}))
	defer site.Close()
	c := initClient(t, ctx, f.Gateways[0].MCP)
	defer c.Delete(context.Background())
	since := time.Now().UnixNano()
	tool(t, ctx, c, "open", map[string]any{"url": site.URL})

	if got := text(t, ctx, c, "select_option", map[string]any{"selector": "#size", "values": []any{"Medium"}}); !strings.Contains(got, `selected now: "Medium"`) {
		t.Errorf("select_option = %q", got)
	}
	wantToolError(t, ctx, c, "select_option", map[string]any{"selector": "#size", "values": []any{"Huge"}}, `has no option "Huge"`, `Small (value "s")`)
	wantToolError(t, ctx, c, "select_option", map[string]any{"selector": "#size", "values": "Medium"}, `argument "values" must be an array`)

	news := refOf(t, ctx, c, "checkbox", "Newsletter")
	if got := text(t, ctx, c, "check", map[string]any{"ref": news}); !strings.Contains(got, `Checked checkbox "Newsletter"`) {
		t.Errorf("check = %q", got)
	}
	if got := text(t, ctx, c, "check", map[string]any{"ref": news, "checked": true}); !strings.Contains(got, "already checked") {
		t.Errorf("check again = %q", got)
	}
	wantToolError(t, ctx, c, "check", map[string]any{"selector": "#name"}, "not a checkbox, radio or switch")

	got := text(t, ctx, c, "fill_form", map[string]any{"fields": []any{
		map[string]any{"selector": "#name", "value": "Ada"},
		map[string]any{"selector": "#pw", "value": "hunter2"},
		map[string]any{"selector": "#agree", "checked": true},
		map[string]any{"selector": "#tops", "values": []any{"ham", "Egg"}},
	}})
	for _, want := range []string{"Filled 4 fields:", `1. Filled textbox "Name"`, "2. Filled", `3. Checked checkbox "Agree"`, `4. Selected "ham", "Egg"`} {
		if !strings.Contains(got, want) {
			t.Errorf("fill_form = %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("fill_form result shows the password: %q", got)
	}
	if v := evalString(t, ctx, c, `[document.getElementById('name').value, agree.checked, Array.from(tops.selectedOptions, (o) => o.value).join('+')].join()`); v != "Ada,true,ham+egg" {
		t.Errorf("fields after fill_form = %q", v)
	}
	wantToolError(t, ctx, c, "fill_form", map[string]any{"fields": []any{
		map[string]any{"selector": "#name", "value": "Bob"},
		map[string]any{"selector": "#size", "values": []any{"Huge"}},
	}}, "stopped at field 2 of 2", "field 1 was filled before it")
	wantToolError(t, ctx, c, "fill_form", map[string]any{"fields": []any{map[string]any{"selector": "#name"}}}, `"fields[0]" needs exactly one of value`)

	if got := text(t, ctx, c, "drag", map[string]any{"from": "#a", "to": "#c"}); !strings.Contains(got, "HTML5 drag and drop") {
		t.Errorf("drag = %q", got)
	}
	if order := evalString(t, ctx, c, `Array.from(document.querySelectorAll('#list li'), (li) => li.id).join('')`); order != "bca" {
		t.Errorf("list after drag = %q, want bca", order)
	}
	wantToolError(t, ctx, c, "drag", map[string]any{"from": "#a", "to": "#nowhere"}, `no element matches selector "#nowhere"`)

	md := text(t, ctx, c, "get_markdown", map[string]any{"selector": "article"})
	if want := "## Shipping\n\nOrders ship in **two days**; see [the FAQ](" + site.URL + "/faq)."; md != want {
		t.Errorf("get_markdown = %q, want %q", md, want)
	}
	wantToolError(t, ctx, c, "get_markdown", map[string]any{"selector": "#none"}, "no element matches")

	t.Run("todomvc", func(t *testing.T) { testMarkdownTodoMVC(t, ctx, c) })
	t.Run("audit_hides_password", func(t *testing.T) { testFormAudit(t, ctx, f, since) })
}

// wantToolError calls a tool that must fail with a message holding each
// of parts.
func wantToolError(t *testing.T, ctx context.Context, c *harness.MCPClient, name string, args map[string]any, parts ...string) {
	t.Helper()
	_, err := c.Tool(ctx, name, args)
	var te *harness.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("%s %v: err = %v, want a tool error", name, args, err)
	}
	for _, p := range parts {
		if !strings.Contains(te.Text, p) {
			t.Errorf("%s error %q does not contain %q", name, te.Text, p)
		}
	}
}

// testMarkdownTodoMVC adds an item to a real TodoMVC app with fill submit
// and reads the app back as Markdown.
func testMarkdownTodoMVC(t *testing.T, ctx context.Context, c *harness.MCPClient) {
	dir, err := harness.CorpusDir()
	if err != nil {
		t.Skipf("corpus not installed: %v", err)
	}
	srv := harness.ServeCorpus(dir)
	defer srv.Close()
	tool(t, ctx, c, "open", map[string]any{"url": srv.URL + "/backbone/index.html"})
	tool(t, ctx, c, "wait_for", map[string]any{"selector": "#new-todo"})
	tool(t, ctx, c, "fill", map[string]any{"selector": "#new-todo", "value": "water the plants", "submit": true})
	md := text(t, ctx, c, "get_markdown", nil)
	for _, want := range []string{"# todos", "- water the plants", "**1** item left", "[Active](" + srv.URL + "/backbone/"} {
		if !strings.Contains(md, want) {
			t.Errorf("get_markdown of TodoMVC lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"<script", "function("} {
		if strings.Contains(md, bad) {
			t.Errorf("get_markdown of TodoMVC holds %q:\n%s", bad, md)
		}
	}
}

// testFormAudit checks that fill_form calls reach the audit trail and that
// the one that filled a password field keeps its fields out.
func testFormAudit(t *testing.T, ctx context.Context, f *harness.Fleet, since int64) {
	// The call that filled the password and the one that stopped at a
	// field both reached the worker.
	recs := kittest.EventuallyValue(t, 30*time.Second, func() ([]*historyv1.AuditRecord, error) {
		recs, err := f.AuditAll(ctx, &historyv1.AuditQuery{Tool: "fill_form", SinceUnixNano: since})
		if err != nil {
			t.Fatalf("audit query: %v", err)
		}
		return recs, kittest.Check(len(recs) >= 2, "audit holds %d fill_form records, want at least 2", len(recs))
	})
	for _, r := range recs {
		if strings.Contains(r.GetArguments(), "hunter2") || strings.Contains(r.GetResult(), "hunter2") {
			t.Errorf("audit record of fill_form holds the password: %s / %s", r.GetArguments(), r.GetResult())
		}
	}
}
