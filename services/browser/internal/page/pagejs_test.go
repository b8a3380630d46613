package page

// Tests of page.js on its own: its api (globalThis.__sov in Sovereign's
// isolated world, the functions that the Go side calls by name) called
// directly in real pages, with table-driven cases on what each returns,
// and each typed wrapper of js_*.go called once (TestPageJSWrappers).
// The tool tests (snapshot_test.go, names_test.go, ...) see page.js
// through the tools; these pin the page side's answers themselves.

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// pjsTab opens a tab with an httptest server of pages (by path) and
// returns both.
func pjsTab(t *testing.T, pages map[string]string) (*Tab, string) {
	t.Helper()
	tab := newTab(t, Options{})
	return tab, serve(t, pages).URL
}

// pjs calls the JavaScript function fn (async or not) with args in the
// isolated world of frame (the main frame when "") and decodes its result
// into out as page.js returned it: the clip markers (U+E000..U+E002) stay
// in, where the wrappers would resolve them. In fn, $(sel) finds an element
// across open shadow roots ("host >>> inner").
func pjs(tb testing.TB, tab *Tab, frame cdp.FrameID, fn string, out any, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	if frame == "" {
		frame = tab.frames.main()
	}
	// The arguments travel as one array: the protocol client leaves out
	// an argument whose JSON is "", null, [] or {}.
	argv, err := json.Marshal(append([]any{}, args...))
	if err != nil {
		tb.Fatal(err)
	}
	wrapped := `async function(a) {
		const $ = (s) => s.split('>>>').reduce((r, part) => r && (r.shadowRoot || r).querySelector(part.trim()), document);
		const v = await (` + fn + `).apply(this, a);
		// Escaped, so decodeCall's clip resolution leaves the markers alone.
		return v === undefined ? 'null' : JSON.stringify(v).replace(/[\uE000-\uE002]/g, (c) => '\\u' + c.charCodeAt(0).toString(16));
	}`
	var s string
	err = tab.frames.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		r, err := chromedp.Call(ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
			FunctionDeclaration: wrapped,
			ExecutionContextID:  world,
			Arguments:           []*runtime.CallArgument{{Value: argv}},
			ReturnByValue:       new(true),
			AwaitPromise:        new(true),
		})
		return decodeCall(r, err, &s)
	})
	if err != nil {
		tb.Fatalf("page.js call %s: %v", fn, err)
	}
	if out == nil {
		return
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		tb.Fatalf("page.js call %s: decode %q: %v", fn, s, err)
	}
}

// childFrames returns the ids of the main frame's child frames.
func childFrames(tb testing.TB, tab *Tab) []cdp.FrameID {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		tb.Fatalf("frame tree: %v", err)
	}
	var ids []cdp.FrameID
	for _, c := range tree.FrameTree.ChildFrames {
		ids = append(ids, c.Frame.ID)
	}
	return ids
}

var refRE = regexp.MustCompile(`\[ref=(f\d+)?e(\d+)\]`)

// noRef drops the refs of snapshot lines.
func noRef(s string) string { return refRE.ReplaceAllString(s, "[ref]") }

// renumber numbers the refs of a snapshot e1, e2, ... in order of first
// appearance, so expectations do not depend on where a tab's refs start.
func renumber(s string) string {
	seen := map[string]int{}
	return refRE.ReplaceAllStringFunc(s, func(r string) string {
		if _, ok := seen[r]; !ok {
			seen[r] = len(seen) + 1
		}
		return "[ref=e" + strconv.Itoa(seen[r]) + "]"
	})
}

