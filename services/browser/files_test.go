package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
)

func uploadReq(sel string, files ...*browserv1.UploadFileItem) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_UploadFile{UploadFile: &browserv1.UploadFile{
		Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: sel}}, Files: files}}}
}

func inline(name, content string) *browserv1.UploadFileItem {
	return &browserv1.UploadFileItem{Name: name, Content: []byte(content)}
}

// TestUploadFileLimits: upload_file writes the files the page then reads,
// fetches a file by URL under the session's URL policy, and refuses files
// beyond each limit with an error that names it.
func TestUploadFileLimits(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "upload", MaxSessions: 2, Files: browser.FileLimits{MaxFileBytes: 10, MaxFiles: 2, MaxTotalBytes: 15}})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>upload</title><input type=file multiple><pre id=out></pre><script>
document.querySelector('input').addEventListener('change', async (e) => {
  const parts = [];
  for (const f of e.target.files) parts.push(f.name + '=' + await f.text());
  document.getElementById('out').textContent = parts.join(', ');
});</script>`)
	})
	mux.HandleFunc("/files/", http.NotFound)
	mux.HandleFunc("/files/notes.txt", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from url") })
	mux.HandleFunc("/files/big.bin", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, strings.Repeat("x", 11)) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	call := f.openUnder(&browserv1.UrlPolicy{Enforced: true, Tiers: []*browserv1.UrlRules{{Tier: "global", Block: []string{"localhost"}}}})
	if _, err := call(openReq(ts.URL + "/")); err != nil {
		t.Fatal(err)
	}
	res, err := call(uploadReq("input", inline("a.txt", "inline"), &browserv1.UploadFileItem{Url: ts.URL + "/files/notes.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText(); !strings.Contains(got, "2 files: a.txt (6 bytes), notes.txt (8 bytes)") {
		t.Errorf("upload_file = %q", got)
	}
	res, err = call(evalReq("document.getElementById('out').textContent"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText(); got != `"a.txt=inline, notes.txt=from url"` {
		t.Errorf("the page read %s", got)
	}

	localhost := strings.Replace(ts.URL, "127.0.0.1", "localhost", 1)
	for _, tt := range []struct {
		name  string
		files []*browserv1.UploadFileItem
		code  commonv1.ErrorCode
		msg   string
	}{
		{"too many", []*browserv1.UploadFileItem{inline("a", "1"), inline("b", "2"), inline("c", "3")}, commonv1.ErrorCode_TOO_LARGE, "got 3 files; the limit is 2 per call (the worker's --upload-max-files)"},
		{"file too big", []*browserv1.UploadFileItem{inline("big.txt", "12345678901")}, commonv1.ErrorCode_TOO_LARGE, `file 1 ("big.txt") is 11 bytes; the limit is 10 per file (the worker's --upload-max-file-mb)`},
		{"url too big", []*browserv1.UploadFileItem{{Url: ts.URL + "/files/big.bin"}}, commonv1.ErrorCode_TOO_LARGE, "is more than 10 bytes, the limit per file"},
		{"call too big", []*browserv1.UploadFileItem{inline("a", "12345678"), inline("b", "12345678")}, commonv1.ErrorCode_TOO_LARGE, "add up to more than 15 bytes, the limit per call (the worker's --upload-max-total-mb)"},
		{"blocked url", []*browserv1.UploadFileItem{{Url: localhost + "/files/notes.txt"}}, commonv1.ErrorCode_FORBIDDEN, `is blocked by block rule "localhost"`},
		{"no name", []*browserv1.UploadFileItem{inline("", "x")}, commonv1.ErrorCode_INVALID_ARGUMENT, "file 1 has no name"},
		{"path name", []*browserv1.UploadFileItem{inline("../x", "x")}, commonv1.ErrorCode_INVALID_ARGUMENT, `"../x" is not a plain file name`},
		{"both", []*browserv1.UploadFileItem{{Name: "x", Content: []byte("x"), Url: ts.URL}}, commonv1.ErrorCode_INVALID_ARGUMENT, "has both content and url"},
		{"none", nil, commonv1.ErrorCode_INVALID_ARGUMENT, "needs at least one file"},
		{"not found", []*browserv1.UploadFileItem{{Url: ts.URL + "/files/missing"}}, commonv1.ErrorCode_NAVIGATION_FAILED, "HTTP 404"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(uploadReq("input", tt.files...))
			wantCode(t, tt.name, err, tt.code, tt.msg)
		})
	}
}

// TestDrop: drop puts files and data on a drop zone as if dragged from
// outside the page (the page reads both from its drop event), within
// upload_file's limits.
func TestDrop(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "drop", MaxSessions: 2, Files: browser.FileLimits{MaxFiles: 2}})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>drop</title>
<div id=zone style="width:300px;height:200px;border:1px dashed">Drop files here</div><pre id=out></pre><script>
const zone = document.getElementById('zone');
zone.addEventListener('dragover', (e) => e.preventDefault());
zone.addEventListener('drop', async (e) => {
  e.preventDefault();
  const parts = [];
  for (const f of e.dataTransfer.files) parts.push(f.name + '=' + await f.text());
  parts.push('text=' + e.dataTransfer.getData('text/plain'));
  document.getElementById('out').textContent = parts.join(', ');
});</script>`)
	}))
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	drop := func(files []*browserv1.UploadFileItem, data ...*browserv1.DropItem) *browserv1.ToolRequest {
		return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drop{Drop: &browserv1.Drop{
			Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#zone"}}, Files: files, Data: data}}}
	}
	got := f.mustCall(s, drop([]*browserv1.UploadFileItem{inline("notes.txt", "dropped")}))
	if !strings.Contains(got, `Dropped notes.txt (7 bytes) on generic "Drop files here"`) {
		t.Errorf("drop of a file = %q", got)
	}
	if got := f.mustCall(s, evalReq("document.getElementById('out').textContent")); got != `"notes.txt=dropped, text="` {
		t.Errorf("the page read %s from the drop of a file", got)
	}
	got = f.mustCall(s, drop(nil, &browserv1.DropItem{MimeType: "text/plain", Value: "hello"}))
	if !strings.Contains(got, "Dropped text/plain (5 characters) on") {
		t.Errorf("drop of text = %q", got)
	}
	if got := f.mustCall(s, evalReq("document.getElementById('out').textContent")); got != `"text=hello"` {
		t.Errorf("the page read %s from the drop of text", got)
	}
	_, err := f.call(s, drop([]*browserv1.UploadFileItem{inline("a", "1"), inline("b", "2"), inline("c", "3")}))
	wantCode(t, "drop of 3 files", err, commonv1.ErrorCode_TOO_LARGE, "drop got 3 files; the limit is 2 per call (the worker's --upload-max-files)")
}
