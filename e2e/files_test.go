package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// filesSite serves the pages of TestFilesDialogs.
func filesSite(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/confirm", page(`<!doctype html><title>Confirm</title>
<button onclick="document.title = 'deleted ' + confirm('Delete account?')">Delete</button>`))
	mux.HandleFunc("/upload", page(`<!doctype html><title>Upload</title>
<label>Resume <input type=file></label><pre id=out></pre>
<script>document.querySelector('input').addEventListener('change', async (e) => {
  const f = e.target.files[0];
  document.getElementById('out').textContent = f.name + '=' + await f.text();
});</script>`))
	mux.HandleFunc("/dropzone", page(`<!doctype html><title>Drop zone</title>
<div id=zone style="width:300px;height:150px;border:1px dashed">Drop files here</div><pre id=out></pre>
<script>const zone = document.getElementById('zone');
zone.addEventListener('dragover', (e) => e.preventDefault());
zone.addEventListener('drop', async (e) => {
  e.preventDefault();
  const f = e.dataTransfer.files[0];
  document.getElementById('out').textContent = f ? f.name + '=' + await f.text() : 'url=' + e.dataTransfer.getData('text/uri-list');
});</script>`))
	mux.HandleFunc("/notes.txt", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fetched by the worker") })
	mux.HandleFunc("/files", page(`<!doctype html><title>Files</title><a href="/report.csv">Report</a>`))
	mux.HandleFunc("/report.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="report.csv"`)
		fmt.Fprint(w, "quarter,revenue\nq1,42\n")
	})
	mux.HandleFunc("/logo.bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="logo.bin"`)
		fmt.Fprint(w, "\x00\x01binary")
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestFilesDialogs drives dialogs, uploads and downloads through a real MCP
// client and gateway: a confirm in ask mode stops the click and every
// later tool until handle_dialog answers; upload_file sets a file the page
// reads.
func TestFilesDialogs(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 2})
	site := filesSite(t)
	ctx := callCtx(t, 2*time.Minute)
	c := initClient(t, ctx, f.Gateways[0].MCP)

	t.Run("dialog_ask", func(t *testing.T) {
		tool(t, ctx, c, "open", map[string]any{"url": site + "/confirm"})
		got := text(t, ctx, c, "click", map[string]any{"selector": "button"})
		if !strings.Contains(got, `a confirm dialog is open: "Delete account?"; answer it with handle_dialog`) {
			t.Fatalf("click = %q", got)
		}
		_, err := c.Tool(ctx, "snapshot", nil)
		var te *harness.ToolError
		if !asToolError(err, &te) || !strings.Contains(te.Text, `snapshot cannot run: a confirm dialog is open: "Delete account?"`) {
			t.Fatalf("snapshot with a dialog open: %v", err)
		}
		got = text(t, ctx, c, "handle_dialog", map[string]any{"accept": true})
		if !strings.Contains(got, `Accepted the confirm dialog "Delete account?"`) || !strings.Contains(got, `title: "deleted true"`) {
			t.Errorf("handle_dialog = %q", got)
		}
		if _, err := c.Tool(ctx, "handle_dialog", map[string]any{"accept": false}); !asToolError(err, &te) || !strings.Contains(te.Text, "no dialog is open") {
			t.Errorf("handle_dialog with no dialog: %v", err)
		}
	})

	t.Run("upload_file", func(t *testing.T) {
		tool(t, ctx, c, "open", map[string]any{"url": site + "/upload"})
		ref := refOf(t, ctx, c, "button", "Choose file: Resume")
		got := text(t, ctx, c, "upload_file", map[string]any{"ref": ref, "files": []any{
			map[string]any{"name": "cv.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("hello from e2e"))},
		}})
		if !strings.Contains(got, "Set cv.txt (14 bytes)") {
			t.Errorf("upload_file = %q", got)
		}
		if got := text(t, ctx, c, "get_text", map[string]any{"selector": "#out"}); got != "cv.txt=hello from e2e" {
			t.Errorf("the page read %q", got)
		}
		got = text(t, ctx, c, "upload_file", map[string]any{"ref": ref, "files": []any{map[string]any{"url": site + "/notes.txt"}}})
		if !strings.Contains(got, "Set notes.txt (21 bytes)") {
			t.Errorf("upload_file by url = %q", got)
		}
		if got := text(t, ctx, c, "get_text", map[string]any{"selector": "#out"}); got != "notes.txt=fetched by the worker" {
			t.Errorf("the page read %q", got)
		}
		_, err := c.Tool(ctx, "upload_file", map[string]any{"ref": ref, "files": []any{map[string]any{"name": "x"}}})
		var te *harness.ToolError
		if !asToolError(err, &te) || !strings.Contains(te.Text, "has none of content_base64, url and path") {
			t.Errorf("upload_file without content: %v", err)
		}
	})

	t.Run("drop", func(t *testing.T) {
		tool(t, ctx, c, "open", map[string]any{"url": site + "/dropzone"})
		got := text(t, ctx, c, "drop", map[string]any{"selector": "#zone", "files": []any{
			map[string]any{"name": "photo.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("dropped"))},
		}})
		if !strings.Contains(got, "Dropped photo.txt (7 bytes) on") {
			t.Errorf("drop = %q", got)
		}
		if got := text(t, ctx, c, "get_text", map[string]any{"selector": "#out"}); got != "photo.txt=dropped" {
			t.Errorf("the page read %q from the dropped file", got)
		}
		text(t, ctx, c, "drop", map[string]any{"selector": "#zone", "data": []any{map[string]any{"mime_type": "text/uri-list", "value": "https://example.com/"}}})
		if got := text(t, ctx, c, "get_text", map[string]any{"selector": "#out"}); got != "url=https://example.com/" {
			t.Errorf("the page read %q from the dropped URL", got)
		}
	})

	t.Run("downloads", func(t *testing.T) {
		tool(t, ctx, c, "open", map[string]any{"url": site + "/files"})
		if got := text(t, ctx, c, "click", map[string]any{"selector": "a"}); !strings.Contains(got, "downloaded report.csv, 22 bytes, as d1") {
			t.Fatalf("click on a download link = %q", got)
		}
		if got := text(t, ctx, c, "open", map[string]any{"url": site + "/logo.bin"}); !strings.Contains(got, "downloaded logo.bin, 8 bytes, as d2") {
			t.Fatalf("open of a file = %q", got)
		}
		if got := text(t, ctx, c, "download_list", nil); !strings.Contains(got, "d1 report.csv — completed") || !strings.Contains(got, "d2 logo.bin") {
			t.Errorf("download_list = %q", got)
		}
		if got := text(t, ctx, c, "download_get", map[string]any{"id": "d1"}); !strings.Contains(got, "quarter,revenue\nq1,42") {
			t.Errorf("download_get d1 = %q", got)
		}
		res := tool(t, ctx, c, "download_get", map[string]any{"id": "d2"})
		if len(res.Content) != 2 || res.Content[1].Type != "resource" {
			t.Errorf("download_get d2 = %+v, want a text and an embedded resource", res.Content)
		}
	})
}

// asToolError reports whether err is a *harness.ToolError, setting te.
func asToolError(err error, te **harness.ToolError) bool {
	e, ok := err.(*harness.ToolError)
	if ok {
		*te = e
	}
	return ok
}
