package page

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// componentsScript defines x-switch, a web component whose switch sits
// in an open shadow root behind a label part (as Shoelace's sl-switch
// does), x-card, which nests x-switch in its own shadow root, and
// x-slot, which shows a light-DOM button through a slot over a padded
// box of its own.
const componentsScript = `<script>
customElements.define('x-switch', class extends HTMLElement {
  constructor() {
    super();
    const r = this.attachShadow({ mode: 'open' });
    r.innerHTML = '<style>label{display:inline-flex;padding:6px;cursor:pointer}' +
      'input{position:absolute;opacity:0;width:1px;height:1px;margin:0;pointer-events:none}' +
      '.track{display:inline-block;width:36px;height:18px;background:#ccc}</style>' +
      '<label part="base"><input type="checkbox" role="switch"><span class="track"></span><slot></slot></label>';
    r.querySelector('input').addEventListener('change', (e) => {
      window.toggles = (window.toggles || 0) + 1;
      this.dataset.on = e.target.checked;
    });
  }
});
customElements.define('x-card', class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({ mode: 'open' }).innerHTML = '<div style="padding:10px;border:1px solid"><x-switch>Inner</x-switch></div>';
  }
});
customElements.define('x-modal', class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({ mode: 'open' }).innerHTML = '<div part="base"><div part="overlay" style="position:fixed;inset:0;background:rgba(0,0,0,.3)"></div>' +
      '<div role="dialog" aria-modal="true" aria-label="Confirm" style="position:fixed;right:0;bottom:0;width:120px;background:#fff"><button>OK</button></div></div>';
  }
});
customElements.define('x-slot', class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({ mode: 'open' }).innerHTML = '<div style="padding:12px;background:#eef"><slot></slot></div>';
  }
});
</script>`

const shadowPage = `<!doctype html><title>Shadow</title>` + componentsScript + `
<h1>Settings</h1>
<x-switch id=wifi>Wi-Fi</x-switch>
<x-card id=card></x-card>
<x-slot><button id=slotted onclick="window.slotClicks = (window.slotClicks || 0) + 1">Slotted</button></x-slot>
<iframe id=frame src="/frame" style="border:6px solid #ccc;padding:9px;width:360px;height:120px"></iframe>
<div style="position:relative;margin-top:20px">
  <x-switch id=under>Under</x-switch>
  <div id=modal style="position:absolute;inset:0;background:rgba(0,0,0,.4)">Modal overlay</div>
</div>`

const shadowFrame = `<!doctype html><title>Frame</title>` + componentsScript + `
<x-switch id=framed>Framed</x-switch>`

// TestClickInShadowRoot: a click on a control inside a shadow root (under
// a label part, nested two roots deep, slotted, in a same-origin frame)
// reaches it, toggles it once and says no false "covers its centre";
// a control that a modal overlay really covers still gets the warning,
// also when the overlay covers the frame it is in.
func TestClickInShadowRoot(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": shadowPage, "/frame": shadowFrame})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))

	for _, c := range []struct{ name, host string }{
		{"Wi-Fi", "#wifi"},
		{"Inner", "#card"},
		{"Framed", ""},
	} {
		r := refFor(t, snap, fmt.Sprintf(`switch %q`, c.name))
		got := text(must(t, tab, clickReq(ref(r))))
		if !strings.HasPrefix(got, fmt.Sprintf(`Clicked switch %q [ref=%s]`, c.name, r)) || strings.Contains(got, "covers") {
			t.Errorf("click on switch %q = %q, want a plain Clicked", c.name, got)
		}
		if c.host == "" {
			continue
		}
		state := text(must(t, tab, evalReq(`(() => { let h = document.querySelector('`+c.host+`');
			if (h.id === 'card') h = h.shadowRoot.querySelector('x-switch');
			return h.dataset.on + '/' + window.toggles; })()`)))
		if !strings.HasPrefix(state, `"true/`) {
			t.Errorf("switch %q after one click: on/toggles = %s, want on", c.name, state)
		}
	}
	if got := text(must(t, tab, evalReq(`window.toggles`))); got != "2" {
		t.Errorf("main-frame toggles = %s, want 2 (one per click)", got)
	}

	got := text(must(t, tab, clickReq(ref(refFor(t, snap, `button "Slotted"`)))))
	if strings.Contains(got, "covers") {
		t.Errorf("click on a slotted button = %q", got)
	}
	if n := text(must(t, tab, evalReq(`window.slotClicks`))); n != "1" {
		t.Errorf("slotted button clicks = %s, want 1", n)
	}

	// A real cover: the overlay gets the click, and the tool says so.
	got = text(must(t, tab, clickReq(ref(refFor(t, snap, `switch "Under"`)))))
	if !strings.Contains(got, `generic "Modal overlay"`) || !strings.Contains(got, "covers its centre") {
		t.Errorf("click on a switch under a modal overlay = %q, want the overlay named", got)
	}
	// A component's modal: its nameless overlay is the backdrop of its
	// dialog, and the tool says which dialog to close.
	must(t, tab, evalReq(`document.body.insertAdjacentHTML('beforeend', '<x-modal id="modal"></x-modal>')`))
	got = text(must(t, tab, clickReq(ref(refFor(t, snap, `switch "Wi-Fi"`)))))
	if !regexp.MustCompile(`but generic \[ref=e\d+\] \(the backdrop of dialog "Confirm" \[ref=e\d+\]\) covers its centre`).MatchString(got) {
		t.Errorf("click on a switch behind a modal = %q, want the dialog named", got)
	}
	must(t, tab, evalReq(`document.getElementById('modal').remove()`))
	// An overlay over the frame covers what is in it.
	must(t, tab, evalReq(`document.body.insertAdjacentHTML('beforeend',
		'<div style="position:fixed;inset:0;background:rgba(0,0,0,.4)">Page veil</div>')`))
	got = text(must(t, tab, clickReq(ref(refFor(t, snap, `switch "Framed"`)))))
	if !strings.Contains(got, `generic "Page veil" (outside the frame) covers its centre`) {
		t.Errorf("click in a frame under a page overlay = %q, want the overlay named", got)
	}
}

