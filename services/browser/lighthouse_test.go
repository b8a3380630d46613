package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// lighthouseDir is the runner of lighthouse_audit in this repository,
// installed by `make lighthouse` (make test installs it too).
func lighthouseDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: lighthouse_audit needs Node.js >= 18.16 (Debian: apt-get install nodejs npm)")
	}
	dir, err := filepath.Abs("lighthouse")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "lighthouse")); err != nil {
		t.Fatalf("the Lighthouse runner is not installed in %s: run `make lighthouse` (%v)", dir, err)
	}
	return dir
}

func lighthouseReq(mode, device, report string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_LighthouseAudit{LighthouseAudit: &browserv1.LighthouseAudit{
		Mode: mode, Device: device, Report: report}}}
}

// lighthouseCall calls lighthouse_audit with the gateway's deadline for
// it (its tool timeout plus catalog.LighthouseExtraMs).
func (f *fleet) lighthouseCall(s *browserv1.OpenSessionResponse, req *browserv1.ToolRequest) (*browserv1.ToolResult, time.Duration, error) {
	return f.lighthouseCallWithin(s, req, 90*time.Second)
}

func (f *fleet) lighthouseCallWithin(s *browserv1.OpenSessionResponse, req *browserv1.ToolRequest, d time.Duration) (*browserv1.ToolResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req.SessionId = s.SessionId
	var res browserv1.ToolResult
	start := time.Now()
	err := f.c.Request(ctx, f.c.Subject("browser", "w", s.WorkerId, "call"), req, &res)
	return &res, time.Since(start), err
}

// servePixel answers with a 1x1 GIF.
func servePixel(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/gif")
	_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
}

// lighthouseStructured is the structured part of a lighthouse_audit result.
type lighthouseStructured struct {
	Lighthouse struct {
		Version string         `json:"version"`
		Mode    string         `json:"mode"`
		Device  string         `json:"device"`
		Scores  map[string]int `json:"scores"`
		Failed  []struct {
			ID    string   `json:"id"`
			Items []string `json:"items"`
		} `json:"failed"`
	} `json:"lighthouse"`
}