// refNum returns the ref number of the first ref in s.
func refNum(tb testing.TB, s string) int {
	tb.Helper()
	m := refRE.FindStringSubmatch(s)
	if m == nil {
		tb.Fatalf("no ref in %q", s)
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

// namesPage has one element per case of TestPageJSDescribe, each with an id.
var namesPage = `<!doctype html><title>Names</title>
<style>
.gen::before { content: "Play"; }
.icon::before { content: "\e900"; font-family: monospace; }
</style>
<button id=arialabel aria-label="Close">X</button>
<span id=l1>Email</span><span id=l2>address</span>
<input id=labelledby aria-labelledby="l1 l2">
<button id=lbwins aria-label="ignored" aria-labelledby="l1">Text</button>
<span id=lblabel aria-label="From aria-label">hidden text</span><button id=lbtarget aria-labelledby="lblabel"></button>
<label for=user>User <b>name</b></label><input id=user>
<label>Remember me <input type=checkbox id=wrapped checked></label>
<img id=alt alt="Company logo" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<img id=emptyalt alt="" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<input id=title title="Search the site">
<input id=placeholder placeholder="Find">
<a id=content href="/next">Read <b>more</b></a>
<h2 id=heading>Intro</h2>
<button id=ariahidden>Save<span aria-hidden=true> star</span><span style="display:none"> gone</span></button>
<input id=submit type=submit>
<input id=reset type=reset>
<input id=inputbutton type=button value="Go">
<input id=image type=image alt="Search">
<label for=file>Avatar</label><input id=file type=file>
<fieldset id=fieldset><legend>Shipping</legend></fieldset>
<table id=table><caption>Prices</caption><tr><td>1</td></tr></table>
<figure id=figure><figcaption>Chart</figcaption></figure>
<label for=size>Size</label><select id=size><option>S</option><option selected>M</option></select>
<svg id=svg width=10 height=10><title>Icon</title></svg>
<button id=generated class=gen></button>
<button id=iconfont class=icon title="Settings"></button>
<iframe id=iframe title="Ads" src="about:blank"></iframe>
<input id=password type=password aria-label=Password value=hunter2>
<input id=otp autocomplete=one-time-code aria-label=Code value=123456>
<textarea id=textarea aria-label=Notes>some notes</textarea>
<nav id=nav></nav>
<header id=banner></header>
<article><header id=scopedheader></header></article>
<section id=region aria-label="News"></section>
<section id=section></section>
<input id=combo list=dl aria-label=City><datalist id=dl></datalist>
<select id=listbox multiple aria-label=Tags><option>a</option></select>
<div id=tokens role="switch button" aria-label=Wifi aria-checked=true></div>
<div id=editable contenteditable aria-label=Editor>typed</div>
<a id=nohref>anchor</a>
<table><tr><th id=rowheader scope=row>Row</th><th id=colheader>Col</th></tr></table>
<input id=hidden type=hidden>
<button id=disabled disabled>Off</button>
<button id=expanded aria-expanded=true>Menu</button>
<details open><summary id=summary>More</summary></details>
<h3 id=h3>Three</h3>
<div id=level role=heading aria-level=5>Five</div>
<button id=pressed aria-pressed=true>Bold</button>
<select id=opts aria-label=Pick><option id=option selected>One</option></select>
<input id=mixed type=checkbox aria-label=All>
<div id=slider role=slider aria-valuenow=5 aria-valuetext=five aria-label=Volume></div>
<progress id=progress value=3 max=10 aria-label=Load></progress>
<div id=shadowbutton role=button></div>
<div id=slotbutton role=button><span>Slotted</span></div>
<button id=long aria-label="` + longLabel + `"></button>
<script>
document.getElementById('mixed').indeterminate = true;
document.getElementById('shadowbutton').attachShadow({mode: 'open'}).innerHTML = '<span>From</span> <b>shadow</b>';
document.getElementById('slotbutton').attachShadow({mode: 'open'}).innerHTML = '<i>Before </i><slot></slot>';
</script>`

// longLabel is 130 characters: a name is cut at 120.
var longLabel = strings.Repeat("abcdefghij", 13)

// TestPageJSDescribe: __sov.describe's line for one element: its role, its
// accessible name (aria-labelledby over aria-label over the host
// language's label, alt, title, placeholder, then content), its states
// and its value, with the name cut at 120 characters by a clip marker.
func TestPageJSDescribe(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{"/": namesPage})
	must(t, tab, openReq(u))

	for _, c := range []struct{ id, want string }{
		// names
		{"arialabel", `button "Close"`},
		{"labelledby", `textbox "Email address"`},
		{"lbwins", `button "Email"`},
		{"lbtarget", `button "From aria-label"`},
		{"user", `textbox "User name"`},
		{"wrapped", `checkbox "Remember me" [checked]`},
		{"alt", `img "Company logo"`},
		{"emptyalt", `presentation`},
		{"title", `textbox "Search the site"`},
		{"placeholder", `textbox "Find"`},
		{"content", `link "Read more"`},
		{"heading", `heading "Intro" [level=2]`},
		{"ariahidden", `button "Save"`},
		{"submit", `button "Submit"`},
		{"reset", `button "Reset"`},
		{"inputbutton", `button "Go"`},
		{"image", `button "Search"`},
		{"file", `button "Choose file: Avatar"`},
		{"fieldset", `group "Shipping"`},
		{"table", `table "Prices"`},
		{"figure", `figure "Chart"`},
		{"size", `combobox "Size": M`},
		{"svg", `img "Icon"`},
		{"generated", `button "Play"`},
		{"iconfont", `button "Settings"`},
		{"iframe", `iframe "Ads"`},
		{"shadowbutton", `button "From shadow"`},
		{"slotbutton", `button "Before Slotted"`},
		{"long", "button \"\ue000119\ue001" + longLabel + "\ue002\""},
		// values: a secret is masked, a dot a character
		{"password", `textbox "Password": •••••••`},
		{"otp", `textbox "Code": ••••••`},
		{"textarea", `textbox "Notes": some notes`},
		{"editable", `textbox "Editor": typed`},
		{"slider", `slider "Volume": five`},
		{"progress", `progressbar "Load": "3"`}, // YAML would read 3 as a number
		// roles
		{"nav", `navigation`},
		{"banner", `banner`},
		{"scopedheader", `generic`},
		{"region", `region "News"`},
		{"section", `generic`},
		{"combo", `combobox "City"`},
		{"listbox", `listbox "Tags"`},
		{"tokens", `switch "Wifi" [checked]`},
		{"nohref", `generic "anchor"`}, // describe names a generic from its content
		{"rowheader", `rowheader "Row"`},
		{"colheader", `columnheader "Col"`},
		{"hidden", `generic`},
		// states
		{"disabled", `button "Off" [disabled]`},
		{"expanded", `button "Menu" [expanded]`},
		{"summary", `button "More" [expanded]`},
		{"h3", `heading "Three" [level=3]`},
		{"level", `heading "Five" [level=5]`},
		{"pressed", `button "Bold" [pressed]`},
		{"option", `option "One" [selected]`},
		{"mixed", `checkbox "All" [checked=mixed]`},
	} {
		t.Run(c.id, func(t *testing.T) {
			var got string
			pjs(t, tab, "", `function(id) { return __sov.describe(document.getElementById(id), ''); }`, &got, c.id)
			if !refRE.MatchString(got) {
				t.Fatalf("describe(#%s) = %q: no ref", c.id, got)
			}
			if got := strings.Replace(noRef(got), " [ref]", "", 1); got != c.want {
				t.Errorf("describe(#%s) = %q, want %q", c.id, got, c.want)
			}
		})
	}
}

// snapOut is what __sov.snapshot returns.
type snapOut struct {
	Text    string `json:"text"`
	Next    int    `json:"next"`
	Title   string `json:"title"`
	Stopped string `json:"stopped"`
	Seen    int    `json:"seen"`
	Missing bool   `json:"missing"`
}

// snapJS snapshots the document with opts, with the iframes of the page
// as its frame elements (their lines get the frame mark \x01<index>).
const snapJS = `function(opts) { return __sov.snapshot(opts, Array.from(document.querySelectorAll('iframe'))); }`

// TestPageJSSnapshot: the YAML lines of __sov.snapshot for small documents,
// in the full and the interactive tree: text merged and quoted where YAML
// needs it, links with their /url, shadow roots and slots walked in place,
// hidden and inert elements left out, an iframe marked for the Go side to
// fill, long runs of rows cut with a line that says how many more.
func TestPageJSSnapshot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		opts map[string]any
		want string
	}{
		{"full tree", `<h1>Title</h1><p>Hello <b>world</b> again</p><a href=" /next ">Next</a>`,
			nil, `- generic [ref=e1]:
  - generic [ref=e2]:
    - heading "Title" [level=1] [ref=e3]
    - paragraph [ref=e4]:
      - text: Hello
      - generic [ref=e5]: world
      - text: again
    - link "Next" [ref=e6]:
      - /url: /next`},
		{"compact merges text", `<h1>Title</h1><p>Hello <b>world</b> again</p><a href=" /next ">Next</a>`,
			map[string]any{"compact": true}, `- heading "Title" [level=1] [ref=e1]
- paragraph [ref=e2]: Hello world again
- link "Next" [ref=e3]:
  - /url: /next`},
		{"yaml quoting", `<p>true</p><p>a: b</p><p>- dash</p><p>plain text</p>`,
			map[string]any{"compact": true}, `- paragraph [ref=e1]: "true"
- paragraph [ref=e2]: "a: b"
- paragraph [ref=e3]: "- dash"
- paragraph [ref=e4]: plain text`},
		{"hidden left out", `<p>shown</p><p hidden>h1</p><p aria-hidden=true>h2</p><div inert><button>h3</button></div>` +
			`<p style="visibility:hidden">h4</p><input type=hidden value=h5>`,
			map[string]any{"compact": true}, `- paragraph [ref=e1]: shown`},
		{"compact hoists wrappers", `<div><div><span>inner</span></div></div><ul><li>one</li><li>two</li></ul>`,
			map[string]any{"compact": true}, `- text: inner
- list [ref=e1]:
  - listitem [ref=e2]: one
  - listitem [ref=e3]: two`},
		{"interactive keeps targets", `<h2>Form</h2><p>Some prose</p><form><label>Name <input></label>` +
			`<input type=checkbox aria-label=Agree checked><button disabled>Send</button></form>`,
			map[string]any{"interactive": true}, `- heading "Form" [level=2] [ref=e1]
- form [ref=e2]:
  - textbox "Name" [ref=e3]
  - checkbox "Agree" [checked] [ref=e4]
  - button "Send" [disabled] [ref=e5]`},
		{"unnamed control takes its context", `<ul><li>walk dog <input type=checkbox></li></ul>`,
			map[string]any{"interactive": true, "compact": true}, `- checkbox "walk dog" [ref=e1]`},
		{"shadow root and slot", `<div id=host><span>light</span></div><script>
host.attachShadow({mode: 'open'}).innerHTML = '<button>In shadow</button><p><slot></slot></p>';
</script>`, map[string]any{"compact": true}, `- button "In shadow" [ref=e1]
- paragraph [ref=e2]: light`},
		{"iframe marked", `<p>before</p><iframe title=Inner srcdoc="<button>x</button>"></iframe>`,
			map[string]any{"compact": true}, "- paragraph [ref=e1]: before\n- iframe \"Inner\" [ref=e2]:\n  \x010"},
		{"long run cut", `<ul>` + strings.Repeat(`<li tabindex=0>item</li>`, 5) + `</ul>`,
			map[string]any{"interactive": true, "compact": true, "maxRun": 2}, `- listitem "item" [ref=e1]
- listitem "item" [ref=e2]
- text: "[3 more listitems not shown; take snapshot with find=<their text> to see one]"`},
		{"secret value masked", `<input type=password aria-label=Password value=hunter2>`,
			map[string]any{"interactive": true}, `- textbox "Password" [ref=e1]: •••••••`},
	}
	pages := map[string]string{}
	for i, c := range cases {
		pages["/"+strconv.Itoa(i)] = "<!doctype html><title>" + c.name + "</title>" + c.body
	}
	tab, u := pjsTab(t, pages)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must(t, tab, openReq(u+"/"+strconv.Itoa(i)))
			opts := c.opts
			if opts == nil {
				opts = map[string]any{}
			}
			var got snapOut
			pjs(t, tab, "", snapJS, &got, opts)
			if r := renumber(got.Text); r != c.want {
				t.Errorf("snapshot(%v) =\n%s\nwant\n%s", opts, r, c.want)
			}
			if got.Title != c.name || got.Stopped != "" || got.Missing {
				t.Errorf("snapshot title %q stopped %q missing %v, want %q, none, false", got.Title, got.Stopped, got.Missing, c.name)
			}
		})
	}
}

