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

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
)

// TestProfileConfig: the profiling tools' limits have defaults, flags,
// and refuse values out of range, naming them.
func TestProfileConfig(t *testing.T) {
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
