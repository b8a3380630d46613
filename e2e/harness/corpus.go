package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The compatibility corpus: real apps that others wrote, the TodoMVC
// examples as the todomvc npm package (version in e2e/corpus/package.json)
// ships them built, served on loopback. A task drives one app through MCP
// the way a model does: snapshot, choose a ref by role and name, act,
// then check the page's own state.

// CorpusApps are the apps of the corpus: the examples that run from
// static files (no server of their own, no CDN, no compile step), in the
// todomvc package's examples folder.
//
// Left out, besides those that need a server, a CDN or a compiler: jquery
// (the package lacks its bower_components: jQuery, Handlebars and
// Director are missing), dijon, knockoutjs_require and typescript-backbone
// (their version has no filters), stapes, stapes_require and yui (they
// store a new todo but do not show it in this Chromium, whatever drives
// it), and sammyjs: now and then its start route runs twice, which binds
// the list's click handlers twice, so a checkbox click toggles its todo
// twice and leaves it active (6 runs in 200 here, each with two click
// handlers on #todo-list; the app's own race, whoever clicks).
var CorpusApps = []string{
	"agilityjs", "ampersand", "angularjs", "angularjs-perf", "angularjs_require", "atmajs",
	"backbone", "backbone_marionette", "backbone_require", "canjs", "canjs_require",
	"emberjs", "enyo_backbone", "epitome", "exoskeleton", "knockback",
	"knockoutjs", "mithril", "puremvc", "ractive", "react", "react-backbone",
	"somajs", "somajs_require", "spine", "thorax",
	"troopjs_require", "typescript-angular", "vanillajs", "vue",
}

// CorpusItems are the todos a task adds; it completes CorpusDone and
// filters on Completed.
var CorpusItems = []string{"buy milk", "walk dog", "read book"}

// CorpusDone is the item a task completes.
const CorpusDone = "walk dog"

// CorpusDir returns the todomvc package's examples folder, installed by
// scripts/deps.sh (npm ci in e2e/corpus), from the e2e module's root or
// below it.
func CorpusDir() (string, error) {
	return corpusPath("todomvc", "examples")
}

// corpusPath returns the folder of e2e/corpus/node_modules/<parts>, from
// the e2e module's root or below it.
func corpusPath(parts ...string) (string, error) {
	for _, base := range []string{".", "e2e", "..", "../.."} {
		dir, err := filepath.Abs(filepath.Join(append([]string{base, "corpus", "node_modules"}, parts...)...))
		if err != nil {
			continue
		}
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("the corpus (%s) is not installed: run scripts/deps.sh (npm ci in e2e/corpus)", filepath.Join(parts...))
}

// PlaywrightCLI is Playwright MCP's cli.js, installed beside the corpus
// (e2e/corpus pins its version), for side-by-side runs.
func PlaywrightCLI() (string, error) {
	dir, err := CorpusDir()
	if err != nil {
		return "", err
	}
	cli := filepath.Join(dir, "..", "..", "@playwright", "mcp", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return "", fmt.Errorf("the Playwright MCP package is not installed (scripts/deps.sh runs npm ci in e2e/corpus): %w", err)
	}
	return cli, nil
}

// ServeCorpus serves the examples folder on loopback; the caller closes
// the server. An app is at <URL>/<app>/index.html.
func ServeCorpus(dir string) *httptest.Server {
	fs := http.FileServer(http.Dir(dir))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		fs.ServeHTTP(w, r)
	}))
}

// Driver is an MCP server's browser tools as a task uses them: Sovereign's
// or Playwright MCP's names and arguments behind one interface. Each
// method returns the text of the result.
type Driver interface {
	Name() string
	Open(ctx context.Context, url string) (string, error)
	Snapshot(ctx context.Context) (string, error)
	// Add types text into the field ref and submits it (Enter), in
	// AddCalls tool calls.
	Add(ctx context.Context, ref, text string) (string, error)
	AddCalls() int
	Click(ctx context.Context, ref string) (string, error)
	// Eval runs a JavaScript function expression, () => value.
	Eval(ctx context.Context, fn string) (string, error)
}