// TestPageJSSnapshotLimits: a snapshot of one subtree (opts.root, a ref),
// of a ref that is gone (missing), and one that stops at maxNodes.
func TestPageJSSnapshotLimits(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{"/": `<!doctype html><title>Limits</title>
<nav id=nav><a href=/a>A</a><a href=/b>B</a></nav><main><p>one</p><p>two</p><p>three</p></main>`})
	must(t, tab, openReq(u))

	var desc string
	pjs(t, tab, "", `function() { return __sov.describe($('#nav'), ''); }`, &desc)
	var sub snapOut
	pjs(t, tab, "", snapJS, &sub, map[string]any{"root": refNum(t, desc), "compact": true})
	if want := "- navigation [ref=e1]:\n  - link \"A\" [ref=e2]:\n    - /url: /a\n  - link \"B\" [ref=e3]:\n    - /url: /b"; renumber(sub.Text) != want {
		t.Errorf("snapshot of #nav =\n%s\nwant\n%s", renumber(sub.Text), want)
	}

	pjs(t, tab, "", `function() { $('#nav').remove(); }`, nil)
	var gone snapOut
	pjs(t, tab, "", snapJS, &gone, map[string]any{"root": refNum(t, desc)})
	if !gone.Missing || gone.Text != "" {
		t.Errorf("snapshot of a removed root = %+v, want missing", gone)
	}

	var capped snapOut
	pjs(t, tab, "", snapJS, &capped, map[string]any{"maxNodes": 2, "compact": true})
	if capped.Stopped != "size" || strings.Contains(capped.Text, "three") {
		t.Errorf("snapshot with maxNodes 2 = %+v, want stopped at size before \"three\"", capped)
	}
}

