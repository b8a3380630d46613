package page

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

func consoleReq(level string, since int64, limit int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ConsoleMessages{ConsoleMessages: &browserv1.ConsoleMessages{Level: level, Since: since, Limit: limit}}}
}

func netReq(filter, typ, status string, limit int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{
		Filter: filter, ResourceType: typ, Status: status, Limit: limit}}}
}

func bodyReq(id, part string, maxBytes int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: id, Part: part, MaxBytes: maxBytes}}}
}

func pdfReq(p *browserv1.Pdf) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Pdf{Pdf: p}}
}

// decodeStructured decodes the structured content of res into v.
func decodeStructured(tb testing.TB, res *browserv1.ToolResult, v any) {
	tb.Helper()
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), v); err != nil {
		tb.Fatalf("structured %q: %v", string(structured.JSON(res.GetStructured())), err)
	}
}

const consolePage = `<!doctype html><title>console</title><script>
console.debug("dbg message");
console.log("log message", 42);
console.info("info message");
console.warn("warn message");
console.error("error message");
Promise.reject(new Error("rejected promise"));
setTimeout(() => { throw new Error("thrown later"); }, 0);
</script>`

// TestConsoleMessages: every level, exceptions and unhandled rejections,
// with their source line; level, since and limit filter; bad inputs say
// what is accepted.
func TestConsoleMessages(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": consolePage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	var all string
	kittest.Eventually(t, 30*time.Second, func() error {
		all = text(must(t, tab, consoleReq("debug", 0, 0)))
		return kittest.Check(strings.Contains(all, "thrown later"), "not yet: the thrown exception is logged")
	})
	for _, want := range []string{"[debug] dbg message", "[info] log message 42", "[info] info message", "[warning] warn message",
		"[error] error message", "[error] Uncaught (in promise) Error: rejected promise", "[error] Uncaught Error: thrown later", srv.URL + "/:2"} {
		if !strings.Contains(all, want) {
			t.Errorf("console_messages debug = %q, want %q in it", all, want)
		}
	}
	errs := must(t, tab, consoleReq("error", 0, 0))
	if s := text(errs); strings.Contains(s, "warn message") || !strings.Contains(s, "error message") || !strings.HasPrefix(s, "3 console messages") {
		t.Errorf("console_messages error = %q, want the 3 errors only", s)
	}
	var got struct {
		Messages []consoleEntry `json:"messages"`
		Next     int64          `json:"next"`
	}
	decodeStructured(t, errs, &got)
	if len(got.Messages) != 3 || got.Next != 7 || got.Messages[0].Line != 6 {
		t.Errorf("structured = %+v, want 3 errors, next 7, the first on line 6", got)
	}
	if s := text(must(t, tab, consoleReq("", 0, 2))); !strings.Contains(s, "thrown later") || strings.Contains(s, "warn message") || !strings.Contains(s, "older matching messages not shown") {
		t.Errorf("console_messages limit 2 = %q, want the newest two and a note", s)
	}
	capped := consoleReq("debug", 0, 0)
	capped.MaxChars = 80
	if s := text(must(t, tab, capped)); !strings.HasPrefix(s, "1 console message") || !strings.Contains(s, "6 older matching messages not shown") {
		t.Errorf("console_messages max_chars 80 = %q, want the newest message only", s)
	}
	evalString(t, tab, `console.log("after"); 1`)
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(strings.Contains(text(must(t, tab, consoleReq("", got.Next, 0))), "after"), "not yet: the new message")
	})
	if s := text(must(t, tab, consoleReq("", got.Next, 0))); strings.Contains(s, "error message") || !strings.HasPrefix(s, "1 console message") {
		t.Errorf("console_messages since %d = %q, want only the new one", got.Next, s)
	}

	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
		want string
	}{
		{"bad level", consoleReq("loud", 0, 0), "debug, info, warning, error"},
		{"negative since", consoleReq("", -1, 0), "since must be 0"},
		{"limit over the buffer", consoleReq("", 0, 501), "limit must be 1-500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, tc.req)
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		})
	}
}

