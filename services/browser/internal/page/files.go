package page

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// fileInput is what page.js says about the element upload_file names.
type fileInput struct {
	File     bool   `json:"file"`
	Multiple bool   `json:"multiple"`
	Disabled bool   `json:"disabled"`
	Desc     string `json:"desc"`
}

// uploadFile sets t.call.files on the file input that el names
// (DOM.setFileInputFiles: the page gets input and change events, as when a
// person picks files), then settles and reports like an action.
func (t *Tab) uploadFile(ctx context.Context, el *browserv1.Element) (*browserv1.ToolResult, error) {
	paths := t.call.files
	if len(paths) == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "upload_file needs at least one file in files")
	}
	e, err := t.resolve(ctx, el, "upload_file")
	if err != nil {
		return nil, err
	}
	t.madeObjects = true
	var in fileInput
	if err := callOn(ctx, e.obj, `function(p) {
		const file = this.tagName === 'INPUT' && (this.type || '').toLowerCase() === 'file';
		return {file, multiple: file && this.multiple, disabled: !!this.disabled, desc: __sov.describe(this, p)};
	}`, &in, e.prefix); err != nil {
		return nil, err
	}
	desc := t.noteDesc(in.Desc)
	switch {
	case !in.File:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"%s (%s) is not a file input; upload_file sets an <input type=file> (the snapshot shows one as a button \"Choose file: …\"; a click on a button that opens a file chooser names its input)", e.what, desc)
	case in.Disabled:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s (%s) is disabled", e.what, desc)
	case len(paths) > 1 && !in.Multiple:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s (%s) takes one file (it has no multiple attribute); you gave %d", e.what, desc, len(paths))
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	if _, err := chromedp.Call(ctx, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: e.obj}); err != nil {
		return nil, fmt.Errorf("set the files of the input: %w", err)
	}
	t.call.did = fmt.Sprintf("Set %s on %s", describeFiles(paths), desc)
	return t.acted(ctx, w, t.call.did)
}

// describeFiles says "report.pdf (12345 bytes)" or "2 files: a.txt (3
// bytes), b.txt (4 bytes)".
func describeFiles(paths []string) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		size := "?"
		if fi, err := os.Stat(p); err == nil {
			size = fmt.Sprint(fi.Size())
		}
		parts[i] = fmt.Sprintf("%s (%s bytes)", clipTo(filepath.Base(p), 200), size)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return fmt.Sprintf("%d files: %s", len(parts), strings.Join(parts, ", "))
}
