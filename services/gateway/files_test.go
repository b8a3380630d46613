package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/gateway"
)

// TestUploadFileByPath: with the system tools on, upload_file takes a file
// of the workspace by path (the gateway reads it); a path out of the
// workspace is refused, and a gateway without system tools refuses paths.
func TestUploadFileByPath(t *testing.T) {
	t.Parallel()
	needChromium(t)
	workspace, outside := systemSetup(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "files1", 2)
	on := startGateway(t, srv, gateway.Config{SystemConfig: gateway.SystemConfig{SystemTools: "on", Workspace: workspace}})
	off := startGateway(t, srv, gateway.Config{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>up</title><input type=file><pre id=out></pre><script>
document.querySelector('input').addEventListener('change', async (e) => {
  const f = e.target.files[0];
  document.getElementById('out').textContent = f.name + '=' + await f.text();
});</script>`)
	}))
	t.Cleanup(site.Close)
	if err := os.MkdirAll(filepath.Join(workspace, "docs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "docs", "cv.txt"), []byte("from the workspace"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := modernClient(t, on, nil)
	r := callOK(t, c, "open", map[string]any{"url": site.URL})
	session := metaSession(r)
	if session == "" {
		t.Fatalf("open gave no session handle: %v", r.Meta)
	}
	r = callOK(t, c, "upload_file", map[string]any{"session": session, "selector": "input", "files": []any{map[string]any{"path": "docs/cv.txt"}}})
	if !strings.Contains(text(r), "Set cv.txt (18 bytes)") {
		t.Errorf("upload_file by path = %q", text(r))
	}
	r = callOK(t, c, "get_text", map[string]any{"session": session, "selector": "#out"})
	if text(r) != "cv.txt=from the workspace" {
		t.Errorf("the page read %q", text(r))
	}
	callFails(t, c, "upload_file", map[string]any{"session": session, "selector": "input",
		"files": []any{map[string]any{"path": filepath.Join(outside, "secret.txt")}}}, "upload_file: file 0")

	c2 := modernClient(t, off, nil)
	callFails(t, c2, "upload_file", map[string]any{"selector": "input", "files": []any{map[string]any{"path": "docs/cv.txt"}}},
		"names a path, but this gateway's system tools are off")
}

// TestAuditDialogsAndFiles: the audit record of a call that raised a
// dialog and of handle_dialog say which dialog and how it was answered;
// upload_file's record keeps the file's name, not its content.
func TestAuditDialogsAndFiles(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "files2", 2)
	url := startGateway(t, srv, gateway.Config{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>audit</title><input type=file>
<button onclick="this.textContent = 'answer ' + confirm('Delete account?')">Delete</button>`)
	}))
	t.Cleanup(site.Close)
	c := modernClient(t, url, nil)
	session := metaSession(callOK(t, c, "open", map[string]any{"url": site.URL}))
	callOK(t, c, "click", map[string]any{"session": session, "selector": "button"})
	callOK(t, c, "handle_dialog", map[string]any{"session": session, "accept": false})
	callOK(t, c, "upload_file", map[string]any{"session": session, "selector": "input",
		"files": []any{map[string]any{"name": "private.txt", "content_base64": "c2VjcmV0IGNvbnRlbnQ="}}})
	recs := auditRecords(t, srv, 4)
	if r := recs[1]; r.GetTool() != "click" || !strings.Contains(r.GetResult(), `a confirm dialog is open: "Delete account?"`) {
		t.Errorf("click's record: %s: %s", r.GetTool(), r.GetResult())
	}
	if r := recs[2]; r.GetTool() != "handle_dialog" || !strings.Contains(r.GetResult(), `Dismissed the confirm dialog "Delete account?"`) ||
		!strings.Contains(r.GetArguments(), `"accept":false`) {
		t.Errorf("handle_dialog's record: %s %s: %s", r.GetTool(), r.GetArguments(), r.GetResult())
	}
	if r := recs[3]; r.GetTool() != "upload_file" || strings.Contains(r.GetArguments(), "c2VjcmV0") || !strings.Contains(r.GetArguments(), "private.txt") {
		t.Errorf("upload_file's record keeps %s", r.GetArguments())
	}
}
