package page

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// formsToolPage has a search form, a single and a multiple select, a native
// checkbox, a checkbox hidden behind a styled label, a radio group, a
// custom ARIA checkbox and switch, and a log of the events they fire.
const formsToolPage = `<!doctype html><title>form</title>
<style>.hidden-box input { display: none } .hidden-box span { display: inline-block; width: 20px; height: 20px; background: #ccc }</style>
<form id="search" action="/results"><input id="q" name="q" aria-label="Search"><input type="submit" value="Go"></form>
<label>Size <select id="size"><option value="s">Small</option><option value="m">Medium</option><option value="l" disabled>Large</option></select></label>
<label>Toppings <select id="tops" multiple><option value="ham">Ham</option><option value="olive">Olives</option><option value="egg">Egg</option></select></label>
<label><input type="checkbox" id="agree"> Agree</label>
<label class="hidden-box"><input type="checkbox" id="styled"><span></span> Styled</label>
<fieldset><legend>Plan</legend>
<label><input type="radio" name="plan" id="free" value="free" checked> Free</label>
<label><input type="radio" name="plan" id="pro" value="pro"> Pro</label></fieldset>
<div id="aria" role="checkbox" aria-checked="false" tabindex="0" style="width:40px;height:20px;background:#eee">News</div>
<div id="sw" role="switch" aria-checked="true" tabindex="0" style="width:40px;height:20px;background:#eee">Dark</div>
<div id="stuck" role="checkbox" aria-checked="false" tabindex="0" style="width:40px;height:20px">Stuck</div>
<input id="name" aria-label="Name"><input id="pw" type="password" aria-label="Password">
<button id="plain">Plain</button>
<pre id="log"></pre>
<script>
const log = (s) => { document.getElementById('log').textContent += s + '\n'; };
for (const id of ['size', 'tops']) {
  const el = document.getElementById(id);
  el.addEventListener('input', () => log(id + ' input'));
  el.addEventListener('change', () => log(id + ' change ' + Array.from(el.selectedOptions, (o) => o.value).join('+')));
}
// The ARIA toggles render their new state a frame after the click, as a
// framework would.
for (const id of ['aria', 'sw']) {
  const el = document.getElementById(id);
  el.addEventListener('click', (e) => {
    log(id + ' click trusted=' + e.isTrusted);
    const next = el.getAttribute('aria-checked') !== 'true';
    requestAnimationFrame(() => el.setAttribute('aria-checked', String(next)));
  });
}
</script>`

// errCase is a request that must fail with code and a message holding
// each of substr.
type errCase struct {
	name   string
	req    *browserv1.ToolRequest
	code   commonv1.ErrorCode
	substr []string
}

func runErrCases(t *testing.T, tab *Tab, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, tc.req)
			wantErr(t, err, tc.code, tc.substr...)
		})
	}
}

func selectReq(el *browserv1.Element, values ...string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SelectOption{SelectOption: &browserv1.SelectOption{Element: el, Values: values}}}
}

func checkReq(el *browserv1.Element, checked bool) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Check{Check: &browserv1.Check{Element: el, Checked: checked}}}
}

func fillFormReq(fields ...*browserv1.FormField) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_FillForm{FillForm: &browserv1.FillForm{Fields: fields}}}
}

