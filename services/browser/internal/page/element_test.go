package page

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

const elementsPage = `<!doctype html><title>Elements</title>
<style>#far { margin-top: 2000px }</style>
<script>window.log = []; function note(e) { log.push(e.type + ':' + (e.target.id || e.target.tagName)); }</script>
<div id=out></div>
<button id=btn onclick="document.getElementById('out').textContent='clicked ' + event.isTrusted">Press me</button>
<div id=hov onmouseover="this.textContent='hovered'" style="width:100px;height:30px">Hover me</div>
<input id=name aria-label="Name" value="old" oninput="note(event)" onchange="note(event)">
<input id=email type=email aria-label="Email">
<input id=num type=number aria-label="Count">
<input id=date type=date aria-label="Day">
<textarea id=notes aria-label="Notes">line</textarea>
<select id=color aria-label="Color" onchange="note(event)"><option value=r>Red</option><option value=g>Green</option><option value=b disabled>Blue</option></select>
<div id=editor contenteditable="true">draft</div>
<input id=agree type=checkbox aria-label="Agree">
<input id=off aria-label="Off" disabled>
<input id=ro aria-label="Fixed" readonly value="fixed">
<p id=para title="greeting">  Hello <b>world</b>  </p>
<span id=plain>just text</span>
<div id=cover-wrap style="position:relative"><button id=covered>Covered</button>
  <div id=overlay style="position:absolute;inset:0;background:white">Overlay</div></div>
<button id=gone style="display:none">Gone</button>
<button id=far onclick="this.textContent='far clicked'">Far away</button>`

func TestElementArgumentErrors(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	tools := map[string]func(*browserv1.Element) *browserv1.ToolRequest{
		"click":    clickReq,
		"hover":    hoverReq,
		"focus":    focusReq,
		"get_text": textReq,
		"get_html": htmlReq,
		"get_attr": func(e *browserv1.Element) *browserv1.ToolRequest { return attrReq(e, "id") },
		"fill":     func(e *browserv1.Element) *browserv1.ToolRequest { return fillReq(e, "x") },
		"type":     func(e *browserv1.Element) *browserv1.ToolRequest { return typeReq(e, "x") },
		"screenshot": func(e *browserv1.Element) *browserv1.ToolRequest {
			return shotReq(&browserv1.Screenshot{Element: e})
		},
	}
	cases := []struct {
		name  string
		el    *browserv1.Element
		code  commonv1.ErrorCode
		parts []string
	}{
		{"no_element", nil, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"needs ref (from snapshot), target or selector"}},
		{"empty_element", &browserv1.Element{}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"needs ref (from snapshot), target or selector"}},
		{"unknown_ref", ref("e999"), commonv1.ErrorCode_NOT_FOUND, []string{"ref e999 is not in the current page; take a new snapshot"}},
		{"unknown_frame_ref", ref("@f7e1"), commonv1.ErrorCode_NOT_FOUND, []string{"ref f7e1 is not in the current page; take a new snapshot"}},
		{"bad_ref", ref("button"), commonv1.ErrorCode_INVALID_ARGUMENT, []string{`"button" is not a snapshot ref`}},
		{"no_match", sel("#nope"), commonv1.ErrorCode_NOT_FOUND, []string{`no element matches selector "#nope"`}},
		{"bad_selector", sel("(("), commonv1.ErrorCode_INVALID_ARGUMENT, []string{`selector "((" is not valid CSS`}},
	}
	for tool, req := range tools {
		for _, c := range cases {
			if tool == "screenshot" && (c.el == nil || c.el.By == nil) {
				continue // a screenshot without an element is of the page
			}
			t.Run(tool+"/"+c.name, func(t *testing.T) {
				_, err := call(t, tab, req(c.el))
				wantErr(t, err, c.code, c.parts...)
				if c.name == "no_element" && !strings.HasPrefix(err.Error(), tool+" ") {
					t.Errorf("error %q does not name the tool %s", err, tool)
				}
			})
		}
	}
}

