package page

import (
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func stylesReq(el *browserv1.Element, rules bool, props ...string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetStyles{GetStyles: &browserv1.GetStyles{Element: el, Properties: props, Rules: rules}}}
}

// get_styles shows computed values and the author rules that match, in
// cascade order, with the inline style; user-agent rules stay out; bad
// property names are refused, naming them.
func TestGetStyles(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<!doctype html><title>Styles</title>
<style>
  :root { --brand: #0a5; }
  .btn { color: var(--brand); padding: 4px 8px; }
  #save.btn { font-weight: 700 !important; }
  @media (min-width: 1px) { .btn { margin-top: 3px; } }
  .unused { color: red; }
</style>
<div class=card style="letter-spacing: 1px; padding: 2px"><button id=save class=btn style="border-radius: 6px">Save</button></div><p id=plain>plain</p>
<style> .card { font-style: italic; border: 1px solid; } </style>`})
	must(t, tab, openReq(srv.URL))

	got := text(must(t, tab, stylesReq(sel("#save"), true)))
	for _, want := range []string{
		`Computed style of button "Save"`, "  color: rgb(0, 170, 85)", "  font-weight: 700", "  margin: 3px 0px 0px",
		".btn { color: var(--brand); padding: 4px 8px }", "#save.btn { font-weight: 700 !important }",
		"@media (min-width: 1px) { .btn } { margin-top: 3px }", "style attribute { border-radius: 6px }",
		"(parent) .card { font-style: italic }", "(parent) style attribute { letter-spacing: 1px }",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("get_styles #save lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, ".unused") || strings.Contains(got, "user-agent") && strings.Contains(got, "display: inline-block;") {
		t.Errorf("get_styles #save shows rules that do not apply:\n%s", got)
	}
	if strings.Index(got, ".btn { color") > strings.Index(got, "#save.btn") {
		t.Errorf("rules are not in cascade order:\n%s", got)
	}

	got = text(must(t, tab, stylesReq(sel("#plain"), true, "color", "--brand")))
	if !strings.Contains(got, "  color: rgb(0, 0, 0)") || !strings.Contains(got, "  --brand: #0a5") || !strings.Contains(got, "No author CSS rule matches it.") || !strings.Contains(got, "(2 levels up) :root { --brand: #0a5 }") {
		t.Errorf("get_styles #plain color,--brand =\n%s", got)
	}
	_, err := call(t, tab, stylesReq(sel("#plain"), false, "color; background: red"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "is not a CSS property name")
	_, err = call(t, tab, stylesReq(sel("#nothing"), false))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "#nothing")
}