// openForm opens formsToolPage in a new tab.
func openForm(t *testing.T) (*Tab, string) {
	t.Helper()
	srv := serve(t, map[string]string{"/": formsToolPage, "/results": `<title>results</title><p>found</p>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	return tab, srv.URL
}

func TestFillSubmit(t *testing.T) {
	t.Parallel()
	tab, base := openForm(t)
	req := fillReq(sel("#q"), "kittens")
	req.GetFill().Submit = true
	got := text(must(t, tab, req))
	for _, want := range []string{`Filled textbox "Search"`, "then pressed Enter", "the page navigated to " + base + "/results?q=kittens"} {
		if !strings.Contains(got, want) {
			t.Errorf("fill submit = %q, want it to contain %q", got, want)
		}
	}
	if u := text(must(t, tab, getURLReq)); u != base+"/results?q=kittens" {
		t.Errorf("URL after fill submit = %q", u)
	}

	must(t, tab, openReq(base))
	treq := typeReq(sel("#q"), "cats")
	treq.GetType().Submit = true
	if got := text(must(t, tab, treq)); !strings.Contains(got, "the page navigated to "+base+"/results?q=cats") {
		t.Errorf("type submit = %q, want a navigation to the results", got)
	}
}

func TestSelectOption(t *testing.T) {
	t.Parallel()
	tab, _ := openForm(t)
	got := text(must(t, tab, selectReq(sel("#size"), "Medium")))
	if !strings.Contains(got, `Selected "Medium"`) || !strings.Contains(got, `selected now: "Medium"`) {
		t.Errorf("select by label = %q", got)
	}
	if got := text(must(t, tab, selectReq(sel("#size"), "m"))); !strings.Contains(got, "nothing changed") {
		t.Errorf("select the selected option = %q, want nothing changed", got)
	}
	got = text(must(t, tab, selectReq(sel("#tops"), "ham", "Egg")))
	if !strings.Contains(got, `selected now: "Ham", "Egg"`) {
		t.Errorf("multiple select = %q", got)
	}
	got = text(must(t, tab, selectReq(sel("#tops"), "olive")))
	if !strings.Contains(got, `selected now: "Olives"`) {
		t.Errorf("multiple select replaces the selection: %q", got)
	}
	if log := evalString(t, tab, `document.getElementById('log').textContent`); !strings.Contains(log, `size input\nsize change m\ntops input\ntops change ham+egg\ntops input\ntops change olive`) {
		t.Errorf("events = %s, want input and change once per change", log)
	}

	t.Run("errors", func(t *testing.T) {
		runErrCases(t, tab, []errCase{
			{"no_match", selectReq(sel("#size"), "Huge"), commonv1.ErrorCode_INVALID_ARGUMENT, []string{`has no option "Huge"`, `Small (value "s")`, `Medium (value "m")`}},
			{"disabled_option", selectReq(sel("#size"), "Large"), commonv1.ErrorCode_INVALID_ARGUMENT, []string{`option "Large" disabled`}},
			{"several_on_single", selectReq(sel("#size"), "s", "m"), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"takes one option, not 2"}},
			{"not_select", selectReq(sel("#name"), "x"), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"is not a select element"}},
			{"no_values", selectReq(sel("#size")), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"needs values"}},
			{"missing", selectReq(sel("#nope"), "x"), commonv1.ErrorCode_NOT_FOUND, []string{`no element matches selector "#nope"`}},
		})
	})
}

func TestSelectOptionLimit(t *testing.T) {
	t.Parallel()
	tab, _ := openForm(t)
	values := make([]string, MaxSelectValues+1)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	_, err := call(t, tab, selectReq(sel("#tops"), values...))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("at most %d values (MaxSelectValues)", MaxSelectValues))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tab, _ := openForm(t)
	state := func(js string) string { return evalString(t, tab, js) }

	if got := text(must(t, tab, checkReq(sel("#agree"), true))); !strings.Contains(got, `Checked checkbox "Agree"`) {
		t.Errorf("check = %q", got)
	}
	if got := text(must(t, tab, checkReq(sel("#agree"), true))); !strings.Contains(got, "already checked; nothing done") {
		t.Errorf("check again = %q, want already checked", got)
	}
	must(t, tab, checkReq(sel("#agree"), false))
	if s := state(`document.getElementById('agree').checked`); s != "false" {
		t.Errorf("agree after uncheck = %s", s)
	}
	// The input has no box: its styled label stands in.
	must(t, tab, checkReq(sel("#styled"), true))
	if s := state(`document.getElementById('styled').checked`); s != "true" {
		t.Errorf("styled after check = %s", s)
	}
	must(t, tab, checkReq(sel("#pro"), true))
	if s := state(`document.querySelector('[name=plan]:checked').value`); s != `"pro"` {
		t.Errorf("radio after check = %s", s)
	}
	got := text(must(t, tab, checkReq(sel("#aria"), true)))
	if !strings.Contains(got, "Checked checkbox") {
		t.Errorf("check ARIA = %q", got)
	}
	if s := state(`document.getElementById('aria').getAttribute('aria-checked')`); s != `"true"` {
		t.Errorf("ARIA checkbox after check = %s", s)
	}
	must(t, tab, checkReq(sel("#sw"), false))
	if s := state(`document.getElementById('sw').getAttribute('aria-checked')`); s != `"false"` {
		t.Errorf("switch after uncheck = %s", s)
	}
	if log := state(`document.getElementById('log').textContent`); !strings.Contains(log, "aria click trusted=true") {
		t.Errorf("log = %s, want a trusted click on the ARIA checkbox", log)
	}

	t.Run("errors", func(t *testing.T) {
		runErrCases(t, tab, []errCase{
			{"uncheck_radio", checkReq(sel("#pro"), false), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"radio button", "check another option"}},
			{"not_toggle", checkReq(sel("#plain"), true), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"is a button, not a checkbox"}},
			{"no_reaction", checkReq(sel("#stuck"), true), commonv1.ErrorCode_INVALID_ARGUMENT, []string{"but it is still unchecked"}},
			{"missing", checkReq(sel("#nope"), true), commonv1.ErrorCode_NOT_FOUND, []string{"no element matches"}},
		})
	})
}

func TestFillForm(t *testing.T) {
	t.Parallel()
	tab, _ := openForm(t)
	got := must(t, tab, fillFormReq(
		&browserv1.FormField{Element: sel("#name"), Value: proto.String("Ada")},
		&browserv1.FormField{Element: sel("#size"), Values: []string{"Medium"}},
		&browserv1.FormField{Element: sel("#agree"), Checked: proto.Bool(true)},
		&browserv1.FormField{Element: sel("#pw"), Value: proto.String("hunter2")},
	))
	out := text(got)
	for _, want := range []string{"Filled 4 fields:", `1. Filled textbox "Name"`, `2. Selected "Medium"`, `3. Checked checkbox "Agree"`, "4. Filled"} {
		if !strings.Contains(out, want) {
			t.Errorf("fill_form = %q, want %q", out, want)
		}
	}
	if strings.Contains(out, "hunter2") || !got.GetSensitiveInput() {
		t.Errorf("fill_form with a password: %q, sensitive=%v; want the value hidden and the result sensitive", out, got.GetSensitiveInput())
	}
	if s := evalString(t, tab, `[document.getElementById('name').value, size.value, agree.checked].join()`); s != `"Ada,m,true"` {
		t.Errorf("fields after fill_form = %s", s)
	}

	t.Run("stops_at_failure", func(t *testing.T) {
		_, err := call(t, tab, fillFormReq(
			&browserv1.FormField{Element: sel("#name"), Value: proto.String("Bob")},
			&browserv1.FormField{Element: sel("#size"), Values: []string{"Huge"}},
			&browserv1.FormField{Element: sel("#agree"), Checked: proto.Bool(false)},
		))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "stopped at field 2 of 3", `has no option "Huge"`, "field 1 was filled before it")
		if s := evalString(t, tab, `[document.getElementById('name').value, agree.checked].join()`); s != `"Bob,true"` {
			t.Errorf("fields after the failed fill_form = %s, want the first filled and the third untouched", s)
		}
	})
	t.Run("bad_fields", func(t *testing.T) {
		_, err := call(t, tab, fillFormReq(&browserv1.FormField{Element: sel("#name")}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "field 1 needs exactly one of value")
		_, err = call(t, tab, fillFormReq(&browserv1.FormField{Value: proto.String("x")}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "field 1 names no element")
		_, err = call(t, tab, fillFormReq(&browserv1.FormField{Element: sel("#agree"), Value: proto.String("yes")}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "is a checkbox; give it checked (true or false) in place of value", "no field was changed")
		_, err = call(t, tab, fillFormReq())
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "fill_form needs fields")
	})
	t.Run("limit", func(t *testing.T) {
		fields := make([]*browserv1.FormField, MaxFormFields+1)
		for i := range fields {
			fields[i] = &browserv1.FormField{Element: sel("#name"), Value: proto.String("x")}
		}
		_, err := call(t, tab, fillFormReq(fields...))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("at most %d fields (MaxFormFields)", MaxFormFields))
	})
}

// TestFormToolsInFrame: select_option, check and fill_form reach fields in
// an iframe by their frame refs.
func TestFormToolsInFrame(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{
		"/":      `<title>outer</title><p>Pay below</p><iframe src="/inner" style="width:400px;height:200px"></iframe>`,
		"/inner": `<title>inner</title><label>Card <select id="card"><option>Visa</option><option>Amex</option></select></label><label><input type="checkbox" id="save"> Save card</label><input id="holder" aria-label="Holder">`,
	})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))
	card, save, holder := refFor(t, snap, `combobox "Card"`), refFor(t, snap, `checkbox "Save card"`), refFor(t, snap, `textbox "Holder"`)
	if !strings.HasPrefix(card, "f1") {
		t.Fatalf("ref of the select in the frame = %s, want a frame ref", card)
	}
	byRef := func(r string) *browserv1.Element { return &browserv1.Element{By: &browserv1.Element_Ref{Ref: r}} }
	if got := text(must(t, tab, selectReq(byRef(card), "Amex"))); !strings.Contains(got, `selected now: "Amex"`) {
		t.Errorf("select_option in a frame = %q", got)
	}
	if got := text(must(t, tab, checkReq(byRef(save), true))); !strings.Contains(got, `Checked checkbox "Save card"`) {
		t.Errorf("check in a frame = %q", got)
	}
	got := text(must(t, tab, fillFormReq(
		&browserv1.FormField{Element: byRef(holder), Value: proto.String("Ada L")},
		&browserv1.FormField{Element: byRef(save), Checked: proto.Bool(false)},
	)))
	if !strings.Contains(got, `1. Filled textbox "Holder"`) || !strings.Contains(got, `2. Unchecked checkbox "Save card"`) {
		t.Errorf("fill_form in a frame = %q", got)
	}
	if s := evalString(t, tab, `(() => { const d = document.querySelector('iframe').contentDocument; return [d.getElementById('card').value, d.getElementById('save').checked, d.getElementById('holder').value].join(); })()`); s != `"Amex,false,Ada L"` {
		t.Errorf("frame fields = %s", s)
	}
	// eval with an element in a frame runs in that frame's main world.
	if got := text(must(t, tab, evalOnReq(byRef(holder), "(el) => el.value + ' ' + document.title"))); got != `"Ada L inner"` {
		t.Errorf("eval on an element in a frame = %s", got)
	}
}

// TestFormEdgeCases: an option in a disabled optgroup is refused like a
// disabled option; a single select picks the option chosen even when
// options share a value; check clicks a mixed toggle whatever the state
// asked; wait_for url takes a part of a URL with a query.
func TestFormEdgeCases(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><title>edge</title>
<select id=g aria-label="Group"><option>A</option><optgroup label=Old disabled><option value=x>X</option></optgroup></select>
<select id=dup aria-label="Dup"><option value="">Choose…</option><option value="">Other</option><option value=b>B</option></select>
<div id=mixed role=checkbox aria-checked=mixed tabindex=0 onclick="this.setAttribute('aria-checked', 'false')">Mixed</div>
<a id=next href="/r?page=2">next</a>`, "/r": `<title>r</title>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	_, err := call(t, tab, selectReq(sel("#g"), "X"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "disabled")
	must(t, tab, selectReq(sel("#dup"), "Other"))
	if got := evalString(t, tab, `document.getElementById('dup').selectedIndex`); got != "1" {
		t.Errorf("select_option Other (a value it shares with Choose…) selected index %s, want 1", got)
	}
	if got := text(must(t, tab, checkReq(sel("#mixed"), false))); strings.Contains(got, "nothing done") || !strings.Contains(got, "Unchecked") {
		t.Errorf("check false on a mixed toggle = %q, want it clicked", got)
	}
	must(t, tab, clickReq(sel("#next")))
	must(t, tab, waitForCond(&browserv1.WaitFor{Url: "/r?page=2", TimeoutMs: 2000}))
}