// TaskStats are the figures of one task run.
type TaskStats struct {
	Calls         int
	ToolTime      time.Duration
	SnapshotChars int
	ResultChars   int
	// Steps is the tool time per step of the task: open, snapshot, add,
	// click, eval.
	Steps map[string]time.Duration
}

// metered counts the calls of a driver.
type metered struct {
	d Driver
	s *TaskStats
}

func (m metered) do(step string, fn func() (string, error)) (string, error) {
	start := time.Now()
	out, err := fn()
	took := time.Since(start)
	m.s.ToolTime += took
	if m.s.Steps == nil {
		m.s.Steps = map[string]time.Duration{}
	}
	m.s.Steps[step] += took
	m.s.Calls++
	if step == "add" {
		m.s.Calls += m.d.AddCalls() - 1
	}
	m.s.ResultChars += len(out)
	if step == "snapshot" {
		m.s.SnapshotChars += len(out)
	}
	return out, err
}

// RunTodoTask runs the task on one app: open it, add CorpusItems,
// complete CorpusDone, filter on Completed, and check that the page then
// shows CorpusDone alone, completed. The error says which step failed and
// what the page or the tool said.
func RunTodoTask(ctx context.Context, d Driver, url string) (TaskStats, error) {
	var st TaskStats
	m := metered{d, &st}
	if out, err := m.do("open", func() (string, error) { return d.Open(ctx, url) }); err != nil {
		return st, fmt.Errorf("open: %v (%s)", err, clip(out))
	}
	snap, err := m.do("snapshot", func() (string, error) { return d.Snapshot(ctx) })
	if err != nil {
		return st, fmt.Errorf("snapshot: %v", err)
	}
	input := FindRefAny(snap, []string{"textbox"}, "What needs to be done?")
	if input == "" {
		return st, fmt.Errorf("the first snapshot has no textbox %q:\n%s", "What needs to be done?", clip(snap))
	}
	for _, item := range CorpusItems {
		out, err := m.do("add", func() (string, error) { return d.Add(ctx, input, item) })
		if err != nil {
			// The app may have made a new field: look again, as a model would.
			snap, err2 := m.do("snapshot", func() (string, error) { return d.Snapshot(ctx) })
			if err2 != nil {
				return st, fmt.Errorf("add %q: %v; snapshot: %v", item, err, err2)
			}
			if input = FindRefAny(snap, []string{"textbox"}, "What needs to be done?"); input == "" {
				return st, fmt.Errorf("add %q: %v (%s)", item, err, clip(out))
			}
			if out, err = m.do("add", func() (string, error) { return d.Add(ctx, input, item) }); err != nil {
				return st, fmt.Errorf("add %q: %v (%s)", item, err, clip(out))
			}
		}
	}
	if snap, err = m.do("snapshot", func() (string, error) { return d.Snapshot(ctx) }); err != nil {
		return st, fmt.Errorf("snapshot: %v", err)
	}
	// Each click finds its element in the last snapshot; when the app
	// redrew it since (the ref is gone), the task takes a new snapshot
	// and tries once more, as a model told "take a new snapshot" does.
	click := func(what string, find func(snap string) string) error {
		ref := find(snap)
		if ref == "" {
			return fmt.Errorf("no %s in the snapshot:\n%s", what, clip(snap))
		}
		out, err := m.do("click", func() (string, error) { return d.Click(ctx, ref) })
		if err == nil {
			return nil
		}
		if snap, err = m.do("snapshot", func() (string, error) { return d.Snapshot(ctx) }); err != nil {
			return fmt.Errorf("snapshot: %v", err)
		}
		if ref = find(snap); ref == "" {
			return fmt.Errorf("click %s: %v (%s); no %s in a new snapshot", what, err, clip(out), what)
		}
		if out, err = m.do("click", func() (string, error) { return d.Click(ctx, ref) }); err != nil {
			return fmt.Errorf("click %s: %v (%s)", what, err, clip(out))
		}
		return nil
	}
	if err := click(fmt.Sprintf("checkbox for %q", CorpusDone), func(s string) string { return ControlFor(s, "checkbox", CorpusDone) }); err != nil {
		return st, err
	}
	if snap, err = m.do("snapshot", func() (string, error) { return d.Snapshot(ctx) }); err != nil {
		return st, fmt.Errorf("snapshot: %v", err)
	}
	if err := click(`link "Completed"`, func(s string) string { return FindRefAny(s, []string{"link"}, "Completed") }); err != nil {
		return st, err
	}
	out, err := m.do("eval", func() (string, error) { return d.Eval(ctx, todoState) })
	if err != nil {
		return st, fmt.Errorf("read the list: %v (%s)", err, clip(out))
	}
	if want := `done:` + CorpusDone + `;`; !strings.Contains(out, want) || strings.Count(out, ";") != 1 {
		return st, fmt.Errorf("after the Completed filter the page shows %s, want only %q, completed", clip(out), CorpusDone)
	}
	return st, nil
}