// TestLighthouseAudit runs real Lighthouse (the runner of
// services/browser/lighthouse, with node) on a page with known
// accessibility and SEO defects: snapshot mode names them with low
// scores and attaches the JSON report; navigation mode on a mobile device
// keeps the session's cookie and local storage (storage is never reset)
// and leaves the tab's viewport as it was; results are scrubbed of the
// operator's secrets; bad arguments and non-web pages are refused; a run
// that outlasts the call's deadline is killed in time, and the tab keeps
// working with its viewport; the reload of a navigation audit stays under
// the session's URL policy. It is not parallel: it looks for the
// Lighthouse runners of this process, and those of other tests' audits
// would be counted as its own.
func TestLighthouseAudit(t *testing.T) {
	dir := lighthouseDir(t)
	f := newFleet(t)
	key := storeSecret(t, f, "API_KEY", httpSecret)
	f.worker(browser.Config{ID: "lh", MaxSessions: 3, SecretKey: key, LighthouseDir: dir})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// No <title>, no lang, no meta description; an image without
		// alt, a button without a name.
		fmt.Fprintf(w, `<!doctype html><html><head><meta name="viewport" content="width=device-width"></head><body>`+
			`<h1>Defects</h1><img src="/pixel.gif?k=%s" width="10" height="10"><button></button>`+
			`<p>Some text for the page.</p></body></html>`, httpSecret)
	})
	mux.HandleFunc("/pixel.gif", servePixel)
	// A page that loads once; reloaded, its image never comes, so a
	// navigation audit runs out of time.
	release := make(chan struct{})
	var hangs atomic.Int32
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>hang</title><img src="/hang.gif" alt="hang">`)
	})
	mux.HandleFunc("/hang.gif", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if hangs.Add(1) == 1 {
			servePixel(w, r)
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// A page with an image on a host the URL policy refuses.
	var evilHits atomic.Int32
	mux.HandleFunc("/policed", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>policed</title><img src="http://localhost:%s/evil.gif" alt="evil">`, r.URL.Query().Get("port"))
	})
	mux.HandleFunc("/evil.gif", func(w http.ResponseWriter, r *http.Request) {
		evilHits.Add(1)
		servePixel(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	s := f.mustOpen()

	_, _, err := f.lighthouseCall(s, lighthouseReq("", "", ""))
	wantCode(t, "on about:blank", err, commonv1.ErrorCode_INVALID_ARGUMENT, "open an http(s) page first")
	f.mustCall(s, openReq(ts.URL+"/"))
	_, _, err = f.lighthouseCall(s, lighthouseReq("timespan", "", ""))
	wantCode(t, "mode timespan", err, commonv1.ErrorCode_INVALID_ARGUMENT, `mode "timespan" is not one of navigation, snapshot`)
	_, _, err = f.lighthouseCall(s, lighthouseReq("", "tablet", ""))
	wantCode(t, "device tablet", err, commonv1.ErrorCode_INVALID_ARGUMENT, `device "tablet" is not one of desktop, mobile`)

	t.Run("snapshot", func(t *testing.T) {
		res, took, err := f.lighthouseCall(s, lighthouseReq("snapshot", "desktop", "json"))
		if err != nil {
			t.Fatal(err)
		}
		text := res.GetContent()[0].GetText()
		t.Logf("snapshot audit: %s, text %d chars, structured %d bytes", took.Round(10*time.Millisecond), len(text), len(string(structured.JSON(res.GetStructured()))))
		for _, want := range []string{"Lighthouse 12.8.2, snapshot mode, desktop", "image-alt", "button-name", "meta-description", "document-title", "html-has-lang"} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		if len(text) > 8000 {
			t.Errorf("text is %d characters, more than the cap of 8000", len(text))
		}
		var st lighthouseStructured
		if err := json.Unmarshal(structured.JSON(res.GetStructured()), &st); err != nil {
			t.Fatal(err)
		}
		sc := st.Lighthouse.Scores
		if st.Lighthouse.Version != "12.8.2" || sc["accessibility"] < 0 || sc["accessibility"] >= 90 || sc["seo"] < 0 || sc["seo"] >= 90 {
			t.Errorf("structured = %+v, want Lighthouse 12.8.2 and accessibility and seo scores 0-89", st.Lighthouse)
		}
		if _, ok := sc["best-practices"]; !ok {
			t.Errorf("scores %v lack best-practices", sc)
		}
		var imgItems []string
		for _, a := range st.Lighthouse.Failed {
			if a.ID == "image-alt" {
				imgItems = a.Items
			}
		}
		if len(imgItems) == 0 || !strings.Contains(imgItems[0], "<img") {
			t.Errorf("image-alt items = %q, want the img element", imgItems)
		}
		var report []byte
		for _, c := range res.GetContent() {
			if r := c.GetResource(); r != nil && r.GetName() == "lighthouse.json" && r.GetMimeType() == "application/json" {
				report = r.GetData()
			}
		}
		var lhr struct {
			LighthouseVersion string                     `json:"lighthouseVersion"`
			Audits            map[string]json.RawMessage `json:"audits"`
		}
		if err := json.Unmarshal(report, &lhr); err != nil || lhr.LighthouseVersion != "12.8.2" || lhr.Audits["image-alt"] == nil {
			t.Errorf("lighthouse.json (%d bytes): version %q, %d audits, %v", len(report), lhr.LighthouseVersion, len(lhr.Audits), err)
		}
		t.Logf("lighthouse.json: %d bytes", len(report))
		noSecret(t, "text", text)
		noSecret(t, "structured", string(structured.JSON(res.GetStructured())))
		noSecret(t, "lighthouse.json", string(report))
	})

	t.Run("navigation", func(t *testing.T) {
		f.mustCall(s, evalReq(`document.cookie = "sid=kept; max-age=3600"; localStorage.setItem("k", "v"); 1`))
		// The session's own emulation, which the mobile audit must leave.
		f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 900, Height: 700}}})
		before := f.mustCall(s, evalReq(`innerWidth + "x" + innerHeight + " " + navigator.userAgent.includes("Mobile")`))
		res, took, err := f.lighthouseCall(s, lighthouseReq("navigation", "mobile", "html"))
		if err != nil {
			t.Fatal(err)
		}
		text := res.GetContent()[0].GetText()
		t.Logf("navigation audit: %s, text %d chars", took.Round(10*time.Millisecond), len(text))
		for _, want := range []string{"navigation mode, mobile", "image-alt", "meta-description", "take a new snapshot"} {
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		}
		var html []byte
		for _, c := range res.GetContent() {
			if r := c.GetResource(); r != nil && r.GetName() == "lighthouse.html" && r.GetMimeType() == "text/html" {
				html = r.GetData()
			}
		}
		if !strings.Contains(string(html), "<html") || !strings.Contains(string(html), "Lighthouse") {
			t.Errorf("lighthouse.html: %d bytes, not a Lighthouse report", len(html))
		}
		t.Logf("lighthouse.html: %d bytes", len(html))
		noSecret(t, "lighthouse.html", string(html))
		if got := f.mustCall(s, evalReq(`document.cookie + " " + localStorage.getItem("k")`)); !strings.Contains(got, "sid=kept") || !strings.Contains(got, " v") {
			t.Errorf("after the navigation audit, cookie and local storage = %q, want sid=kept and v (storage must not be reset)", got)
		}
		if after := f.mustCall(s, evalReq(`innerWidth + "x" + innerHeight + " " + navigator.userAgent.includes("Mobile")`)); after != before || !strings.Contains(before, "900x700 false") {
			t.Errorf("after a mobile audit the tab shows %q, want %q as before", after, before)
		}
	})

	t.Run("policy", func(t *testing.T) {
		// Lighthouse reloads the page over a DevTools connection of its
		// own; the session's URL policy still refuses what it refuses.
		p := enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}})
		ps := f.openWith(p)
		defer func() { _ = f.close(ps) }()
		_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
		open := openReq(ts.URL + "/policed?port=" + port)
		open.Policy = p
		if _, err := f.call(ps, open); err != nil {
			t.Fatal(err)
		}
		f.waitBlocked(ps, "/evil.gif", "Image")
		refused := func() int {
			_, l := f.blocked(ps)
			n := 0
			for _, b := range l.Blocked {
				if strings.Contains(b.URL, "/evil.gif") {
					n++
				}
			}
			return n
		}
		before := refused()
		req := lighthouseReq("navigation", "desktop", "")
		req.Policy = p
		if _, _, err := f.lighthouseCall(ps, req); err != nil {
			t.Fatal(err)
		}
		if after := refused(); after <= before {
			t.Errorf("the image was refused %d times before the audit's reload and %d after, want more", before, after)
		}
		if n := evilHits.Load(); n > 0 {
			t.Errorf("the refused image was served %d times", n)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		other := f.mustOpen()
		f.mustCall(other, openReq(ts.URL+"/"))
		f.mustCall(s, openReq(ts.URL+"/hang"))
		f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 900, Height: 700}}})
		type outcome struct {
			took time.Duration
			err  error
		}
		done := make(chan outcome, 1)
		go func() {
			_, took, err := f.lighthouseCallWithin(s, lighthouseReq("navigation", "mobile", ""), 9*time.Second)
			done <- outcome{took, err}
		}()
		// While it runs, another session's audit on this worker waits for
		// it (one at a time), here until its own deadline.
		// Runners are children of this process (the worker runs in it);
		// another test binary may run its own at the same time.
		runners := func() string {
			out, _ := exec.Command("pgrep", "-a", "-P", strconv.Itoa(os.Getpid()), "-f", filepath.Join(dir, "run.mjs")).Output()
			return strings.TrimSpace(string(out))
		}
		kittest.Eventually(t, 30*time.Second, func() error {
			return kittest.Check(runners() != "", "the first audit's Lighthouse runner has not started")
		})
		_, _, err := f.lighthouseCallWithin(other, lighthouseReq("snapshot", "", ""), 3500*time.Millisecond)
		wantCode(t, "while another session's audit runs", err, commonv1.ErrorCode_TIMEOUT, "another Lighthouse audit ran on this browser worker")
		o := <-done
		took, err := o.took, o.err
		// The runner's limit is the time left when the worker starts it, less
		// 2 s: about 7 s, 6 s when the call took a while to get there.
		wantCode(t, "a page that never loads", err, commonv1.ErrorCode_TIMEOUT, "Lighthouse did not finish within ")
		if took > 9*time.Second {
			t.Errorf("the call took %s, past its deadline of 9s", took)
		}
		// The runner was killed; the tab works and keeps its viewport.
		if got := f.mustCall(s, evalReq(`innerWidth + "x" + innerHeight`)); !strings.Contains(got, "900x700") {
			t.Errorf("after the killed audit the tab shows %s, want 900x700", got)
		}
		if r := runners(); r != "" {
			t.Errorf("a Lighthouse runner still runs after the call: %s", r)
		}
	})
}