// pointOut is what __sov.point returns.
type pointOut struct {
	Desc    string  `json:"desc"`
	X       float64 `json:"x"`
	Y       float64 `json:"y"`
	W       float64 `json:"w"`
	H       float64 `json:"h"`
	OneBox  bool    `json:"oneBox"`
	Covered string  `json:"covered"`
	Gone    bool    `json:"gone"`
}

const hitPage = `<!doctype html><title>Hits</title>
<style>.box { position: relative; width: 300px; height: 60px; margin: 10px; } .cover { position: absolute; inset: 0; background: rgba(0,0,0,.3); }</style>
<div class=box><button id=plain>Plain</button></div>
<div class=box><button id=under>Under</button><div class=cover>Overlay text</div></div>
<div class=box><div id=host></div></div>
<div class=box><label style="display:inline-block;padding:10px">Agree <input type=checkbox id=cb style="opacity:0;pointer-events:none"></label></div>
<div class=box><button id=behind>Behind</button><div><div class=cover></div>
  <div role=dialog aria-modal=true aria-label=Confirm style="position:absolute;right:0;top:0;width:80px;background:#fff"><button>OK</button></div></div></div>
<div class=box style="height:100px"><iframe id=covered srcdoc="<button>Framed</button>" style="width:280px;height:80px"></iframe><div class=cover>Ad cover</div></div>
<div class=box style="height:100px"><iframe id=free srcdoc="<button>Free</button>" style="width:280px;height:80px"></iframe></div>
<div style="height:3000px"></div>
<button id=far>Far</button>
<div style="height:3000px"></div>
<iframe id=deep srcdoc="<button>Deep</button>" style="width:280px;height:80px"></iframe>
<script>host.attachShadow({mode: 'open'}).innerHTML = '<span><button id=inner>Inner</button></span>';</script>`

// TestPageJSPoint: __sov.point, the hit test before a click: it names what
// covers an element's centre (an overlay; a modal's nameless backdrop by
// its dialog; what covers the frame an element is in), and not a label of
// the element, a control in an open shadow root, or an element that it
// first scrolled into view.
func TestPageJSPoint(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{"/": hitPage})
	must(t, tab, openReq(u))

	const pointJS = `function(sel) { return __sov.point($(sel), ''); }`
	for _, c := range []struct{ sel, desc, covered string }{
		{"#plain", `button "Plain"`, ""},
		{"#under", `button "Under"`, `generic "Overlay text" [ref]`},
		{"#host >>> #inner", `button "Inner"`, ""},
		{"#cb", `checkbox "Agree"`, ""},
		{"#behind", `button "Behind"`, `generic [ref] (the backdrop of dialog "Confirm" [ref])`},
		{"#far", `button "Far"`, ""},
	} {
		t.Run(c.sel, func(t *testing.T) {
			var got pointOut
			pjs(t, tab, "", pointJS, &got, c.sel)
			if d := noRef(got.Desc); d != c.desc+" [ref]" || noRef(got.Covered) != c.covered {
				t.Errorf("point(%s) = desc %q covered %q, want %q, %q", c.sel, d, noRef(got.Covered), c.desc+" [ref]", c.covered)
			}
			var vw, vh float64
			pjs(t, tab, "", `function() { return innerWidth; }`, &vw)
			pjs(t, tab, "", `function() { return innerHeight; }`, &vh)
			if got.X <= 0 || got.Y <= 0 || got.X >= vw || got.Y >= vh || got.W <= 0 || got.H <= 0 || !got.OneBox {
				t.Errorf("point(%s) = %+v, want a box in the %vx%v viewport", c.sel, got, vw, vh)
			}
		})
	}

	// In a frame: the hit test goes on in the documents around it (the
	// frames in the main viewport: #far scrolled it away).
	pjs(t, tab, "", `function() { scrollTo(0, 0); }`, nil)
	frames := childFrames(t, tab)
	if len(frames) != 3 {
		t.Fatalf("%d child frames, want 3", len(frames))
	}
	for i, want := range []string{`generic "Ad cover" (outside the frame)`, ""} {
		var got pointOut
		pjs(t, tab, frames[i], `function() { return __sov.point(document.querySelector('button'), 'f9'); }`, &got)
		if !strings.Contains(got.Desc, "[ref=f9e") || got.Covered != want {
			t.Errorf("point in frame %d = desc %q covered %q, want a f9 ref and covered %q", i, got.Desc, got.Covered, want)
		}
	}
	// A frame below the fold of its page: point scrolls the page too, so
	// that the element is in the page's viewport (where a click lands).
	var deep pointOut
	pjs(t, tab, frames[2], `function() { return __sov.point(document.querySelector('button'), ''); }`, &deep)
	var box struct{ Top, Bottom, VH float64 }
	pjs(t, tab, "", `function() { const r = $('#deep').getBoundingClientRect(); return {top: r.top, bottom: r.bottom, vh: innerHeight}; }`, &box)
	if box.Top < 0 || box.Bottom > box.VH || deep.Covered != "" {
		t.Errorf("after point in the frame below the fold: frame at %v..%v of a %v high viewport, covered %q; want it in view, not covered",
			box.Top, box.Bottom, box.VH, deep.Covered)
	}

	var gone pointOut
	pjs(t, tab, "", `function() { const b = $('#plain'); b.remove(); return __sov.point(b, ''); }`, &gone)
	if !gone.Gone {
		t.Errorf("point(removed) = %+v, want gone", gone)
	}
}