func TestClick(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))

	res := must(t, tab, clickReq(ref(refFor(t, snap, `"Press me"`))))
	if got := text(res); !strings.HasPrefix(got, `Clicked button "Press me" [ref=`) {
		t.Errorf("click = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("#out")))); got != "clicked true" {
		t.Errorf("onclick saw %q, want a trusted click", got)
	}
	// An element below the fold is scrolled into view first.
	must(t, tab, clickReq(sel("#far")))
	if got := text(must(t, tab, textReq(sel("#far")))); got != "far clicked" {
		t.Errorf("far button = %q", got)
	}
	// A covered element: the click goes to what covers it, and says so.
	res = must(t, tab, clickReq(sel("#covered")))
	if got := text(res); !strings.Contains(got, `generic "Overlay"`) || !strings.Contains(got, "covers its centre") {
		t.Errorf("click on a covered button = %q", got)
	}
	_, err := call(t, tab, clickReq(sel("#gone")))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, `selector "#gone"`, "not visible")
}

// TestClickInFrameBelowFold: a button at the top of an iframe that sits
// below the fold of its page, same-origin or cross-origin, is scrolled
// into view with the frame, and the click lands (it used to be pressed
// where the button was, off the screen, and reported as done).
func TestClickInFrameBelowFold(t *testing.T) {
	t.Parallel()
	const button = `<button onclick="parent.postMessage('clicked', '*')">Deep</button>`
	inner := serve(t, map[string]string{"/": `<!doctype html>` + button})
	for _, c := range []struct{ name, frame string }{
		{"same-origin", `srcdoc="` + strings.ReplaceAll(button, `"`, "&quot;") + `"`},
		{"cross-origin", `src="` + strings.Replace(inner.URL, "127.0.0.1", "localhost", 1) + `"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := newTab(t, Options{})
			srv := serve(t, map[string]string{"/": `<!doctype html><title>Below</title>
<script>window.clicks = 0; addEventListener('message', (e) => { if (e.data === 'clicked') clicks++; });</script>
<div style="height:3000px"></div><iframe ` + c.frame + ` style="width:200px;height:80px"></iframe><div style="height:3000px"></div>`})
			must(t, tab, openReq(srv.URL))
			snap := text(must(t, tab, snapReq(true, true)))
			must(t, tab, clickReq(ref(refFor(t, snap, `"Deep"`))))
			kittest.Eventually(t, 30*time.Second, func() error {
				got := evalString(t, tab, "String(window.clicks)")
				return kittest.Check(got == `"1"`, "the click in the frame below the fold: window.clicks = %s", got)
			})
		})
	}
}

func TestHoverAndFocus(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, hoverReq(sel("#hov")))); !strings.HasPrefix(got, "Hovering over ") {
		t.Errorf("hover = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("#hov")))); got != "hovered" {
		t.Errorf("after hover the element says %q", got)
	}
	if got := text(must(t, tab, focusReq(sel("#email")))); !strings.Contains(got, `Focused textbox "Email"`) {
		t.Errorf("focus = %q", got)
	}
	if got := evalString(t, tab, `document.activeElement.id`); got != `"email"` {
		t.Errorf("active element = %s", got)
	}
	_, err := call(t, tab, focusReq(sel("#plain")))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `selector "#plain"`, "cannot take focus")
}

func TestFill(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		name, sel, value, want string
	}{
		{"input", "#name", "Ada", "Ada"},
		{"input_again_replaces", "#name", "Grace", "Grace"},
		{"input_clear", "#name", "", ""},
		{"email", "#email", "a@b.c", "a@b.c"},
		{"number", "#num", "42", "42"},
		{"date", "#date", "2024-12-31", "2024-12-31"},
		{"textarea", "#notes", "two\nlines", "two\nlines"},
		{"select_by_label", "#color", "Green", "Green"},
		{"select_by_value", "#color", "r", "Red"},
		{"contenteditable", "#editor", "rewritten", "rewritten"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := must(t, tab, fillReq(sel(tt.sel), tt.value))
			if got := text(must(t, tab, textReq(sel(tt.sel)))); got != strings.TrimSpace(tt.want) {
				t.Errorf("after fill %q, %s has %q (fill said %q)", tt.value, tt.sel, got, text(res))
			}
		})
	}
	// Frameworks listen for input and change.
	must(t, tab, fillReq(sel("#name"), "Events"))
	if got := evalString(t, tab, `log.filter(e => e.endsWith(':name')).slice(-2).join(' ')`); got != `"input:name change:name"` {
		t.Errorf("events of fill = %s", got)
	}
	if got := evalString(t, tab, `log.includes('change:color')`); got != "true" {
		t.Errorf("select fill fired no change event")
	}
	// The text goes in as typing puts it: a trusted beforeinput and input
	// with inputType insertText, which editors and frameworks rely on.
	must(t, tab, evalReq(`window.seen = []; for (const ev of ['beforeinput', 'input']) document.querySelector('#name').addEventListener(ev, e => seen.push(e.type + ':' + e.isTrusted + ':' + e.inputType))`))
	must(t, tab, fillReq(sel("#name"), "Typed"))
	if got := evalString(t, tab, `seen.join(' ')`); got != `"beforeinput:true:insertText input:true:insertText"` {
		t.Errorf("input events of fill = %s", got)
	}

	errs := []struct {
		name, sel, value string
		parts            []string
	}{
		{"button", "#btn", "x", []string{"is not a text field"}},
		{"checkbox", "#agree", "x", []string{"is a checkbox; use check (or click)"}},
		{"disabled", "#off", "x", []string{"is disabled"}},
		{"readonly", "#ro", "x", []string{"is read-only"}},
		{"missing_option", "#color", "Purple", []string{`has no option "Purple"`, "Red, Green, Blue"}},
		{"disabled_option", "#color", "Blue", []string{"disabled"}},
		{"bad_date", "#date", "tomorrow", []string{"did not accept the value"}},
		{"bad_number", "#num", "many", []string{`is a number field and takes only a number, not "many"`}},
	}
	for _, tt := range errs {
		t.Run("error_"+tt.name, func(t *testing.T) {
			_, err := call(t, tab, fillReq(sel(tt.sel), tt.value))
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tt.parts...)
		})
	}
}

func TestType(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))
	name := refFor(t, snap, `textbox "Name"`)

	res := must(t, tab, typeReq(ref(name), " and new"))
	if got := text(res); !strings.Contains(got, `its value is now "old and new"`) {
		t.Errorf("type = %q", got)
	}
	if got := evalString(t, tab, `log.filter(e => e === 'input:name').length`); got != "8" {
		t.Errorf("typing 8 characters fired %s input events", got)
	}
	must(t, tab, typeReq(sel("#name"), " é✓"))
	if got := text(must(t, tab, textReq(sel("#name")))); got != "old and new é✓" {
		t.Errorf("after typing non-ASCII text the field has %q", got)
	}
	must(t, tab, typeReq(sel("#notes"), "+more"))
	if got := text(must(t, tab, textReq(sel("#notes")))); got != "line+more" {
		t.Errorf("textarea after type = %q", got)
	}
	must(t, tab, typeReq(sel("#editor"), " text"))
	if got := text(must(t, tab, textReq(sel("#editor")))); got != "draft text" {
		t.Errorf("contenteditable after type = %q", got)
	}
	_, err := call(t, tab, typeReq(sel("#color"), "x"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "is a select; use fill")
	_, err = call(t, tab, typeReq(sel("#para"), "x"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "is not a text field")
}

func TestReadElement(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": elementsPage})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		name string
		req  *browserv1.ToolRequest
		want string
	}{
		{"text_trimmed", textReq(sel("#para")), "Hello world"},
		{"text_of_input", textReq(sel("#ro")), "fixed"},
		{"html", htmlReq(sel("#para")), "  Hello <b>world</b>  "},
		{"attr", attrReq(sel("#para"), "title"), "greeting"},
		{"attr_empty_value", attrReq(sel("#editor"), "contenteditable"), "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := text(must(t, tab, tt.req)); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
	_, err := call(t, tab, attrReq(sel("#para"), "href"))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, `has no attribute "href"`, `selector "#para"`)
	_, err = call(t, tab, attrReq(sel("#para"), ""))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "get_attr needs attr")
}

// TestClickFiresHoverEvents: a click without a separate mouse move still
// gives the element mouseover and mouseenter before mousedown, as a user's
// pointer would.
func TestClickFiresHoverEvents(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<!doctype html><button id="b" style="width:120px;height:40px">Hover then click</button><p id="log"></p>
<script>
const b = document.getElementById('b'), log = document.getElementById('log');
for (const ev of ['mouseover', 'mouseenter', 'mousedown', 'mouseup', 'click']) b.addEventListener(ev, () => log.textContent += ev + ' ');
</script>`})
	must(t, tab, openReq(srv.URL))
	must(t, tab, clickReq(sel("#b")))
	if got := text(must(t, tab, textReq(sel("#log")))); got != "mouseover mouseenter mousedown mouseup click" {
		t.Fatalf("events = %q, want mouseover mouseenter mousedown mouseup click", got)
	}
}