// TestConsoleBuffer: the ring keeps the last ConsoleBuffer messages and
// says how many fell out; a long message is cut.
func TestConsoleBuffer(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{ConsoleBuffer: 5})
	must(t, tab, openReq("about:blank"))
	evalString(t, tab, `for (let i = 1; i <= 8; i++) console.log("m" + i); console.log("x".repeat(5000)); 1`)
	var s string
	kittest.Eventually(t, 30*time.Second, func() error {
		s = text(must(t, tab, consoleReq("", 0, 0)))
		return kittest.Check(strings.Contains(s, "xxxx"), "not yet: 9 messages")
	})
	if !strings.Contains(s, "keeps the last 5 messages (4 older ones were dropped)") || strings.Contains(s, "m4\n") || !strings.Contains(s, "m5") {
		t.Errorf("console_messages = %q, want m5-m8 and the long one, and a note on the dropped", s)
	}
	if !strings.Contains(s, "(3000 more characters)") {
		t.Errorf("the 5000-character message was not cut at %d: %q", maxConsoleText, s[len(s)-100:])
	}
	_, err := call(t, tab, consoleReq("", 0, 6))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "limit must be 1-5")
}

// networkServer serves a page that fetches JSON, posts a body, loads an
// image and asks for a missing file.
func networkServer(t *testing.T) *httptest.Server {
	png := shotPNG(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><title>net</title><img src="/pic.png"><script>
				fetch("/api/data.json").then(r => r.json()).then(d => document.title = "got " + d.n);
				fetch("/api/echo", {method: "POST", body: JSON.stringify({q: "hello"})});
				fetch("/missing");
			</script>`)
		case "/api/data.json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"n": 7, "items": ["a", "b"]}`)
		case "/api/echo":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "echoed")
		case "/pic.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(png)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// shotPNG is a small PNG image.
func shotPNG(t *testing.T) []byte {
	tab := newTab(t, Options{})
	must(t, tab, openReq("about:blank"))
	res := must(t, tab, shotReq(&browserv1.Screenshot{}))
	return res.GetContent()[0].GetImage().GetData()
}

