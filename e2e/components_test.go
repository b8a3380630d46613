package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// snapshotCap is the browser worker's default snapshot cap
// (page.DefaultSnapshotChars), with room for the marker of a cut.
const snapshotCap = 40000 + 1000

// TestComponents drives real component libraries (harness.ComponentPages:
// Shoelace's web components, Quill's editor, AG Grid) through MCP and
// checks the text a model reads, not only what the page did: no false
// "covers its centre" on a control inside a shadow root, no CSS text in a
// name, rows named by their cells with their checkboxes under them,
// named toolbar buttons, bounded snapshots.
func TestComponents(t *testing.T) {
	t.Parallel()
	srv, err := harness.ServeComponents()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 4})
	url := f.Gateways[0].MCP
	open := func(t *testing.T, ctx context.Context, page string) (*harness.MCPClient, string) {
		c := initClient(t, ctx, url)
		t.Cleanup(func() { c.Delete(context.Background()) })
		tool(t, ctx, c, "open", map[string]any{"url": srv.URL + page})
		tool(t, ctx, c, "wait_for", map[string]any{"selector": "body[data-ready]"})
		snap := text(t, ctx, c, "snapshot", nil)
		noCSSInNames(t, snap)
		if len(snap) > snapshotCap {
			t.Errorf("snapshot of %s has %d characters", page, len(snap))
		}
		t.Logf("%s: snapshot of %d characters", page, len(snap))
		return c, snap
	}

	t.Run("shoelace", func(t *testing.T) {
		ctx := callCtx(t, 2*time.Minute)
		c, snap := open(t, ctx, "/shoelace.html")
		if harness.FindRef(snap, "link", "Explore") == "" {
			t.Errorf("no link \"Explore\" (its SVG logo holds a <style>):\n%s", snap)
		}
		wifi := mustRef(t, snap, "switch", "Wi-Fi")
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": wifi}), `switch "Wi-Fi"`)
		if got := evalString(t, ctx, c, `JSON.stringify(window.changes) + ' ' + document.getElementById('wifi').checked`); got != `["wifi=true"] true` {
			t.Errorf("after one click on the switch: changes, checked = %s; want one change, on", got)
		}
		news := mustRef(t, snap, "checkbox", "Newsletter")
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": news}), `checkbox "Newsletter"`)
		if got := evalString(t, ctx, c, `String(document.getElementById('news').checked)`); got != "true" {
			t.Errorf("after one click on the checkbox: checked = %s", got)
		}
		snap = text(t, ctx, c, "snapshot", nil)
		for _, want := range []string{`switch "Wi-Fi" [checked]`, `checkbox "Newsletter" [checked]`} {
			if !strings.Contains(snap, want) {
				t.Errorf("snapshot lacks %q:\n%s", want, snap)
			}
		}
		// A real cover: with the dialog open, its overlay gets a click
		// on the switch, and the tool says so.
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": mustRef(t, snap, "button", "Open dialog")}), `button "Open dialog"`)
		snap = text(t, ctx, c, "snapshot", nil)
		mustRef(t, snap, "dialog", "Confirm")
		mustRef(t, snap, "button", "OK")
		out := text(t, ctx, c, "click", map[string]any{"ref": wifi})
		if !strings.Contains(out, `(the backdrop of dialog "Confirm" [ref=`) || !strings.Contains(out, "covers its centre") {
			t.Errorf("click on the switch behind an open dialog = %q, want the dialog named", out)
		}
		if got := evalString(t, ctx, c, `JSON.stringify(window.changes)`); got != `["wifi=true"]` {
			t.Errorf("the switch behind the dialog changed: %s", got)
		}
	})

	t.Run("quill", func(t *testing.T) {
		ctx := callCtx(t, 2*time.Minute)
		c, snap := open(t, ctx, "/quill.html")
		if regexp.MustCompile(`(?m)^\s*- button \[`).MatchString(snap) {
			t.Errorf("a toolbar button has no name:\n%s", snap)
		}
		for _, name := range []string{"Normal", "bold", "italic", "list: bullet"} {
			mustRef(t, snap, "button", name)
		}
		var editor string
		for _, n := range harness.ParseSnapshot(snap) {
			if n.Role == "textbox" {
				editor = n.Ref
			}
		}
		if editor == "" {
			t.Fatalf("no textbox for the editor:\n%s", snap)
		}
		if strings.Contains(snap, "Write something") {
			t.Errorf("the empty editor shows its placeholder as its text:\n%s", snap)
		}
		tool(t, ctx, c, "type", map[string]any{"ref": editor, "value": "Hello world"})
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": mustRef(t, snap, "button", "bold")}), `button "bold"`)
		if got := evalString(t, ctx, c, `quill.getText()`); got != `Hello world\n` {
			t.Errorf("the editor holds %q, want the typed text", got)
		}
		snap = text(t, ctx, c, "snapshot", nil)
		if !strings.Contains(snap, "[ref="+editor+"]: Hello world") {
			t.Errorf("the snapshot does not show the typed text in %s:\n%s", editor, snap)
		}
	})

	t.Run("grid", func(t *testing.T) {
		ctx := callCtx(t, 2*time.Minute)
		c, snap := open(t, ctx, "/grid.html")
		noNamelessRows(t, snap)
		row := mustRef(t, snap, "row", "Porsche Boxster 2 20014")
		box := childRef(snap, row, "checkbox")
		if box == "" {
			t.Fatalf("no checkbox under row %s:\n%s", row, snap)
		}
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": box}), `checkbox "`)
		if got := evalString(t, ctx, c, `api.getSelectedRows().map((r) => r.model).join()`); got != "Boxster 2" {
			t.Errorf("selected rows = %q, want Boxster 2", got)
		}
		if snap = text(t, ctx, c, "snapshot", nil); !strings.Contains(snap, `row "Porsche Boxster 2 20014" [selected]`) {
			t.Errorf("the selected row does not say so:\n%s", snap)
		}

		// Every row drawn: the snapshot shows the first rows, named,
		// and says how to see the others; find shows one, whose
		// checkbox a click selects.
		c, snap = open(t, ctx, "/grid.html?all")
		noNamelessRows(t, snap)
		mustRef(t, snap, "row", "Toyota Celica 0 20000")
		if !regexp.MustCompile(`- text: "\[\d+ more rows not shown; take snapshot with find=`).MatchString(snap) {
			t.Errorf("the snapshot of 2,000 rows does not say that more are not shown:\n%s", clipped(snap))
		}
		found := text(t, ctx, c, "snapshot", map[string]any{"find": "Panda 1234"})
		row = mustRef(t, found, "row", "Fiat Panda 1234 28638")
		if box = childRef(found, row, "checkbox"); box == "" {
			t.Fatalf("no checkbox under row %s:\n%s", row, found)
		}
		clicked(t, text(t, ctx, c, "click", map[string]any{"ref": box}), `checkbox "`)
		if got := evalString(t, ctx, c, `api.getSelectedRows().map((r) => r.model).join()`); got != "Panda 1234" {
			t.Errorf("selected rows = %q, want Panda 1234", got)
		}
	})
}

