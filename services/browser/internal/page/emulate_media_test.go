package page

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func emulateReq(e *browserv1.Emulate) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: e}}
}

// TestEmulateMedia: media, forced_colors and contrast reach matchMedia
// (and the page's listeners), are kept by later emulate calls and cleared
// by reset; bad values say what is accepted.
func TestEmulateMedia(t *testing.T) {
	t.Parallel()
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
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(evalString(t, tab, `document.title`) == `"print"`, "not yet: the page's print listener ran")
	})

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

// TestEmulateThrottling: network adds a preset's latency to the page's
// requests (and none takes it away), cpu_throttling is kept and said in
// the summary, and bad values say what is accepted.
func TestEmulateThrottling(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><title>net</title>`, "/data": `ok`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	const fetchMS = `(async () => { const t0 = performance.now(); await (await fetch('/data?' + Math.random())).text(); return Math.round(performance.now() - t0); })()`
	res := must(t, tab, emulateReq(&browserv1.Emulate{Network: "fast-3g", CpuThrottling: 4}))
	if s := text(res); !strings.HasPrefix(s, "Emulating: network fast-3g, CPU 4x slower") {
		t.Errorf("emulate = %q, want the summary", s)
	}
	if ms, _ := strconv.Atoi(evalString(t, tab, fetchMS)); ms < 500 {
		t.Errorf("a fetch on fast-3g took %d ms, want at least its 562 ms of latency", ms)
	}
	res = must(t, tab, emulateReq(&browserv1.Emulate{Network: "none", CpuThrottling: 1}))
	if s := text(res); !strings.HasPrefix(s, "Emulating: nothing emulated") && !strings.Contains(s, "nothing emulated") {
		t.Errorf("emulate network none, cpu 1 = %q, want nothing emulated", s)
	}
	if ms, _ := strconv.Atoi(evalString(t, tab, fetchMS)); ms >= 500 {
		t.Errorf("a fetch after network none took %d ms, want no added latency", ms)
	}
	_, err := call(t, tab, emulateReq(&browserv1.Emulate{Network: "2g"}))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "network must be one of slow-3g, fast-3g, slow-4g, fast-4g, none")
	_, err = call(t, tab, emulateReq(&browserv1.Emulate{CpuThrottling: 50}))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "cpu_throttling must be 1 (none) to 20")
}

// TestEmulateHeaders: extra headers reach the page's requests, the
// summary names them without their values, an empty list clears them,
// and bad headers are refused, naming the problem.
func TestEmulateHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<title>h</title><p id=h>%s</p>", r.Header.Get("X-Test-Run"))
	}))
	t.Cleanup(srv.Close)
	tab := newTab(t, Options{})
	res := must(t, tab, emulateReq(&browserv1.Emulate{SetHeaders: true, Headers: []*browserv1.Header{{Name: "X-Test-Run", Value: "run-42"}}}))
	if s := text(res); !strings.Contains(s, "extra headers X-Test-Run (values not shown)") || strings.Contains(s, "run-42") {
		t.Errorf("emulate headers = %q", s)
	}
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, textReq(sel("#h")))); got != "run-42" {
		t.Errorf("the server saw X-Test-Run %q", got)
	}
	must(t, tab, emulateReq(&browserv1.Emulate{SetHeaders: true}))
	must(t, tab, reloadReq)
	if got := text(must(t, tab, textReq(sel("#h")))); got != "" {
		t.Errorf("after clearing, the server saw X-Test-Run %q", got)
	}
	for _, tt := range []struct {
		h    *browserv1.Header
		want string
	}{
		{&browserv1.Header{Name: "Bad Name", Value: "x"}, "is not an HTTP header name"},
		{&browserv1.Header{Name: "X-A", Value: "a\r\nInjected: 1"}, "must be one line"},
		{&browserv1.Header{Name: "Cookie", Value: "a=1"}, "is set by the browser"},
		{&browserv1.Header{Name: "Authorization", Value: "Bearer {{secrets.TOKEN}}"}, "holds a placeholder"},
	} {
		_, err := call(t, tab, emulateReq(&browserv1.Emulate{SetHeaders: true, Headers: []*browserv1.Header{tt.h}}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tt.want)
	}
}
