package page

import (
	"encoding/json"
	"strings"
	"testing"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

const formPage = `<!doctype html><title>Form</title>
<header><nav aria-label="Main"><a href="/docs">Docs</a></nav></header>
<main>
<h2>Account</h2>
<p>Some <b>bold</b> words.</p>
<form action="/done">
 <label>Email <input name=email type=email value="a@b.c"></label>
 <label><input type=checkbox checked> Agree</label>
 <label><input type=checkbox> Spam</label>
 <select aria-label="Country"><option>France</option><option selected>Germany</option></select>
 <button type=button onclick="document.title='saved'">Save</button>
 <button type=button disabled>Locked</button>
 <button type=button aria-expanded="true">Menu</button>
 <div role="tab" aria-selected="true">Tab one</div>
 <button type=button aria-pressed="true">Bold</button>
 <textarea aria-label="Notes">hello</textarea>
 <input type=password aria-label="Secret" value="hunter2">
</form>
<div style="display:none"><button>Hidden by display</button></div>
<div style="visibility:hidden"><button>Hidden by visibility</button></div>
<div aria-hidden="true"><button>Hidden by aria</button></div>
<button hidden>Hidden by attribute</button>
<div onclick="void 0">Clickable div</div>
<span tabindex="0">Focusable span</span>
<div contenteditable="true">Editable</div>
<ul><li>First item</li><li>Second item</li></ul>
</main>`

func TestSnapshotGrammar(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": formPage})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, snapReq(true, true))
	got := text(res)
	for _, want := range []string{
		`- link "Docs" [ref=e`,
		`  - /url: /docs`,
		`- heading "Account" [level=2] [ref=e`,
		`- textbox "Email" [ref=e`,
		`]: a@b.c`,
		`- checkbox "Agree" [checked] [ref=e`,
		`- checkbox "Spam" [ref=e`,
		`- combobox "Country" [ref=e`,
		`- option "Germany" [selected] [ref=e`,
		`- button "Save" [ref=e`,
		`- button "Locked" [disabled] [ref=e`,
		`- button "Menu" [expanded] [ref=e`,
		`- tab "Tab one" [selected] [ref=e`,
		`- button "Bold" [pressed] [ref=e`,
		`- textbox "Notes" [ref=e`,
		`- textbox "Secret" [ref=e`,
		`- generic "Clickable div" [ref=e`,
		`- generic "Focusable span" [ref=e`,
		"]: Editable",
		`- textbox [ref=e`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, got)
		}
	}
	for _, hidden := range []string{"Hidden by", "hunter2", "Some", "First item", "navigation"} {
		if strings.Contains(got, hidden) {
			t.Errorf("interactive compact snapshot shows %q:\n%s", hidden, got)
		}
	}
	link := refFor(t, got, `link "Docs"`)
	if !strings.HasSuffix(lineOf(got, link), ":") {
		t.Errorf("link line %q does not end with ':' before its /url child", lineOf(got, link))
	}

	var m struct {
		URL   string `json:"url"`
		Title string `json:"title"`
		Refs  map[string]refInfo
	}
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), &m); err != nil {
		t.Fatalf("structured content %q: %v", string(structured.JSON(res.GetStructured())), err)
	}
	if m.URL != srv.URL+"/" || m.Title != "Form" {
		t.Errorf("structured url, title = %q, %q; want %q, Form", m.URL, m.Title, srv.URL+"/")
	}
	save := refFor(t, got, `button "Save"`)
	if m.Refs[save] != (refInfo{Role: "button", Name: "Save"}) {
		t.Errorf("refs[%s] = %+v, want button Save", save, m.Refs[save])
	}
	if n := strings.Count(got, "[ref="); n != len(m.Refs) {
		t.Errorf("snapshot has %d refs, ref map %d", n, len(m.Refs))
	}
}

// lineOf returns the snapshot line with [ref=r].
func lineOf(snapshot, r string) string {
	for _, line := range strings.Split(snapshot, "\n") {
		if strings.Contains(line, "[ref="+r+"]") {
			return line
		}
	}
	return ""
}