// TestNetworkRequests: the requests of a page with their status, type
// and size; filters; bodies as text or base64, cut at max_bytes.
func TestNetworkRequests(t *testing.T) {
	t.Parallel()
	srv := networkServer(t)
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	var got struct {
		Requests []netEntry `json:"requests"`
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		res := must(t, tab, netReq("", "", "", 0))
		got.Requests = nil
		decodeStructured(t, res, &got)
		done := 0
		for _, r := range got.Requests {
			if !r.Pending {
				done++
			}
		}
		return kittest.Check(done == 5, "not yet: five finished requests")
	})
	byPath := map[string]netEntry{}
	for _, r := range got.Requests {
		byPath[strings.TrimPrefix(r.URL, srv.URL)] = r
	}
	for path, want := range map[string]struct {
		method, typ string
		status      int64
	}{"/": {"GET", "Document", 200}, "/api/data.json": {"GET", "Fetch", 200}, "/api/echo": {"POST", "Fetch", 200},
		"/pic.png": {"GET", "Image", 200}, "/missing": {"GET", "Fetch", 404}} {
		r, ok := byPath[path]
		if !ok || r.Method != want.method || r.Type != want.typ || r.Status != want.status || r.Size <= 0 {
			t.Errorf("request %s = %+v, want %+v with a size", path, r, want)
		}
	}
	for _, tc := range []struct {
		name                string
		filter, typ, status string
		want                []string
	}{
		{"substring", "/api/", "", "", []string{"/api/data.json", "/api/echo"}},
		{"regexp", `/\.(png|json)$/`, "", "", []string{"/pic.png", "/api/data.json"}},
		{"type", "", "image", "", []string{"/pic.png"}},
		{"status", "", "", "404", []string{"/missing"}},
		{"status class", "", "", "4xx", []string{"/missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f struct {
				Requests []netEntry `json:"requests"`
			}
			decodeStructured(t, must(t, tab, netReq(tc.filter, tc.typ, tc.status, 0)), &f)
			if len(f.Requests) != len(tc.want) {
				t.Fatalf("got %d requests %+v, want %v", len(f.Requests), f.Requests, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(fmt.Sprint(f.Requests), w) {
					t.Errorf("no %s in %+v", w, f.Requests)
				}
			}
		})
	}

	jsonBody := text(must(t, tab, bodyReq(byPath["/api/data.json"].ID, "", 0)))
	if !strings.Contains(jsonBody, `{"n": 7, "items": ["a", "b"]}`) || !strings.Contains(jsonBody, "text") {
		t.Errorf("network_request json = %q", jsonBody)
	}
	if s := text(must(t, tab, bodyReq(byPath["/api/echo"].ID, "request", 0))); !strings.Contains(s, `{"q":"hello"}`) {
		t.Errorf("network_request request body = %q", s)
	}
	if s := text(must(t, tab, bodyReq(byPath["/api/data.json"].ID, "response", 5))); !strings.HasSuffix(s, "\n{\"n\":") || !strings.Contains(s, "the first 5 shown") {
		t.Errorf("network_request max_bytes 5 = %q, want the first 5 bytes and a note", s)
	}
	img := text(must(t, tab, bodyReq(byPath["/pic.png"].ID, "", MaxBodyBytes)))
	if !strings.Contains(img, "base64") || !strings.Contains(img, "iVBORw0KGgo") {
		t.Errorf("network_request image = %.200q, want base64 PNG", img)
	}

	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
		code commonv1.ErrorCode
		want string
	}{
		{"bad regexp", netReq("/(/", "", "", 0), commonv1.ErrorCode_INVALID_ARGUMENT, "not a valid regular expression"},
		{"bad status", netReq("", "", "teapot", 0), commonv1.ErrorCode_INVALID_ARGUMENT, "not an HTTP status"},
		{"limit over the buffer", netReq("", "", "", 1000), commonv1.ErrorCode_INVALID_ARGUMENT, "limit must be 1-500"},
		{"unknown id", bodyReq("r999", "", 0), commonv1.ErrorCode_NOT_FOUND, "take the id from network_requests"},
		{"bad part", bodyReq("r1", "headers", 0), commonv1.ErrorCode_INVALID_ARGUMENT, "response or request"},
		{"max_bytes too large", bodyReq("r1", "", MaxBodyBytes+1), commonv1.ErrorCode_INVALID_ARGUMENT, "max_bytes must be 1-"},
		{"no request body", bodyReq(byPath["/"].ID, "request", 0), commonv1.ErrorCode_NOT_FOUND, "sent no body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, tc.req)
			wantErr(t, err, tc.code, tc.want)
		})
	}
}

// TestNetworkBuffer: the ring keeps the last NetworkBuffer requests; a
// dropped one's body is gone with a clear error.
func TestNetworkBuffer(t *testing.T) {
	t.Parallel()
	srv := networkServer(t)
	tab := newTab(t, Options{NetworkBuffer: 2})
	must(t, tab, openReq(srv.URL))
	kittest.Eventually(t, 30*time.Second, func() error {
		s := text(must(t, tab, netReq("", "", "", 0)))
		return kittest.Check(strings.Contains(s, "3 older ones were dropped") && !strings.Contains(s, "pending"), "not yet: the ring is full and settled")
	})
	_, err := call(t, tab, bodyReq("r1", "", 0))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "keeps its last 2 requests")
}

