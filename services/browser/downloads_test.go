package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func downloadSite(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>files</title><a id=report href="/report.txt">Report</a><a id=big href="/big.bin">Big</a><a id=img href="/pixel.bin">Pixel</a><a id=blank href="/report.txt" target="_blank">New tab</a>`)
	})
	attach := func(name, ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/report.txt", attach("report.txt", "text/plain", "quarterly numbers"))
	mux.HandleFunc("/pixel.bin", attach("pixel.png", "image/png", "\x89PNG\r\n\x1a\nfake"))
	mux.HandleFunc("/big.bin", attach("big.bin", "application/octet-stream", strings.Repeat("x", 300<<10)))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestDownloads: a download started by a click and one started by open are
// captured, reported in the change report, listed and returned (text as
// text, other files as a file part); one beyond the size limit is stopped.
func TestDownloads(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "downloads", MaxSessions: 2, Downloads: browser.DownloadLimits{MaxBytes: 100 << 10}})
	ts := downloadSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	if got := f.mustCall(s, clickSel("#report")); !strings.Contains(got, "- downloaded report.txt, 17 bytes, as d1 (download_get d1)") {
		t.Errorf("click on a download link = %q", got)
	}
	if got := f.mustCall(s, openReq(ts.URL+"/pixel.bin")); !strings.Contains(got, "is a download") || !strings.Contains(got, "- downloaded pixel.png, 12 bytes, as d2") {
		t.Errorf("open of a download = %q", got)
	}
	if got := f.mustCall(s, clickSel("#big")); !strings.Contains(got, "the download of big.bin (d3) was stopped: it passed 100 KiB, the limit per download (the worker's --download-max-mb)") {
		t.Errorf("click on a big download = %q", got)
	}
	// A link that opens the file in a new tab downloads it as well.
	if got := f.mustCall(s, clickSel("#blank")); !strings.Contains(got, "- downloaded report.txt, 17 bytes, as d4") {
		t.Errorf("click on a target=_blank download link = %q", got)
	}
	list := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadList{DownloadList: &browserv1.NoArgs{}}})
	for _, want := range []string{"4 downloads:", "d1 report.txt — completed, 17 bytes, from " + ts.URL + "/report.txt", "d3 big.bin — too_big"} {
		if !strings.Contains(list, want) {
			t.Errorf("download_list lacks %q:\n%s", want, list)
		}
	}
	get := func(id string) (*browserv1.ToolResult, error) {
		return f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: id}}})
	}
	// The fleet's object store holds them: download_get works without the
	// worker's copy.
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "sovereign-worker-*", "files", "sovereign-session-*", "downloads", "*"))
	removed := 0
	for _, p := range files {
		if strings.Contains(p, s.SessionId) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	if removed == 0 {
		t.Fatalf("no downloaded files of session %s in %s", s.SessionId, os.TempDir())
	}
	res, err := get("d1")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText(); !strings.Contains(got, "report.txt (text/plain; charset=utf-8, 17 bytes):\nquarterly numbers") {
		t.Errorf("download_get d1 = %q", got)
	}
	res, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d1"}}, MaxChars: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText(); !strings.Contains(got, ":\nquarterly\n… (cut at 9 of 17 characters; pass max_chars for more)") {
		t.Errorf("download_get d1 with max_chars 9 = %q", got)
	}
	res, err = get("d2")
	if err != nil {
		t.Fatal(err)
	}
	if r := res.GetContent()[len(res.GetContent())-1].GetResource(); len(res.GetContent()) != 2 || r.GetName() != "pixel.png" || r.GetMimeType() != "image/png" || string(r.GetData()) != "\x89PNG\r\n\x1a\nfake" {
		t.Errorf("download_get d2 = %v", res)
	}
	_, err = get("d9")
	wantCode(t, "download_get d9", err, commonv1.ErrorCode_NOT_FOUND, `there is no download "d9" in this session; download_list shows them`)
	_, err = get("d3")
	wantCode(t, "download_get d3", err, commonv1.ErrorCode_NOT_FOUND, "has no file: not kept")
}

// TestDownloadPolicy: a download from an address the session's URL policy
// blocks never happens.
func TestDownloadPolicy(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "dlpolicy", MaxSessions: 2})
	ts := downloadSite(t)
	call := f.openUnder(&browserv1.UrlPolicy{Enforced: true, Tiers: []*browserv1.UrlRules{{Tier: "global", Block: []string{"localhost"}}}})
	if _, err := call(openReq(ts.URL + "/")); err != nil {
		t.Fatal(err)
	}
	blocked := strings.Replace(ts.URL, "127.0.0.1", "localhost", 1) + "/report.txt"
	_, err := call(evalReq(`location.href = ` + strconv.Quote(blocked) + `; 1`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(openReq(blocked))
	wantCode(t, "open of a blocked download", err, commonv1.ErrorCode_FORBIDDEN, "localhost")
	res, err := call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadList{DownloadList: &browserv1.NoArgs{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText(); got != "no downloads in this session yet" {
		t.Errorf("download_list after blocked downloads = %q", got)
	}
}

// TestDownloadSessionLimit: a session keeps downloads up to its limit; one
// past it is reported and not kept.
func TestDownloadSessionLimit(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "dlsession", MaxSessions: 2, Downloads: browser.DownloadLimits{SessionMaxBytes: 20}})
	ts := downloadSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	if got := f.mustCall(s, clickSel("#report")); !strings.Contains(got, "- downloaded report.txt, 17 bytes, as d1") {
		t.Errorf("first download = %q", got)
	}
	if got := f.mustCall(s, clickSel("#img")); !strings.Contains(got, "downloaded pixel.png (d2, 12 bytes), but it is not kept: the session's downloads would pass 20 bytes, the limit per session (the worker's --download-session-max-mb)") {
		t.Errorf("download past the session's limit = %q", got)
	}
	_, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d2"}}})
	wantCode(t, "download_get d2", err, commonv1.ErrorCode_NOT_FOUND, "has no file")
}

// TestDownloadsBetweenCalls: a page that downloads on a timer while no
// call runs gets its downloads cancelled: nothing would claim, count or
// list them, and they would fill the worker's disk.
func TestDownloadsBetweenCalls(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "dlflood", MaxSessions: 1, WarmSessions: -1, Downloads: browser.DownloadLimits{MaxBytes: 2 << 20, SessionMaxBytes: 3 << 20}})
	// The page tells the server when its timer has made its last
	// download, so the test looks at the disk after that rather than
	// after a fixed pause (which a loaded machine's timers can outlast).
	done := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/done", func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(done) })
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>flood</title><p>x</p><script>
let n = 0;
const big = new Uint8Array(1 << 20);
setTimeout(() => { const iv = setInterval(() => {
  if (++n > 30) { clearInterval(iv); fetch('/done'); return; }
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([big]));
  a.download = 'f' + n + '.bin';
  document.body.appendChild(a); a.click();
}, 50); }, 1500);
</script>`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the page's timer did not make its 30 downloads within 60 s")
	}
	// The last downloads may still be being cancelled (and their partial
	// files removed): look until the disk holds at most one download's
	// limit. Kept downloads would stay, so this cannot pass by waiting.
	onDisk := func() (n int, total int64) {
		files, _ := filepath.Glob(filepath.Join(os.TempDir(), "sovereign-worker-*", "files", "sovereign-session-*", "downloads", "*"))
		for _, p := range files {
			if strings.Contains(p, s.SessionId) {
				if fi, err := os.Stat(p); err == nil {
					total += fi.Size()
					n++
				}
			}
		}
		return n, total
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		n, total := onDisk()
		return kittest.Check(total <= 2<<20, "%d files, %d bytes of downloads on disk for the session after a timer's downloads between calls, want them cancelled", n, total)
	})
	// The page did try: its timer ran (so an empty directory means the
	// downloads were stopped, not that none began).
	if got := f.mustCall(s, evalReq("n")); got == "0" {
		t.Fatalf("the page's timer never ran (n = %s)", got)
	}
	if got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadList{DownloadList: &browserv1.NoArgs{}}}); strings.Contains(got, "f1.bin") {
		t.Errorf("download_list = %q, want none of the cancelled downloads", got)
	}
}