// TestSecretFields: fill and type into a field that takes a secret (a
// password input, or autocomplete current-password, new-password or
// one-time-code) keep the text out of the result and say sensitive_input;
// other fields echo their value.
func TestSecretFields(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<!doctype html><title>Login</title>
<input id=user aria-label="User" autocomplete="username">
<input id=pw type=password aria-label="Password">
<input id=shown aria-label="Shown password" autocomplete="section-login current-password">
<input id=newpw type=password aria-label="New password" autocomplete="new-password">
<input id=otp inputmode=numeric aria-label="Code" autocomplete="one-time-code">
<input id=clears type=password aria-label="Picky" oninput="this.value = ''">`})
	must(t, tab, openReq(srv.URL))
	const secret = "hunter2-Ω-secret" // 16 characters
	tests := []struct {
		sel, what string
	}{
		{"#pw", "a password field"},
		{"#shown", "a password field"},
		{"#newpw", "a password field"},
		{"#otp", "a one-time code field"},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			res := must(t, tab, fillReq(sel(tt.sel), secret))
			got := text(res)
			if strings.Contains(got, "hunter2") || !strings.Contains(got, "("+tt.what+"; its value is hidden, 16 characters)") {
				t.Errorf("fill = %q, want no value and %q", got, tt.what+"; its value is hidden, 16 characters")
			}
			if !res.GetSensitiveInput() {
				t.Error("fill into a secret field: sensitive_input is false")
			}
			res = must(t, tab, typeReq(sel(tt.sel), "xyzzy"))
			got = text(res)
			if strings.Contains(got, "xyzzy") || strings.Contains(got, "hunter2") ||
				!strings.HasPrefix(got, "Typed 5 characters into ") || !strings.Contains(got, "its value is hidden, 21 characters)") {
				t.Errorf("type = %q, want no text, its length and the field's", got)
			}
			if !res.GetSensitiveInput() {
				t.Error("type into a secret field: sensitive_input is false")
			}
			// The field took the text all the same.
			var value string
			if err := json.Unmarshal([]byte(evalString(t, tab, `document.querySelector('`+tt.sel+`').value`)), &value); err != nil || value != secret+"xyzzy" {
				t.Errorf("the field has %q (%v)", value, err)
			}
			// A second fill describes the field with its old value masked.
			got = text(must(t, tab, fillReq(sel(tt.sel), "second")))
			if strings.Contains(got, "hunter2") || strings.Contains(got, "xyzzy") || strings.Contains(got, "second") {
				t.Errorf("second fill = %q shows a value", got)
			}
		})
	}
	// Clearing a password field.
	res := must(t, tab, fillReq(sel("#pw"), ""))
	if got := text(res); !strings.Contains(got, "its value is hidden, 0 characters") || !res.GetSensitiveInput() {
		t.Errorf("clearing a password field = %q (sensitive_input %v)", got, res.GetSensitiveInput())
	}
	// A password field that empties itself on input took the text: fill
	// succeeds, says so, and does not show the value.
	res = must(t, tab, fillReq(sel("#clears"), secret))
	if got := text(res); !strings.Contains(got, "the page then cleared the field") || strings.Contains(got, "hunter2") || !res.GetSensitiveInput() {
		t.Errorf("fill of a self-clearing password field = %q (sensitive_input %v)", got, res.GetSensitiveInput())
	}
	// The snapshot masks secret fields, whatever their type.
	snap := text(must(t, tab, snapReq(true, true)))
	if strings.Contains(snap, "second") {
		t.Errorf("the snapshot shows a secret field's value:\n%s", snap)
	}

	// A plain field echoes its value and is not sensitive.
	res = must(t, tab, fillReq(sel("#user"), "ada"))
	if got := text(res); !strings.Contains(got, `its value is now "ada"`) || res.GetSensitiveInput() {
		t.Errorf("fill of a plain field = %q (sensitive_input %v)", got, res.GetSensitiveInput())
	}
	res = must(t, tab, typeReq(sel("#user"), "-l"))
	if got := text(res); !strings.Contains(got, `Typed "-l" into`) || !strings.Contains(got, `its value is now "ada-l"`) || res.GetSensitiveInput() {
		t.Errorf("type into a plain field = %q (sensitive_input %v)", got, res.GetSensitiveInput())
	}
}