// TestNetworkBlockedRule: a failed request that the session's policy
// refused is marked with the rule.
func TestNetworkBlockedRule(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<script>fetch("http://blocked.invalid/x")</script>`})
	tab := newTab(t, Options{})
	tab.SetBlocked(func() []*browserv1.BlockedRequest {
		return []*browserv1.BlockedRequest{{Url: "http://blocked.invalid/x", Rule: `block rule "blocked.invalid" (global)`}}
	})
	must(t, tab, openReq(srv.URL))
	var s string
	kittest.Eventually(t, 30*time.Second, func() error {
		s = text(must(t, tab, netReq("blocked", "", "failed", 0)))
		return kittest.Check(strings.Contains(s, "blocked by the URL policy"), "not yet: the fetch failed")
	})
	if !strings.Contains(s, `r2 GET http://blocked.invalid/x Fetch — blocked by the URL policy: block rule "blocked.invalid" (global)`) {
		t.Errorf("network_requests = %q", s)
	}
}

// TestPDF: the page as a PDF resource; format, landscape and ranges;
// the size cap and bad inputs.
func TestPDF(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><title>doc</title><h1>Printed</h1><p style="page-break-after:always">one</p><p>two</p>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, pdfReq(&browserv1.Pdf{Format: "a4", Landscape: true, PrintBackground: true, PageRanges: "1"}))
	r := res.GetContent()[1].GetResource()
	if r.GetMimeType() != "application/pdf" || r.GetName() != "page.pdf" || !bytes.HasPrefix(r.GetData(), []byte("%PDF")) {
		t.Fatalf("pdf resource = %s %s %.10q, want application/pdf starting with %%PDF", r.GetName(), r.GetMimeType(), r.GetData())
	}
	if s := text(res); !strings.Contains(s, "A4 landscape") || !strings.Contains(s, srv.URL) {
		t.Errorf("pdf text = %q", s)
	}
	small := newTab(t, Options{MaxPDFBytes: 100})
	must(t, small, openReq(srv.URL))
	_, err := call(t, small, pdfReq(&browserv1.Pdf{}))
	wantErr(t, err, commonv1.ErrorCode_TOO_LARGE, "more than the limit of 100", "page_ranges")
	for _, tc := range []struct {
		name string
		p    *browserv1.Pdf
		want string
	}{
		{"bad format", &browserv1.Pdf{Format: "B7"}, "Letter, Legal, Tabloid, A3, A4, A5"},
		{"bad ranges", &browserv1.Pdf{PageRanges: "first"}, "not a list of pages"},
		{"range beyond the document", &browserv1.Pdf{PageRanges: "5-3"}, "does not fit the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, tab, pdfReq(tc.p))
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		})
	}
}

