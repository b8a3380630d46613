package page

import (
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func emulateReq(e *browserv1.Emulate) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: e}}
}

// TestEmulateMedia: media, forced_colors and contrast reach matchMedia
// (and the page's listeners), are kept by later emulate calls and cleared
// by reset; bad values say what is accepted.
func TestEmulateMedia(t *testing.T) {
	srv := serve(t, map[string]string{"/": `<!doctype html><title>screen</title><script>
		matchMedia("print").addEventListener("change", e => { document.title = e.matches ? "print" : "screen"; });
	</script>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	const probe = `["print", "screen", "(forced-colors: active)", "(prefers-contrast: more)", "(prefers-contrast: less)"].map(q => matchMedia(q).matches).join(" ")`
	if got := evalString(t, tab, probe); got != `"false true false false false"` {
		t.Fatalf("before emulating the page sees %s", got)
	}
	res := must(t, tab, emulateReq(&browserv1.Emulate{Media: "Print", ForcedColors: "active", Contrast: "more"}))
	if s := text(res); !strings.HasPrefix(s, "Emulating: media print, forced colors active, contrast more") {
		t.Errorf("emulate = %q, want the summary", s)
	}
	if got := evalString(t, tab, probe); got != `"true false true true false"` {
		t.Errorf("emulating print, forced colors and more contrast, the page sees %s", got)
	}
	eventually(t, "the page's print listener ran", func() bool { return evalString(t, tab, `document.title`) == `"print"` })

	must(t, tab, emulateReq(&browserv1.Emulate{Contrast: "less", ColorScheme: "dark"}))
	if got := evalString(t, tab, probe); got != `"true false true false true"` {
		t.Errorf("after contrast less, the page sees %s, want print and forced colors kept", got)
	}
	must(t, tab, emulateReq(&browserv1.Emulate{ResetAll: true, Media: "screen"}))
	if got := evalString(t, tab, probe); got != `"false true false false false"` {
		t.Errorf("after reset, the page sees %s", got)
	}
	for _, tc := range []struct {
		name string
		req  *browserv1.Emulate
		want string
	}{
		{"bad media", &browserv1.Emulate{Media: "tv"}, `media must be screen or print, not "tv"`},
		{"bad forced colors", &browserv1.Emulate{ForcedColors: "on"}, "forced_colors must be active or none"},
		{"bad contrast", &browserv1.Emulate{Contrast: "high"}, "contrast must be more, less or no-preference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, emulateReq(tc.req))
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		})
	}
}
