package page

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// upload runs upload_file on el with files (name → content) written to a
// temporary directory, as the session does.
func upload(tb testing.TB, tab *Tab, el *browserv1.Element, files ...[2]string) (*browserv1.ToolResult, error) {
	tb.Helper()
	dir := tb.TempDir()
	var paths []string
	for i, f := range files {
		sub := filepath.Join(dir, string(rune('a'+i)))
		if err := os.Mkdir(sub, 0o700); err != nil {
			tb.Fatal(err)
		}
		p := filepath.Join(sub, f[0])
		if err := os.WriteFile(p, []byte(f[1]), 0o600); err != nil {
			tb.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return tab.Upload(ctx, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_UploadFile{UploadFile: &browserv1.UploadFile{Element: el}}}, paths)
}

const uploadPage = `<title>Upload</title>
<label>Resume <input type=file id=one></label>
<input type=file id=many multiple aria-label="Attachments">
<button id=btn>Not a file input</button>
<pre id=out></pre>
<script>
for (const id of ['one', 'many']) {
  document.getElementById(id).addEventListener('change', async (e) => {
    const parts = [];
    for (const f of e.target.files) parts.push(f.name + '=' + await f.text());
    document.getElementById('out').textContent = id + ': ' + parts.join(', ');
  });
}
</script>`

// TestUploadFile: the page sees the names and contents of the files that
// upload_file sets, and the snapshot reads a file input as a "Choose
// file" button with the chosen names as its value.
func TestUploadFile(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": uploadPage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))
	if !strings.Contains(snap, `button "Choose file: Resume"`) || !strings.Contains(snap, `button "Choose file: Attachments"`) {
		t.Errorf("snapshot of file inputs:\n%s", snap)
	}
	res, err := upload(t, tab, sel("#one"), [2]string{"cv.txt", "hello cv"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res); !strings.Contains(got, `Set cv.txt (8 bytes) on button "Choose file: Resume"`) {
		t.Errorf("upload_file = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("#out")))); got != "one: cv.txt=hello cv" {
		t.Errorf("the page saw %q", got)
	}
	if _, err := upload(t, tab, ref(refFor(t, snap, `"Choose file: Attachments"`)), [2]string{"a.txt", "A"}, [2]string{"a.txt", "second"}); err != nil {
		t.Fatal(err)
	}
	if got := text(must(t, tab, textReq(sel("#out")))); got != "many: a.txt=A, a.txt=second" {
		t.Errorf("the page saw %q", got)
	}
	if snap := text(must(t, tab, snapReq(true, true))); !strings.Contains(snap, `button "Choose file: Resume" [ref=e`) || !strings.Contains(snap, ": cv.txt") {
		t.Errorf("snapshot after the upload:\n%s", snap)
	}

	_, err = upload(t, tab, sel("#btn"), [2]string{"x.txt", "x"})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `selector "#btn" (button "Not a file input"`, "is not a file input")
	_, err = upload(t, tab, sel("#one"), [2]string{"x.txt", "x"}, [2]string{"y.txt", "y"})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "takes one file (it has no multiple attribute); you gave 2")
	_, err = upload(t, tab, sel("#one"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "needs at least one file")
	_, err = upload(t, tab, sel("#nothing"), [2]string{"x.txt", "x"})
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, `no element matches selector "#nothing"`)
}

// TestFileChooser: a click that would open a file chooser says which input
// it is for, by ref.
func TestFileChooser(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<title>Chooser</title>
<input type=file id=hidden multiple style="display:none">
<button onclick="document.getElementById('hidden').click()">Attach</button>
<label>Photo <input type=file id=photo></label>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, clickReq(sel("button")))
	if got := text(res); !strings.Contains(got, `- a file chooser opened for input button "Choose file" [ref=e`) ||
		!strings.Contains(got, "(one or more files): call upload_file with its ref") {
		t.Errorf("click on a button that opens a chooser = %q", got)
	}
	c := changesOf(t, res)
	if len(c.FileChoosers) != 1 {
		t.Errorf("changes.file_choosers = %v", c.FileChoosers)
	}
	// The ref it names works with upload_file.
	r := refFor(t, text(res), "file chooser opened")
	if _, err := upload(t, tab, ref(r), [2]string{"x.txt", "x"}); err != nil {
		t.Errorf("upload_file on the ref the chooser named: %v", err)
	}
	if got := text(must(t, tab, clickReq(sel("#photo")))); !strings.Contains(got, `file chooser opened for input button "Choose file: Photo"`) || !strings.Contains(got, "(one file)") {
		t.Errorf("click on a file input = %q", got)
	}
}