// cssName finds a name that holds CSS rules.
var cssName = regexp.MustCompile(`(?m)^\s*- [\w-]+ "[^"\n]*(\{[^"\n]*:|[.#][\w-]+\s*\{)`)

func noCSSInNames(t *testing.T, snap string) {
	t.Helper()
	if m := cssName.FindString(snap); m != "" {
		t.Errorf("a name holds CSS text: %s", m)
	}
}

var namelessRow = regexp.MustCompile(`(?m)^\s*- row \[`)

func noNamelessRows(t *testing.T, snap string) {
	t.Helper()
	if n := len(namelessRow.FindAllString(snap, -1)); n > 0 {
		t.Errorf("%d rows without a name:\n%s", n, clipped(snap))
	}
	if !strings.Contains(snap, "- row \"") {
		t.Errorf("no named row:\n%s", clipped(snap))
	}
}

// clicked checks that a click's result names what it clicked and says
// nothing covered it.
func clicked(t *testing.T, out, what string) {
	t.Helper()
	if !strings.HasPrefix(out, "Clicked "+what) || strings.Contains(out, "covers") {
		t.Errorf("click = %q, want a plain Clicked %s", out, what)
	}
}

func mustRef(t *testing.T, snap, role, name string) string {
	t.Helper()
	r := harness.FindRef(snap, role, name)
	if r == "" {
		t.Fatalf("snapshot has no %s %q:\n%s", role, name, clipped(snap))
	}
	return r
}

// childRef returns the ref of the first role line nested under the line
// of ref, or "".
func childRef(snap, ref, role string) string {
	lines := strings.Split(snap, "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	for i, l := range lines {
		if !strings.Contains(l, "[ref="+ref+"]") {
			continue
		}
		for _, k := range lines[i+1:] {
			if indent(k) <= indent(l) {
				break
			}
			for _, n := range harness.ParseSnapshot(k) {
				if n.Role == role {
					return n.Ref
				}
			}
		}
	}
	return ""
}

func clipped(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}