// TestLighthouseUnavailable: a worker without --lighthouse-dir answers
// lighthouse_audit with FAILED_PRECONDITION, saying how to install Lighthouse;
// a --lighthouse-dir without the runner is refused at start.
func TestLighthouseUnavailable(t *testing.T) {
	t.Parallel()
	if _, err := (browser.Config{ID: "x", LighthouseDir: t.TempDir()}).Resolve(); err == nil || !strings.Contains(err.Error(), "no Lighthouse runner there") {
		t.Errorf("Resolve with an empty lighthouse dir = %v, want an error naming it", err)
	}
	var errs []error
	fs := flag.NewFlagSet("browser", flag.ContinueOnError)
	cfg := browser.RegisterFlags(fs, &errs)
	if err := fs.Parse([]string{"--lighthouse-dir", "lighthouse"}); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if cfg.LighthouseDir != "lighthouse" {
		t.Errorf("--lighthouse-dir = %q", cfg.LighthouseDir)
	}
	f := newFleet(t)
	f.worker(browser.Config{ID: "nolh", MaxSessions: 1})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>x</title>`)
	}))
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	_, _, err := f.lighthouseCall(s, lighthouseReq("snapshot", "", ""))
	wantCode(t, "without --lighthouse-dir", err, commonv1.ErrorCode_FAILED_PRECONDITION, "Lighthouse is not installed on this worker")
	wantCode(t, "without --lighthouse-dir", err, commonv1.ErrorCode_FAILED_PRECONDITION, "make lighthouse")
}

// lighthouseWhole fails unless res is a whole lighthouse_audit result:
// its attached report (report "json") has no runtime error and no run
// warning, and names no failed trace.
func lighthouseWhole(t *testing.T, what string, res *browserv1.ToolResult) {
	t.Helper()
	var report []byte
	for _, c := range res.GetContent() {
		if r := c.GetResource(); r != nil && r.GetName() == "lighthouse.json" {
			report = r.GetData()
		}
	}
	var lhr struct {
		RuntimeError *struct{ Code, Message string } `json:"runtimeError"`
		RunWarnings  []string                        `json:"runWarnings"`
	}
	if err := json.Unmarshal(report, &lhr); err != nil {
		t.Fatalf("%s: lighthouse.json (%d bytes): %v", what, len(report), err)
	}
	if lhr.RuntimeError != nil || len(lhr.RunWarnings) > 0 || strings.Contains(string(report), "Tracing") {
		t.Errorf("%s: Lighthouse reports runtime error %+v, warnings %q (tracing named: %t)", what, lhr.RuntimeError, lhr.RunWarnings,
			strings.Contains(string(report), "Tracing"))
	}
}

// TestLighthouseWhileRecording: Chromium records one trace per browser,
// and the sessions' performance recordings take turns at it; a Lighthouse
// audit needs no turn, because its categories (accessibility, best
// practices, SEO) gather no trace, in navigation mode as in snapshot mode:
// the runner never calls Tracing.start. So while one session records,
// another session's audits run at once and whole; a performance_start
// during an audit's reload starts at once; and the recording holds its
// own page only. Were run.mjs to ask for a category that traces
// (performance), Lighthouse would start a trace of the browser: its
// navigation would fail while a session records ("Tracing has already
// been started"), and a recording could not start during an audit.
func TestLighthouseWhileRecording(t *testing.T) {
	t.Parallel()
	dir := lighthouseDir(t)
	f := newFleet(t)
	f.worker(browser.Config{ID: "lhrec", MaxSessions: 2, LighthouseDir: dir})
	// The second session's pages have an image that, once hold is set,
	// waits for release: a navigation audit's reload is then under way
	// until the test lets it finish.
	var hold atomic.Bool
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>page %s</title><p>%s`, r.URL.Path, r.URL.Path)
		if strings.HasPrefix(r.URL.Path, "/b") {
			fmt.Fprint(w, `<img src="/held.gif" alt="held" width="1" height="1">`)
		}
	})
	mux.HandleFunc("/held.gif", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if hold.Load() {
			select {
			case arrived <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		servePixel(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	a, b := f.mustOpen(), f.mustOpen()
	f.mustCall(a, openReq(ts.URL+"/alpha-5d1e"))
	f.mustCall(b, openReq(ts.URL+"/bravo-c93b"))

	// The first session records; the second's audits run meanwhile.
	f.mustCall(a, perfStart(true))
	for _, mode := range []string{"navigation", "snapshot"} {
		res, took, err := f.lighthouseCall(b, lighthouseReq(mode, "", "json"))
		if err != nil {
			t.Fatalf("%s audit while another session records: %v", mode, err)
		}
		t.Logf("%s audit while another session records: %s", mode, took.Round(10*time.Millisecond))
		lighthouseWhole(t, mode+" audit while another session records", res)
	}
	res, err := f.call(a, perfStop())
	if err != nil {
		t.Fatal(err)
	}
	text, raw := traceText(t, res)
	if !strings.Contains(text, "Navigation to "+ts.URL+"/alpha-5d1e") {
		t.Errorf("the recording's performance_stop = %q, want its own load", text)
	}
	if strings.Contains(text, "c93b") || bytes.Contains(raw, []byte("c93b")) {
		t.Error("the recording holds the audited session's page")
	}

	// The second session's navigation audit reloads its page (with
	// Lighthouse's instrumentation on); meanwhile the first session's
	// recording starts at once, not queued.
	hold.Store(true)
	type outcome struct {
		res *browserv1.ToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, _, err := f.lighthouseCall(b, lighthouseReq("navigation", "", "json"))
		done <- outcome{res, err}
	}()
	select {
	case <-arrived:
	case o := <-done:
		t.Fatalf("the audit ended before its reload's image was asked for: %v", o.err)
	case <-time.After(60 * time.Second):
		t.Fatal("the audit's reload did not ask for its image within 60s")
	}
	if s := f.mustCall(a, perfStart(false)); !strings.HasPrefix(s, "Recording a performance trace of "+ts.URL+"/alpha-5d1e") {
		t.Errorf("performance_start during another session's audit = %q, want it recording at once", s)
	}
	let()
	o := <-done
	if o.err != nil {
		t.Fatalf("the audit during which another session started recording: %v", o.err)
	}
	lighthouseWhole(t, "navigation audit while another session starts recording", o.res)
	f.mustCall(a, openReq(ts.URL+"/alpha2-5d1e"))
	res, err = f.call(a, perfStop())
	if err != nil {
		t.Fatal(err)
	}
	if text, raw := traceText(t, res); !strings.Contains(text, "Navigation to "+ts.URL+"/alpha2-5d1e") ||
		strings.Contains(text, "c93b") || bytes.Contains(raw, []byte("c93b")) {
		t.Errorf("the recording started during the audit: %q, want its own navigation only", text)
	}
}