func TestSnapshotModes(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": formPage})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		name                 string
		interactive, compact bool
		want, notWant        []string
	}{
		{"interactive_compact", true, true,
			[]string{`- button "Save"`},
			[]string{"- main", "- form", "- paragraph", "- generic [ref="}},
		{"interactive_full", true, false,
			[]string{"- main [ref=", "- form [ref=", `  - button "Save"`, `- navigation "Main" [ref=`},
			[]string{"- paragraph", "- text:"}},
		{"all_compact", false, true,
			[]string{"- paragraph [ref=", "Some bold words.", "- listitem [ref=", "First item", "- text: Email", `- button "Save"`},
			[]string{"- generic [ref=", "Hidden by"}},
		{"all_full", false, false,
			[]string{"- generic [ref=", "- paragraph [ref=", `- button "Save"`},
			[]string{"Hidden by"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := text(must(t, tab, snapReq(tt.interactive, tt.compact)))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("snapshot lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("snapshot has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestSnapshotEmptyPage(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<p>Only text</p>`})
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, snapReq(true, true))); !strings.Contains(got, "no interactive elements") {
		t.Errorf("interactive snapshot of a text page = %q", got)
	}
	if got := text(must(t, tab, snapReq(false, true))); !strings.Contains(got, "Only text") {
		t.Errorf("full snapshot = %q, want the text", got)
	}
}

func TestSnapshotRefsStable(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<div id=list><button>One</button><button>Two</button></div>`})
	must(t, tab, openReq(srv.URL))
	first := text(must(t, tab, snapReq(true, true)))
	one, two := refFor(t, first, `"One"`), refFor(t, first, `"Two"`)

	// New elements before and between them, a full snapshot in between,
	// and a re-parented element keep the refs of the old ones.
	evalString(t, tab, `document.getElementById('list').insertAdjacentHTML('afterbegin', '<button>Zero</button>');
		const b = document.createElement('button'); b.textContent = 'Between';
		document.querySelectorAll('button')[1].after(b); 1`)
	must(t, tab, snapReq(false, false))
	evalString(t, tab, `const w = document.createElement('section'); document.body.append(w); w.append(document.querySelectorAll('button')[3]); 1`)
	second := text(must(t, tab, snapReq(true, true)))
	if got := refFor(t, second, `"One"`); got != one {
		t.Errorf("ref of One = %s, was %s:\n%s", got, one, second)
	}
	if got := refFor(t, second, `"Two"`); got != two {
		t.Errorf("ref of moved Two = %s, was %s:\n%s", got, two, second)
	}
	zero := refFor(t, second, `"Zero"`)
	if zero == one || zero == two {
		t.Errorf("new element got an old ref %s", zero)
	}

	// A removed element's ref is stale.
	evalString(t, tab, `document.querySelectorAll('button')[1].remove(); 1`)
	_, err := call(t, tab, clickReq(ref(one)))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "ref "+one+" is not in the current page; take a new snapshot")

	// After a navigation the old refs are stale, and new refs do not reuse
	// their numbers.
	must(t, tab, reloadReq)
	_, err = call(t, tab, clickReq(ref(two)))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "take a new snapshot")
	third := text(must(t, tab, snapReq(true, true)))
	for _, old := range []string{one, two, zero} {
		if strings.Contains(third, "[ref="+old+"]") {
			t.Errorf("a new document reuses ref %s:\n%s", old, third)
		}
	}
}

func TestSnapshotIsolatedFromPage(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	// The page breaks the globals that a snapshot in the main world
	// would use.
	srv := serve(t, map[string]string{"/": `<button>Safe</button><script>
		WeakMap.prototype.get = () => { throw new Error('broken'); };
		Array.prototype.join = () => 'broken';
		JSON.stringify = () => 'broken';
		document.querySelector = () => null;
		window.getComputedStyle = () => { throw new Error('broken'); };
	</script>`})
	must(t, tab, openReq(srv.URL))
	got := text(must(t, tab, snapReq(true, true)))
	r := refFor(t, got, `button "Safe"`)
	if got := text(must(t, tab, snapReq(true, true))); refFor(t, got, `button "Safe"`) != r {
		t.Errorf("ref changed across snapshots:\n%s", got)
	}
	if got := evalString(t, tab, `typeof __sov + ' ' + typeof globalThis.__sov`); got != `"undefined undefined"` {
		t.Errorf("the page sees the isolated world: %s", got)
	}
	must(t, tab, clickReq(sel("button")))
}