const svgStylePage = `<!doctype html><title>Logos</title>
<a href="/explore"><svg width="20" height="20" viewBox="0 0 20 20"><defs><style>.logo_small_svg__cls-2{fill:#fff}</style></defs>
 <circle cx="10" cy="10" r="9" class="logo_small_svg__cls-2"/></svg> Explore</a>
<button><svg width="16" height="16"><style>path{stroke:red}</style><script>void 0</script><path d="M0 0h16"/></svg>Close</button>
<p>Sum: <math><semantics><mrow><mi>x</mi></mrow><annotation encoding="application/x-tex">\frac{a}{b}</annotation></semantics></math></p>
<span role="button" tabindex="0" class="picker"></span>
<div contenteditable="true" aria-label="Body" class="blank" data-placeholder="Write here"></div>
<ul><li>walk dog <input type=checkbox class="tick"></li></ul>
<style>.picker::before { content: "Normal" } .picker::after { content: "\e900" }
.blank::before { content: attr(data-placeholder) }
.tick { appearance: none; width: 20px; height: 20px } .tick::after { content: "\2714" }</style>`

// TestNamesLeaveOutStyles: the text of an inline SVG's <style> and
// <script>, and of a MathML annotation, is in no name and no text of
// any snapshot, nor in get_markdown; CSS generated text is in a name
// (but not in a value).
func TestNamesLeaveOutStyles(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": svgStylePage})
	must(t, tab, openReq(srv.URL))
	for _, mode := range [][2]bool{{true, true}, {false, false}, {false, true}} {
		snap := text(must(t, tab, snapReq(mode[0], mode[1])))
		for _, css := range []string{"fill:", "stroke:", "void 0", `\frac`} {
			if strings.Contains(snap, css) {
				t.Errorf("snapshot interactive=%v compact=%v shows %q:\n%s", mode[0], mode[1], css, snap)
			}
		}
		for _, want := range []string{`- link "Explore" [ref=`, `- button "Close" [ref=`, `- button "Normal" [ref=`} {
			if !strings.Contains(snap, want) {
				t.Errorf("snapshot interactive=%v compact=%v lacks %q:\n%s", mode[0], mode[1], want, snap)
			}
		}
	}
	// CSS text is not what a field holds: an empty editor's placeholder.
	snap := text(must(t, tab, snapReq(true, true)))
	if line := lineOf(snap, refFor(t, snap, `textbox "Body"`)); strings.Contains(line, "Write here") {
		t.Errorf("an empty editor shows its CSS placeholder as its value: %q", line)
	}
	// A drawn tick is no name: the checkbox is named by its item.
	refFor(t, snap, `checkbox "walk dog"`)
	md := text(must(t, tab, markdownReq(nil)))
	if strings.Contains(md, "fill:") || strings.Contains(md, "stroke:") {
		t.Errorf("get_markdown shows CSS text:\n%s", md)
	}
}