// TestPageJSRefs: an element keeps its ref across snapshots and while
// others come and go; a new element takes the next number; __sov.el finds
// an element by its ref until it leaves the document; installing page.js
// again in the same world keeps the table; a new document in the frame
// starts its refs after the old one's, so a stale ref names nothing.
func TestPageJSRefs(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{
		"/":      `<!doctype html><title>Refs</title><div id=list><button id=a>A</button><button id=b>B</button></div>`,
		"/other": `<!doctype html><title>Other</title><button id=c>C</button>`,
	})
	must(t, tab, openReq(u))

	snap := func() snapOut {
		t.Helper()
		var s snapOut
		pjs(t, tab, "", snapJS, &s, map[string]any{"interactive": true, "compact": true})
		return s
	}
	refOf := func(s snapOut, name string) int {
		t.Helper()
		for _, l := range strings.Split(s.Text, "\n") {
			if strings.Contains(l, `"`+name+`"`) {
				return refNum(t, l)
			}
		}
		t.Fatalf("no %q in snapshot\n%s", name, s.Text)
		return 0
	}
	idOf := func(ref int) string {
		t.Helper()
		var id string
		pjs(t, tab, "", `function(n) { const el = __sov.el(n); return el ? el.id : ''; }`, &id, ref)
		return id
	}

	s1, s2 := snap(), snap()
	if s1.Text != s2.Text || s1.Next != s2.Next {
		t.Fatalf("two snapshots differ:\n%s\n(next %d)\n%s\n(next %d)", s1.Text, s1.Next, s2.Text, s2.Next)
	}
	a, b := refOf(s1, "A"), refOf(s1, "B")
	pjs(t, tab, "", `function() { const n = document.createElement('button'); n.id = 'n'; n.textContent = 'New'; $('#a').before(n); }`, nil)
	s3 := snap()
	if refOf(s3, "A") != a || refOf(s3, "B") != b || refOf(s3, "New") != s1.Next || s3.Next != s1.Next+1 {
		t.Errorf("after an insert: A %d B %d New %d next %d, want A %d B %d New %d next %d",
			refOf(s3, "A"), refOf(s3, "B"), refOf(s3, "New"), s3.Next, a, b, s1.Next, s1.Next+1)
	}
	if got := idOf(a); got != "a" {
		t.Errorf("el(%d) = #%s, want #a", a, got)
	}
	pjs(t, tab, "", `function() { $('#b').remove(); }`, nil)
	if got := idOf(b); got != "" {
		t.Errorf("el(%d) after B left = #%s, want none", b, got)
	}

	var next int
	pjs(t, tab, "", `function(src) { return (0, eval)(src)(1); }`, &next, pageJS)
	if next != s3.Next || refOf(snap(), "A") != a {
		t.Errorf("installing page.js again: next %d, A %d, want next %d, A %d", next, refOf(snap(), "A"), s3.Next, a)
	}

	// The Go side notes the refs it hands out (here through the snapshot
	// tool) and starts the next document's page.js after them.
	must(t, tab, snapReq(true, true))
	must(t, tab, openReq(u+"/other"))
	if c := refOf(snap(), "C"); c < s3.Next {
		t.Errorf("the new document's first ref is %d, want >= %d (the old document's next)", c, s3.Next)
	}
	if got := idOf(a); got != "" {
		t.Errorf("el(%d) in the new document = #%s, want none", a, got)
	}
}