func TestSnapshotFrames(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	other := serve(t, map[string]string{"/": `<title>other</title>
		<button onclick="this.textContent='Paid'">Pay</button>
		<input aria-label="Card" oninput="this.dataset.seen=this.value">
		<iframe src="/nested" title="Nested"></iframe>`,
		"/nested": `<a href="/x">Deep link</a>`})
	srv := serve(t, map[string]string{
		"/": `<title>Frames</title><button>Top</button>
			<iframe src="/same" title="Same" style="position:absolute;left:300px;top:150px"></iframe>
			<iframe src="` + other.URL + `/" title="Other" style="position:absolute;left:40px;top:400px;width:400px;height:250px"></iframe>
			<iframe src="/same" title="Hidden" style="display:none"></iframe>`,
		"/same": `<p>Same origin</p><button onclick="parent.document.title='same clicked'">Inside</button>`,
	})
	must(t, tab, openReq(srv.URL))
	got := text(must(t, tab, snapReq(true, true)))

	same, cross := refFor(t, got, `iframe "Same"`), refFor(t, got, `iframe "Other"`)
	inside, pay, card := refFor(t, got, `button "Inside"`), refFor(t, got, `button "Pay"`), refFor(t, got, `textbox "Card"`)
	deep := refFor(t, got, `link "Deep link"`)
	for name, r := range map[string]string{"same": same, "cross": cross} {
		if strings.HasPrefix(r, "f") {
			t.Errorf("%s iframe element ref %s is not a main-frame ref", name, r)
		}
	}
	for name, r := range map[string]string{"Inside": inside, "Pay": pay, "Card": card, "Deep link": deep} {
		if !refPattern.MatchString(r) || !strings.HasPrefix(r, "f") {
			t.Errorf("%s has ref %s, want a frame ref like f1e2", name, r)
		}
	}
	if strings.Contains(got, `"Hidden"`) {
		t.Errorf("hidden iframe shows:\n%s", got)
	}
	// Frame content is nested under its iframe line.
	if line := lineOf(got, pay); !strings.HasPrefix(line, "  - ") {
		t.Errorf("frame line %q is not indented under its iframe:\n%s", line, got)
	}
	if line := lineOf(got, deep); !strings.HasPrefix(line, "    - ") {
		t.Errorf("nested frame line %q is not indented twice:\n%s", line, got)
	}

	// Refs and frame numbers stay the same in the next snapshot.
	if again := text(must(t, tab, snapReq(true, true))); refFor(t, again, `button "Pay"`) != pay || refFor(t, again, `button "Inside"`) != inside {
		t.Errorf("frame refs changed:\n%s\nthen\n%s", got, again)
	}

	// Element tools work inside both frames, at their offsets.
	must(t, tab, clickReq(ref(inside)))
	if title := text(must(t, tab, getTitleReq)); title != "same clicked" {
		t.Errorf("after a click in the same-origin frame, title = %q", title)
	}
	if res := must(t, tab, clickReq(ref("@"+pay))); !strings.Contains(text(res), `button "Pay"`) {
		t.Errorf("click result %q does not name the button", text(res))
	}
	if got := text(must(t, tab, textReq(ref(pay)))); got != "Paid" {
		t.Errorf("get_text in the cross-origin frame after a click = %q, want Paid", got)
	}
	must(t, tab, fillReq(ref(card), "4242"))
	must(t, tab, typeReq(ref(card), "42"))
	if got := text(must(t, tab, textReq(ref(card)))); got != "424242" {
		t.Errorf("card value = %q, want 424242", got)
	}
	if got := text(must(t, tab, attrReq(ref(card), "data-seen"))); got != "424242" {
		t.Errorf("the frame's input handler saw %q, want 424242", got)
	}
	must(t, tab, hoverReq(ref(pay)))
	must(t, tab, focusReq(ref(card)))
	if got := text(must(t, tab, attrReq(ref(deep), "href"))); got != "/x" {
		t.Errorf("get_attr in nested frame = %q", got)
	}
}

func TestSnapshotShadowDOM(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<script>
		customElements.define('x-card', class extends HTMLElement {
			constructor() {
				super();
				this.attachShadow({mode: 'open'}).innerHTML = '<h3>Card</h3><slot></slot><button onclick="this.textContent=\'done\'">Inner</button>';
			}
		});
	</script><x-card><a href="/light">Light link</a></x-card>`})
	must(t, tab, openReq(srv.URL))
	got := text(must(t, tab, snapReq(true, true)))
	for _, want := range []string{`- heading "Card" [level=3]`, `- link "Light link"`, `- button "Inner"`} {
		if !strings.Contains(got, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, got)
		}
	}
	inner := refFor(t, got, `button "Inner"`)
	must(t, tab, clickReq(ref(inner)))
	if got := text(must(t, tab, textReq(ref(inner)))); got != "done" {
		t.Errorf("button in the shadow root says %q after a click", got)
	}
}

func TestLineRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line, ref string
		info      refInfo
		ok        bool
	}{
		{`- button "Save" [ref=e5]`, "e5", refInfo{"button", "Save"}, true},
		{`  - heading "A [ref=e1] b" [level=2] [ref=f1e3]:`, "f1e3", refInfo{"heading", "A [ref=e1] b"}, true},
		{`- textbox "Say \"hi\"" [disabled] [ref=e2]: [ref=e9]`, "e2", refInfo{"textbox", `Say "hi"`}, true},
		{`- generic [ref=e7]: text`, "e7", refInfo{"generic", ""}, true},
		{`- text: [ref=e1]`, "", refInfo{}, false},
		{`  - /url: /docs`, "", refInfo{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			r, info, ok := lineRef(tt.line)
			if r != tt.ref || info != tt.info || ok != tt.ok {
				t.Errorf("lineRef(%q) = %q, %+v, %v; want %q, %+v, %v", tt.line, r, info, ok, tt.ref, tt.info, tt.ok)
			}
		})
	}
}

func TestCleanRef(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"e5": "e5", "@e5": "e5", " @f1e2 ": "f1e2", "[ref=e3]": "e3", "ref=e4": "e4"} {
		if got := cleanRef(in); got != want {
			t.Errorf("cleanRef(%q) = %q, want %q", in, got, want)
		}
	}
}
