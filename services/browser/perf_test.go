package browser_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// TestProfileConfig: the profiling tools' limits have defaults, flags,
// and refuse values out of range, naming them.
func TestProfileConfig(t *testing.T) {
	t.Parallel()
	cfg, err := browser.Config{ID: "x"}.Resolve()
	if err != nil || cfg.MaxProfileFileBytes != page.DefaultMaxProfileFileBytes || cfg.MaxProfileReadBytes != page.DefaultMaxProfileReadBytes {
		t.Errorf("defaults = %d, %d, %v", cfg.MaxProfileFileBytes, cfg.MaxProfileReadBytes, err)
	}
	for _, tc := range []struct {
		cfg  browser.Config
		want string
	}{
		{browser.Config{ID: "x", MaxProfileFileBytes: -1}, "max profile file bytes -1: must be 1-33554432"},
		{browser.Config{ID: "x", MaxProfileFileBytes: 40 << 20}, "max profile file bytes 41943040"},
		{browser.Config{ID: "x", MaxProfileReadBytes: -1}, "max profile read bytes -1"},
	} {
		if _, err := tc.cfg.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	var errs []error
	fs := flag.NewFlagSet("browser", flag.ContinueOnError)
	flags := browser.RegisterFlags(fs, &errs)
	if err := fs.Parse([]string{"--max-profile-file-mb", "3", "--max-profile-read-mb", "50"}); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if flags.MaxProfileFileBytes != 3<<20 || flags.MaxProfileReadBytes != 50<<20 {
		t.Errorf("config = %d, %d, want 3 MiB and 50 MiB", flags.MaxProfileFileBytes, flags.MaxProfileReadBytes)
	}
}

// TestProfileScrubbed: a secret the page loads and keeps comes back as
// its placeholder in the trace and the heap snapshot files too.
func TestProfileScrubbed(t *testing.T) {
	t.Parallel()
	f := httpFleet(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>leaky</title><script>window.kept = %q; fetch("/api?k=%s")</script>`, httpSecret, httpSecret)
	})
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "{}") })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	files := 0
	for _, req := range []*browserv1.ToolRequest{
		{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}},
		{Tool: &browserv1.ToolRequest_PerformanceStop{PerformanceStop: &browserv1.NoArgs{}}},
		{Tool: &browserv1.ToolRequest_HeapSnapshot{HeapSnapshot: &browserv1.NoArgs{}}},
	} {
		res, err := f.call(s, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.GetContent() {
			r := c.GetResource()
			if r == nil {
				continue
			}
			files++
			zr, err := gzip.NewReader(bytes.NewReader(r.GetData()))
			if err != nil {
				t.Fatalf("%s: %v", r.GetName(), err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("%s: %v", r.GetName(), err)
			}
			if bytes.Contains(raw, []byte(httpSecret)) || !bytes.Contains(raw, []byte("{{secrets.API_KEY}}")) || !json.Valid(raw) {
				t.Errorf("%s holds the secret or not its placeholder, or is not JSON", r.GetName())
			}
		}
	}
	if files != 2 {
		t.Errorf("%d files came back, want the trace and the heap snapshot", files)
	}
}

func perfStart(reload bool) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: reload}}}
}

func perfStop() *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStop{PerformanceStop: &browserv1.NoArgs{}}}
}

// traceText is the text of a performance_stop result and its trace file,
// gunzipped.
func traceText(t *testing.T, res *browserv1.ToolResult) (string, []byte) {
	t.Helper()
	var text string
	for _, c := range res.GetContent() {
		if r := c.GetResource(); r != nil && r.GetName() == "trace.json.gz" {
			zr, err := gzip.NewReader(bytes.NewReader(r.GetData()))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			return text, raw
		}
		text += c.GetText()
	}
	t.Fatalf("performance_stop attached no trace: %s", text)
	return "", nil
}

// TestPerformanceTwoSessions: two sessions of one worker share its
// Chromium, which records one trace at a time. While the first session
// records, the second's performance_start is queued (it used to fail: "the
// browser is already tracing this tab (another client?)"), its
// performance_stop before its turn gives up its place, and its recording
// starts by itself once the first one ends. Neither trace holds anything
// of the other session's pages, and the first's result is whole.
func TestPerformanceTwoSessions(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "pw", MaxSessions: 2})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<!doctype html><title>page %s</title><p>%s", r.URL.Path, r.URL.Path)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	a, b := f.mustOpen(), f.mustOpen()
	f.mustCall(a, openReq(ts.URL+"/alpha-5d1e"))
	f.mustCall(b, openReq(ts.URL+"/bravo-c93b"))

	f.mustCall(a, perfStart(true))
	if s := f.mustCall(b, perfStart(false)); !strings.Contains(s, "Queued: this worker's browser records one performance trace at a time") {
		t.Fatalf("second session's performance_start = %q, want it queued", s)
	}
	_, err := f.call(b, perfStop())
	wantCode(t, "performance_stop before its turn", err, commonv1.ErrorCode_FAILED_PRECONDITION, "nothing was recorded: this tab's performance recording was still queued")
	f.mustCall(b, perfStart(false))
	f.mustCall(b, openReq(ts.URL+"/bravo2-c93b"))

	res, err := f.call(a, perfStop())
	if err != nil {
		t.Fatal(err)
	}
	text, raw := traceText(t, res)
	if !strings.Contains(text, "Navigation to "+ts.URL+"/alpha-5d1e") || !bytes.Contains(raw, []byte("alpha-5d1e")) {
		t.Errorf("first session's performance_stop = %q, want its own load", text)
	}
	if strings.Contains(text, "c93b") || bytes.Contains(raw, []byte("c93b")) {
		t.Error("the first session's trace holds the second session's page")
	}

	kittest.Eventually(t, 30*time.Second, func() error {
		_, err := f.call(b, perfStart(false))
		return kittest.Check(err != nil && strings.Contains(err.Error(), "already running"), "not yet: the second session's recording starts")
	})
	f.mustCall(a, openReq(ts.URL+"/alpha2-5d1e"))
	f.mustCall(b, openReq(ts.URL+"/bravo3-c93b"))
	res, err = f.call(b, perfStop())
	if err != nil {
		t.Fatal(err)
	}
	text, raw = traceText(t, res)
	if !strings.Contains(text, "Navigation to "+ts.URL+"/bravo3-c93b") {
		t.Errorf("second session's performance_stop = %q, want its own navigation", text)
	}
	if strings.Contains(text, "5d1e") || bytes.Contains(raw, []byte("5d1e")) {
		t.Error("the second session's trace holds the first session's pages")
	}
}