// todoState lists the todos the page shows, "done:" or "open:" and the
// text of each followed by ";", read from the app's own list.
const todoState = `() => Array.from(document.querySelectorAll('#todo-list > li, .todo-list > li'))
  .filter((li) => li.getClientRects().length > 0 && getComputedStyle(li).display !== 'none')
  .map((li) => (li.classList.contains('completed') || (li.querySelector('input[type=checkbox]') || {}).checked ? 'done:' : 'open:') +
    li.textContent.trim().replace(/\s+/g, ' ') + ';').join(' ')`

func clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "…"
	}
	return s
}

// snapLine is one line of an ARIA-YAML snapshot: indent, role, name, ref.
var snapLine = regexp.MustCompile(`^(\s*)- ([\w-]+)(?: ("(?:[^"\\]|\\.)*"))?(.*)$`)
var refAttr = regexp.MustCompile(`\[ref=([\w]+)\]`)

type line struct {
	indent     int
	role, name string
	ref        string
	rest       string
}

func parseLines(snap string) []line {
	var out []line
	for _, l := range strings.Split(snap, "\n") {
		m := snapLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		name := strings.Trim(m[3], `"`)
		if r := refAttr.FindStringSubmatch(m[4]); r != nil {
			out = append(out, line{len(m[1]), m[2], name, r[1], m[4]})
		} else {
			out = append(out, line{len(m[1]), m[2], name, "", m[4]})
		}
	}
	return out
}

// FindRefAny returns the ref of the first element with one of roles and
// name, in either server's snapshot format, or "".
func FindRefAny(snap string, roles []string, name string) string {
	for _, l := range parseLines(snap) {
		for _, r := range roles {
			if l.role == r && l.name == name && l.ref != "" {
				return l.ref
			}
		}
	}
	return ""
}

// ControlFor returns the ref of the role control that belongs to the item
// whose text is text: one named so (a control named by where it sits), or
// the first such control in the nearest list item or row that holds the
// text, as a model reads a snapshot.
func ControlFor(snap, role, text string) string {
	if r := FindRefAny(snap, []string{role}, text); r != "" {
		return r
	}
	lines := parseLines(snap)
	for i, l := range lines {
		if l.name != text && !strings.Contains(l.rest, text) {
			continue
		}
		// Up to the list item or row that holds this line.
		for j := i - 1; j >= 0; j-- {
			if lines[j].indent >= l.indent || (lines[j].role != "listitem" && lines[j].role != "row") {
				continue
			}
			for k := j + 1; k < len(lines) && lines[k].indent > lines[j].indent; k++ {
				if lines[k].role == role && lines[k].ref != "" {
					return lines[k].ref
				}
			}
			break
		}
	}
	return ""
}
