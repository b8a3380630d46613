package browser

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

func TestPlaceholderOutsideHost(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://example.com/login?pw={{secrets.PW}}":    true,
		"https://ada:{{secrets.PW}}@example.com/":        true,
		"https://example.com/{{secrets.PATH}}#x":         true,
		"example.com/?q={{ secrets.Q }}":                 true,
		"https://{{secrets.HOST}}.example.com/":          false,
		"https://example.com:{{secrets.PORT}}/":          false,
		"https://a@{{secrets.HOST}}/":                    false,
		"{{secrets.SCHEME}}://example.com/":              false,
		"{{secrets.HOST}}/path":                          false,
		"https://example.com@{{secrets.HOST}}/?x=1":      false,
		"https://example.com/a@{{secrets.NOT_HOST}}/":    true,
		"https://example.com?next=//{{secrets.PW}}.evil": true,
	} {
		if err := placeholderOutsideHost(raw); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", raw, err, ok)
		}
	}
}

// TestFormSecretsWithoutKey: a fill_form value with a placeholder on a
// worker without a secret key fails, naming the missing key, and a form
// without placeholders passes through untouched.
func TestFormSecretsWithoutKey(t *testing.T) {
	t.Parallel()
	form := func(v string) *browserv1.ToolRequest {
		return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_FillForm{FillForm: &browserv1.FillForm{Fields: []*browserv1.FormField{
			{Element: &browserv1.Element{By: &browserv1.Element_Ref{Ref: "e1"}}, Checked: proto.Bool(true)},
			{Element: &browserv1.Element{By: &browserv1.Element_Ref{Ref: "e2"}}, Value: proto.String(v)},
		}}}}
	}
	w := &Worker{}
	formTool, _ := catalog.Lookup("fill_form")
	if _, err := w.withSecrets(formTool, form("{{secrets.PW}}")); err == nil || !strings.Contains(err.Error(), "no secret key") {
		t.Errorf("withSecrets(fill_form with a placeholder) = %v, want the no-secret-key error", err)
	}
	req := form("plain")
	if got, err := w.withSecrets(formTool, req); err != nil || got != req {
		t.Errorf("withSecrets(fill_form without placeholders) = %v, %v; want the request itself", got, err)
	}
}