// TestPageJSClip: page.js marks each cut for the Go side (limits.go) as
// U+E000 <kept>[+] U+E001 <text> U+E002, with up to 2048 characters past
// the cut for the secrets scrubber, + when the page's text goes on past
// them, and strips marks of the page's own from a text it cuts.
func TestPageJSClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	tab, u := pjsTab(t, map[string]string{"/": `<!doctype html><title>` + strings.Repeat("t", 1100) + `</title>
<p id=long>` + long + `</p><p id=short>` + strings.Repeat("y", 2100) + `</p><p id=marks>` + strings.Repeat("z\ue000\ue001\ue002", 1000) + `</p>`})
	must(t, tab, openReq(u))

	for _, c := range []struct{ id, want string }{
		{"long", "\ue0001999+\ue001" + long[:1999+2048] + "\ue002"},
		{"short", "\ue0001999\ue001" + strings.Repeat("y", 2100) + "\ue002"},
		{"marks", strings.Repeat("z", 1000)},
	} {
		var got snapOut
		pjs(t, tab, "", `function(id) { return __sov.snapshot({root: +__sov.describe($('#' + id), '').match(/ref=e(\d+)/)[1]}, []); }`, &got, c.id)
		if _, text, _ := strings.Cut(got.Text, ": "); text != c.want {
			t.Errorf("snapshot text of #%s = %q (%d chars), want %q (%d chars)", c.id, clipTo(text, 40), len(text), clipTo(c.want, 40), len(c.want))
		}
	}
	var s snapOut
	pjs(t, tab, "", snapJS, &s, map[string]any{"interactive": true})
	if want := "\ue000999\ue001" + strings.Repeat("t", 1100) + "\ue002"; s.Title != want {
		t.Errorf("title = %q, want %q", clipTo(s.Title, 40), clipTo(want, 40))
	}
}

const inputPage = `<!doctype html><title>Form</title>
<input id=text aria-label=Name value=old>
<input id=pw type=password aria-label=Password>
<input id=num type=number aria-label=Age>
<input id=date type=date aria-label=When>
<input id=ro readonly aria-label=Fixed value=v>
<input id=off disabled aria-label=Off>
<input id=box type=checkbox aria-label=Box>
<select id=size aria-label=Size><option value=s>Small</option><option value=l>Large</option><option disabled>Gone</option></select>
<div id=rich contenteditable aria-label=Rich>draft</div>
<p id=para>Some <b>bold</b> text that runs long</p>
<p id=hid style="display:none">hidden</p>`

// TestPageJSInput: __sov.prepareInput gets a field ready for fill or type,
// or sets the value itself (select, date) or says why not; finishFill then
// reports the value the field holds and whether it took the text, and
// never a secret field's value.
func TestPageJSInput(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{"/": inputPage})
	must(t, tab, openReq(u))

	// insert types text into the focused field as keyboard input would.
	const fillJS = `function(sel, v, mode) {
		const el = $(sel);
		const r = __sov.prepareInput(el, v, mode);
		if (r.insert) document.execCommand('insertText', false, v);
		return {prepared: r, finished: r.insert ? __sov.finishFill(el, true) : null};
	}`
	type result struct {
		Prepared map[string]any `json:"prepared"`
		Finished map[string]any `json:"finished"`
	}
	for _, c := range []struct {
		sel, value, mode string
		prepared         string // its JSON, keys sorted
		finished         string
	}{
		{"#text", "new", "fill", `{"insert":true}`, `{"accepted":true,"badNumber":false,"gone":false,"n":3,"value":"new"}`},
		{"#text", "er", "type", `{"insert":true}`, `{"accepted":true,"badNumber":false,"gone":false,"n":5,"value":"newer"}`},
		{"#pw", "hunter2", "fill", `{"insert":true,"secret":"password"}`, `{"accepted":true,"badNumber":false,"gone":false,"n":7,"secret":"password"}`},
		{"#num", "abc", "fill", `{"insert":true}`, `{"accepted":false,"badNumber":true,"gone":false,"n":0,"value":""}`},
		{"#date", "2026-12-07", "fill", `{"done":true,"value":"2026-12-07"}`, `null`},
		{"#date", "soon", "fill", `{"error":"bad-value","type":"date"}`, `null`},
		{"#size", "Large", "fill", `{"done":true,"value":"Large"}`, `null`},
		{"#size", "s", "fill", `{"done":true,"value":"Small"}`, `null`},
		{"#size", "Huge", "fill", `{"error":"option","options":["Small","Large","Gone"]}`, `null`},
		{"#size", "Gone", "fill", `{"error":"option-disabled"}`, `null`},
		{"#size", "Large", "type", `{"error":"select"}`, `null`},
		{"#ro", "x", "fill", `{"error":"readonly"}`, `null`},
		{"#off", "x", "fill", `{"error":"disabled"}`, `null`},
		{"#box", "x", "fill", `{"error":"input-type","type":"checkbox"}`, `null`},
		{"#para", "x", "fill", `{"error":"not-editable"}`, `null`},
		{"#rich", "final", "fill", `{"insert":true}`, `{"accepted":true,"badNumber":false,"gone":false,"n":5,"value":"final"}`},
		{"#text", "", "fill", `{"done":true,"value":""}`, `null`},
	} {
		t.Run(c.sel+" "+c.mode+" "+c.value, func(t *testing.T) {
			var got result
			pjs(t, tab, "", fillJS, &got, c.sel, c.value, c.mode)
			p, _ := json.Marshal(got.Prepared)
			f, _ := json.Marshal(got.Finished)
			if string(p) != c.prepared || string(f) != c.finished {
				t.Errorf("prepareInput(%s, %q, %s) = %s then %s, want %s then %s", c.sel, c.value, c.mode, p, f, c.prepared, c.finished)
			}
		})
	}
}