// TestEmulate: a page that prints its viewport, user agent, language,
// time zone, color scheme and online state sees what emulate set; bad
// values are refused with what is accepted.
func TestEmulate(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><meta name="viewport" content="width=device-width"><title>env</title>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	e, err := Emulation{}.Merge(&browserv1.Emulate{Device: "pixel 7", Locale: "de-DE", Timezone: "Asia/Tokyo",
		ColorScheme: "dark", ReducedMotion: "reduce", Offline: new(true), Geolocation: &browserv1.Geolocation{Latitude: 52.5, Longitude: 13.4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Emulate(t.Context(), e); err != nil {
		t.Fatalf("Emulate: %v", err)
	}
	const probe = `[innerWidth, devicePixelRatio, navigator.userAgent.includes("Pixel 7"), navigator.language,
		Intl.DateTimeFormat().resolvedOptions().timeZone, matchMedia("(prefers-color-scheme: dark)").matches,
		matchMedia("(prefers-reduced-motion: reduce)").matches, navigator.onLine, navigator.maxTouchPoints].join(" ")`
	if got, want := evalString(t, tab, probe), `"412 2.625 true de-DE Asia/Tokyo true true false 5"`; got != want {
		t.Errorf("the page sees %s, want %s", got, want)
	}
	if s := e.Summary(); !strings.Contains(s, "device Pixel 7, viewport 412x915 @2.625x mobile") || !strings.Contains(s, "offline") {
		t.Errorf("Summary = %q", s)
	}
	// A new merge keeps what it does not set; reset_all clears.
	e2, _ := e.Merge(&browserv1.Emulate{Offline: new(false)})
	if e2.Device != "Pixel 7" || e2.Offline {
		t.Errorf("merge offline=false = %+v, want Pixel 7 online", e2)
	}
	if err := tab.Emulate(t.Context(), Emulation{}); err != nil {
		t.Fatalf("Emulate nothing: %v", err)
	}
	if got := evalString(t, tab, `[navigator.userAgent.includes("Pixel"), navigator.onLine, matchMedia("(prefers-color-scheme: dark)").matches].join(" ")`); got != `"false true false"` {
		t.Errorf("after clearing, the page sees %s", got)
	}
	sized, err := Emulation{}.WithSize(800, 600)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Emulate(t.Context(), sized); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, tab, `innerWidth + "x" + innerHeight`); got != `"800x600"` {
		t.Errorf("after resize the page sees %s", got)
	}
	bad, _ := Emulation{}.Merge(&browserv1.Emulate{Timezone: "Mars/Olympus"})
	wantErr(t, tab.Emulate(t.Context(), bad), commonv1.ErrorCode_INVALID_ARGUMENT, `timezone "Mars/Olympus" is not an IANA time zone`)

	for _, tc := range []struct {
		name string
		req  *browserv1.Emulate
		want string
	}{
		{"unknown device", &browserv1.Emulate{Device: "Nokia 3310"}, "the devices are: iPhone SE, iPhone 13"},
		{"bad locale", &browserv1.Emulate{Locale: "not a locale"}, "not a BCP 47 language tag"},
		{"bad timezone", &browserv1.Emulate{Timezone: "Europe Berlin"}, "not an IANA time zone"},
		{"bad color scheme", &browserv1.Emulate{ColorScheme: "blue"}, "light, dark or no-preference"},
		{"bad reduced motion", &browserv1.Emulate{ReducedMotion: "slow"}, "reduce or no-preference"},
		{"bad latitude", &browserv1.Emulate{Geolocation: &browserv1.Geolocation{Latitude: 91}}, "latitude must be -90 to 90"},
		{"bad user agent", &browserv1.Emulate{UserAgent: "a\nb"}, "one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Emulation{}.Merge(tc.req)
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		})
	}
	for _, size := range [][2]int32{{99, 600}, {800, 9000}} {
		_, err := Emulation{}.WithSize(size[0], size[1])
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "must be 100-8192 CSS pixels")
	}
}

// TestEmulateSettles: emulate run as a tool goes through settling and the
// change report (structured "changes"), and the page reacts to it (a
// matchMedia listener renames the page); a refused value leaves the tab
// as it was.
func TestEmulateSettles(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><title>light</title><script>
		window.mql = matchMedia("(prefers-color-scheme: dark)");
		window.mql.addEventListener("change", e => { document.title = e.matches ? "dark" : "light"; });
	</script>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: &browserv1.Emulate{ColorScheme: "dark", Timezone: "Asia/Tokyo"}}})
	var got struct {
		Changes *Changes `json:"changes"`
	}
	decodeStructured(t, res, &got)
	if s := text(res); !strings.HasPrefix(s, "Emulating: timezone Asia/Tokyo, color scheme dark") || got.Changes == nil {
		t.Errorf("emulate = %q %s, want the summary and a change report", s, string(structured.JSON(res.GetStructured())))
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(evalString(t, tab, `document.title`) == `"dark"`, "not yet: the page's matchMedia listener ran")
	})
	_, err := call(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: &browserv1.Emulate{Timezone: "Mars/Olympus"}}})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "not an IANA time zone")
	if got := evalString(t, tab, `Intl.DateTimeFormat().resolvedOptions().timeZone + " " + matchMedia("(prefers-color-scheme: dark)").matches`); got != `"Asia/Tokyo true"` {
		t.Errorf("after a refused time zone the page sees %s, want the emulation before it", got)
	}
	res = must(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 500, Height: 400}}})
	if s := text(res); !strings.Contains(s, "viewport 500x400") || !strings.Contains(s, "timezone Asia/Tokyo") {
		t.Errorf("resize = %q, want the viewport and the rest kept", s)
	}
	_, err = call(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 50, Height: 400}}})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "width must be 100-8192")
}