// gridPage is a data grid as ag-grid draws one: a tab guard, focusable
// rows of gridcells, the first holding a row checkbox named by the grid's
// own wording inside a box with a pointer cursor; a header row; n rows.
func gridPage(n int) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><title>Grid</title><h1>Cars</h1>
<div class="tab-guard" role="presentation" tabindex="0"></div>
<div role="grid" aria-rowcount="` + fmt.Sprint(n+1) + `">
<div role="row" tabindex="-1"><div role="columnheader"><input type=checkbox aria-label="Select all"></div>
 <div role="columnheader"><span role="presentation" style="cursor:pointer">Make</span></div><div role="columnheader">Model</div><div role="columnheader">Price</div></div>`)
	makes := []string{"Toyota", "Ford", "Porsche", "BMW", "Fiat"}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `<div role="row" tabindex="0" aria-rowindex="%d"><div role="gridcell" tabindex="-1"><div role="presentation" style="cursor:pointer">
 <input type=checkbox tabindex="-1" aria-label="Press Space to toggle row selection"></div></div>
 <div role="gridcell" tabindex="-1">%s</div><div role="gridcell" tabindex="-1">Model %d</div><div role="gridcell" tabindex="-1">%d</div></div>`,
			i+2, makes[i%len(makes)], i, 20000+7*i)
	}
	b.WriteString(`</div>
<ul><li tabindex="0" draggable="true">Write report</li><li tabindex="0" draggable="true">Call <b>Ann</b></li></ul>
<table><tr><td>Alice</td><td>30</td><td><button>Edit</button></td></tr><tr><td>Bob</td><td>41</td><td><button>Edit</button></td></tr></table>`)
	return b.String()
}

var rowLine = regexp.MustCompile(`(?m)^\s*- row( "[^"]*")? \[ref=`)

// TestRowNames: rows are named by their cells, a control in a row sits
// under its row's line (so a model can tell whose checkbox it is),
// focusable list items are named by their text, and the default snapshot
// of a large grid shows its first rows, named, and how to find the others.
func TestRowNames(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": gridPage(20), "/big": gridPage(2000)})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))
	row := refFor(t, snap, `row "Porsche Model 2 20014"`)
	lines := strings.Split(snap, "\n")
	for i, l := range lines {
		if strings.Contains(l, "[ref="+row+"]") {
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], `  - checkbox "Press Space to toggle row selection" [ref=`) {
				t.Errorf("the row's checkbox is not the first line under it:\n%s", snap)
			}
		}
	}
	for _, want := range []string{
		`- row "Make Model Price" [ref=`,
		`  - generic "Make" [ref=`,
		`- listitem "Write report" [ref=`,
		`- listitem "Call Ann" [ref=`,
		`- row "Bob 41 Edit" [ref=`,
	} {
		if !strings.Contains(snap, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, snap)
		}
	}
	if strings.Contains(snap, "presentation") || strings.Contains(snap, `generic "Cars"`) {
		t.Errorf("snapshot shows a presentation box or the grid's tab guard:\n%s", snap)
	}
	if m := rowLine.FindAllStringSubmatch(snap, -1); len(m) != 23 {
		t.Errorf("%d row lines, want 23 (header, 20 rows, 2 table rows):\n%s", len(m), snap)
	}

	// A large grid: its first rows, named, then how many more there are
	// and how to see one, then the rest of the page.
	must(t, tab, openReq(srv.URL+"/big"))
	snap = text(must(t, tab, snapReq(true, true)))
	rows := rowLine.FindAllStringSubmatch(snap, -1)
	// 50 rows of the grid (its header and 49), and the 2 of the table.
	if len(snap) > 10000 || len(rows) != 52 {
		t.Errorf("snapshot of a 2,000-row grid: %d characters, %d rows (want 50 of the grid, 2 of the table)", len(snap), len(rows))
	}
	for _, m := range rows {
		if m[1] == "" {
			t.Fatalf("snapshot of a large grid has nameless rows:\n%s", snap)
		}
	}
	for _, want := range []string{
		`- text: "[1951 more rows not shown; take snapshot with find=<their text> to see one]"`,
		`- listitem "Write report" [ref=`,
	} {
		if !strings.Contains(snap, want) {
			t.Errorf("snapshot of a 2,000-row grid lacks %q:\n%s", want, snap)
		}
	}
	found := text(must(t, tab, findReq("Model 1234", "")))
	if !strings.Contains(found, `- row "Fiat Model 1234 28638" [ref=`) || !strings.Contains(found, `- checkbox "Press Space to toggle row selection" [ref=`) {
		t.Errorf("find of a row past the first 50 = %s", found)
	}
	// A larger max_chars shows more rows.
	snap = text(must(t, tab, maxChars(snapReq(true, true), 400000)))
	if n := len(rowLine.FindAllString(snap, -1)); n != 502 {
		t.Errorf("snapshot with max_chars=400000 shows %d rows, want 502", n)
	}
}