// TestPageJSRead: __sov.text, html, find, focus, scroll, settle and next,
// each on a case or two.
func TestPageJSRead(t *testing.T) {
	t.Parallel()
	tab, u := pjsTab(t, map[string]string{
		"/":     inputPage,
		"/tall": `<!doctype html><title>Tall</title><div style="height:5000px">tall</div>`,
		"/inner": `<!doctype html><title>Inner</title><style>body { overflow: hidden; margin: 0; }</style>
<div id=pane style="height:100vh;overflow:auto"><div style="height:5000px">pane</div></div>`,
	})
	must(t, tab, openReq(u))

	for _, c := range []struct{ fn, want string }{
		{`function() { return __sov.text($('#para'), 9); }`, `{"s":"Some bold","total":29}`},
		{`function() { return __sov.text($('#text'), 100); }`, `{"s":"old","total":3}`},
		{`function() { return __sov.text($('#size'), 100); }`, `{"s":"Small","total":5}`},
		{`function() { return __sov.html($('#para'), 100); }`, `{"s":"Some <b>bold</b> text that runs long","total":36}`},
		{`function() { return __sov.find('#para', ''); }`, `{"desc":"paragraph [ref]","visible":true}`},
		{`function() { return __sov.find('#hid', ''); }`, `{"desc":"","visible":false}`},
		{`function() { return __sov.find('#nothing', ''); }`, `null`},
		{`function() { return __sov.focus($('#text'), ''); }`, `{"desc":"textbox \"Name\" [ref]: old","ok":true}`},
		{`function() { return __sov.focus($('#para'), ''); }`, `{"desc":"paragraph [ref]","ok":false}`},
		{`function() { const s = __sov.snapshot({}, []); return __sov.next() === s.next; }`, `true`},
		{`async function() { return __sov.settle(30, 5000, 0, -1, true); }`, `{"changed":false,"title":"Form","titleLen":4,"url":"` + u + `/"}`},
		// The change comes within the 100 ms that settle waits at least.
		{`async function() { setTimeout(() => $('#para').append('!'), 5); return __sov.settle(30, 5000, 100, -1, false); }`, `{"changed":true,"title":"Form","titleLen":4,"url":"` + u + `/"}`},
	} {
		var got any
		pjs(t, tab, "", c.fn, &got)
		if m, ok := got.(map[string]any); ok {
			delete(m, "quietFor") // a time
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(got); err != nil {
			t.Fatal(err)
		}
		if s := noRef(strings.TrimSpace(b.String())); s != c.want {
			t.Errorf("%s = %s, want %s", c.fn, s, c.want)
		}
	}

	// scroll moves the page, or the scrollable element in the middle of
	// the viewport when the page cannot scroll.
	for _, c := range []struct {
		path string
		page bool
	}{{"/tall", true}, {"/inner", false}} {
		must(t, tab, openReq(u+c.path))
		var got struct {
			Page, Moved bool
			Y, H        float64
		}
		pjs(t, tab, "", `function() { return __sov.scroll(0, 300); }`, &got)
		if got.Page != c.page || !got.Moved || got.Y != 300 || got.H < 5000 {
			t.Errorf("scroll(0, 300) on %s = %+v, want page %v, moved to y 300 of 5000 or more", c.path, got, c.page)
		}
	}
}

// wrappersPage has an element for each of the typed wrappers that
// TestPageJSWrappers calls.
const wrappersPage = `<!doctype html><title>Wrappers</title>
<div id=corner role=button aria-label=Corner style="position:fixed;left:0;top:0;width:40px;height:40px"></div>
<h1 style="margin-top:60px">Head</h1>
<p id=para data-x=1>Some text here</p>
<label>Name <input id=name value=old></label>
<input id=file type=file multiple aria-label=Photos>
<label>Agree <input id=box type=checkbox></label>
<select id=sel aria-label=Fruit><option value=a>Apple</option><option value=b>Banana</option></select>
<div id=red style="color: rgb(255, 0, 0)">Red</div>`

// TestPageJSWrappers calls each typed wrapper of the Go–JavaScript
// interface (js_*.go) once in a real page: the Go arguments reach the
// in-page function whole and its result comes back typed.
func TestPageJSWrappers(t *testing.T) {
	tab, u := pjsTab(t, map[string]string{"/": wrappersPage})
	must(t, tab, openReq(u))
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	at := func(s string) elementAt {
		t.Helper()
		a, err := tab.elementAt(sel(s), "test")
		if err != nil {
			t.Fatalf("elementAt(%q): %v", s, err)
		}
		return a
	}
	elemOf := func(s string) *elem {
		t.Helper()
		e, err := tab.resolve(ctx, sel(s), "test")
		if err != nil {
			t.Fatalf("resolve(%q): %v", s, err)
		}
		return e
	}
	check := func(name string, err error, ok bool, got any) {
		t.Helper()
		if err != nil || !ok {
			t.Errorf("%s = %+v, %v", name, got, err)
		}
	}

	// Reading: query, el, describe, attr, text, html, title, hasText.
	obj, err := jsQuery(ctx, tab, "#para")
	check("jsQuery(#para)", err, obj != "", obj)
	obj, err = jsQuery(ctx, tab, "#none")
	check("jsQuery(#none)", err, obj == "", obj)
	_, err = jsQuery(ctx, tab, "((")
	check("jsQuery(() is a jsError", nil, isJSError(err), err)
	desc, err := jsDescribe(ctx, elemOf("#para").obj, "")
	check("jsDescribe(#para)", err, strings.HasPrefix(desc, "paragraph [ref=e"), desc)
	byRef, err := jsEl(ctx, tab, tab.frames.main(), int64(refNum(t, desc)))
	check("jsEl(ref of #para)", err, byRef != "", byRef)
	v, err := jsAttr(ctx, tab, at("#para"), "data-x")
	check("jsAttr(data-x)", err, v != nil && *v == "1", v)
	v, err = jsAttr(ctx, tab, at("#para"), "nope")
	check("jsAttr(nope)", err, v == nil, v)
	txt, err := jsText(ctx, tab, at("#para"), 4)
	check("jsText(#para, 4)", err, txt == pageText{"Some", 14}, txt)
	html, err := jsHTML(ctx, tab, at("#para"), 100)
	check("jsHTML(#para)", err, html == pageText{"Some text here", 14}, html)
	title, err := jsTitle(ctx, tab, 3)
	check("jsTitle(3)", err, title == pageText{"Wra", 8}, title)
	has, err := jsHasText(ctx, tab, "some text")
	check("jsHasText(some text)", err, has, has)
	has, err = jsHasText(ctx, tab, "absent")
	check("jsHasText(absent)", err, !has, has)
	f, err := jsFind(ctx, tab, "#para")
	check("jsFind(#para)", err, f != nil && f.Visible, f)

	// Input: point, focus, startInput and finishFill, probe, drags.
	pt, err := jsPoint(ctx, tab, at("#para"))
	check("jsPoint(#para)", err, pt.OneBox && pt.W > 0 && strings.HasPrefix(pt.Desc, "paragraph"), pt)
	fo, err := jsFocus(ctx, tab, at("#name"))
	check("jsFocus(#name)", err, fo.OK && strings.Contains(fo.Desc, `textbox "Name"`), fo)
	prep, err := jsStartInput(ctx, tab, at("#name"), "new", "fill", false)
	check("jsStartInput(#name)", err, prep.Insert && strings.Contains(prep.Desc, `textbox "Name"`), prep)
	fin, err := jsFinishFill(ctx, tab, tab.frames.main())
	check("jsFinishFill", err, !fin.Gone && fin.Value == "old", fin)
	prep, err = jsStartInputOn(ctx, elemOf("#sel"), "Banana", "fill", false)
	check("jsStartInputOn(#sel)", err, prep.Done && prep.Value == "Banana", prep)
	probe, err := jsProbe(ctx, tab, 10, 10)
	check("jsProbe(10, 10)", err, probe.W > 0 && probe.H > 0 && strings.HasPrefix(probe.Desc, `button "Corner"`), probe)
	check("jsWatchDrag", jsWatchDrag(ctx, tab), true, nil)
	started, err := jsDragStarted(ctx, tab)
	check("jsDragStarted", err, !started, started)

	// Forms: checkState, toggle, checkSettled, selectOptions, markdown.
	st, err := jsCheckState(ctx, tab, at("#box"))
	check("jsCheckState(#box)", err, st.Kind == "checkbox" && !st.Checked, st)
	check("jsToggle(#box)", jsToggle(ctx, tab, at("#box")), true, nil)
	st, err = jsCheckSettled(ctx, tab, at("#box"), true, 0)
	check("jsCheckSettled(#box, true)", err, st.Checked, st)
	so, err := jsSelectOptions(ctx, tab, at("#sel"), []string{"apple"})
	check("jsSelectOptions(#sel, apple)", err, so.Changed && len(so.Selected) == 1 && so.Selected[0] == "Apple", so)
	md, err := jsMarkdown(ctx, tab, nil, 1000)
	check("jsMarkdown(page)", err, strings.HasPrefix(md.S, "# Head") && !md.More, md)
	para := at("#para")
	md, err = jsMarkdown(ctx, tab, &para, 1000)
	check("jsMarkdown(#para)", err, md.S == "Some text here", md)

	// Files, devtools and performance.
	fi, err := jsFileInput(ctx, elemOf("#file"))
	check("jsFileInput(#file)", err, fi.File && fi.Multiple && !fi.Disabled, fi)
	fi, err = jsFileInput(ctx, elemOf("#para"))
	check("jsFileInput(#para)", err, !fi.File, fi)
	cs, err := jsStyles(ctx, elemOf("#red"), []string{"color"})
	check("jsStyles(#red, color)", err, cs.Values["color"] == "rgb(255, 0, 0)" && strings.HasPrefix(cs.Desc, "generic"), cs)
	vp, err := jsViewport(ctx, tab)
	check("jsViewport", err, regexp.MustCompile(`^\d+x\d+$`).MatchString(vp), vp)
	wv, err := jsWebVitals(ctx, tab)
	check("jsWebVitals", err, wv.DCL > 0 && wv.Load > 0, wv)
}

// TestPageJSCallAt: call.js finds the element that a wrapper names before
// it calls the function, and says when it cannot: a selector that matches
// nothing, one that is not CSS, a ref that is stale.
func TestPageJSCallAt(t *testing.T) {
	tab, u := pjsTab(t, map[string]string{"/": wrappersPage})
	must(t, tab, openReq(u))
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		el   *browserv1.Element
		code commonv1.ErrorCode
		want string
	}{
		{sel("#none"), commonv1.ErrorCode_NOT_FOUND, `no element matches selector "#none"`},
		{sel("(("), commonv1.ErrorCode_INVALID_ARGUMENT, `selector "((" is not valid CSS`},
		{ref("e999"), commonv1.ErrorCode_NOT_FOUND, "ref e999 is not in the current page"},
	} {
		a, err := tab.elementAt(c.el, "test")
		if err != nil {
			t.Fatalf("elementAt(%v): %v", c.el, err)
		}
		_, err = jsText(ctx, tab, a, 10)
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != c.code || !strings.Contains(be.Message, c.want) {
			t.Errorf("jsText(%v) = %v, want %v %q", c.el, err, c.code, c.want)
		}
	}
}
