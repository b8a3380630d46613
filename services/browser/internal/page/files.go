package page

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// fileInput is what page.js's fileInput says about the element upload_file names.
type fileInput struct {
	File     bool   `json:"file"`
	Multiple bool   `json:"multiple"`
	Disabled bool   `json:"disabled"`
	Desc     string `json:"desc"`
}

// filesHandlers are upload_file and drop, which the session runs through
// Upload once it has written their files.
var filesHandlers = map[string]handler{
	"upload_file": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.uploadFile(ctx, r.GetUploadFile().GetElement())
	},
	"drop": on((*browserv1.ToolRequest).GetDrop, (*Tab).dropOn),
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
	in, err := jsFileInput(ctx, e)
	if err != nil {
		return nil, err
	}
	desc := t.frames.noteDesc(in.Desc)
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
	t.call.slowReaction = true // the page reads the files off its main thread
	if _, err := chromedp.Call(ctx, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: e.obj}); err != nil {
		return nil, fmt.Errorf("set the files of the input: %w", err)
	}
	t.call.did = fmt.Sprintf("Set %s on %s", describeFiles(paths), desc)
	return t.acted(ctx, w, t.call.did)
}

// dropOn drops t.call.files and d's data on the element that d names, as
// if dragged there from outside the page (Input.dispatchDragEvent:
// dragenter, dragover, drop at its centre), then settles and reports like
// an action. A page whose drop zone did not take the drop (it did not
// cancel dragover) gets no drop event: the result cannot tell, so it says
// what was sent.
func (t *Tab) dropOn(ctx context.Context, d *browserv1.Drop) (*browserv1.ToolResult, error) {
	x, y, info, err := t.locate(ctx, d.GetElement(), "drop")
	if err != nil {
		return nil, err
	}
	dd := &input.DragData{Files: t.call.files, DragOperationsMask: 1} // copy
	var what []string
	if len(t.call.files) > 0 {
		what = append(what, describeFiles(t.call.files))
	}
	for _, item := range d.GetData() {
		dd.Items = append(dd.Items, &input.DragDataItem{MimeType: item.GetMimeType(), Data: item.GetValue()})
		what = append(what, fmt.Sprintf("%s (%s)", item.GetMimeType(), characters(len(item.GetValue()))))
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	t.call.inputAt = time.Now()
	t.call.did = fmt.Sprintf("Dropped %s on %s", strings.Join(what, " and "), t.frames.noteDesc(info.Desc))
	t.call.slowReaction = len(t.call.files) > 0 // the page reads the files off its main thread
	if err := t.dragEvents(ctx, dd, x, y); err != nil {
		return nil, err
	}
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

// A click on a file input (or a button whose script calls its click())
// would open a file chooser, which a headless browser cannot show. The tab
// intercepts them (Page.setInterceptFileChooserDialog, in init) and the
// result of the tool names the input, so the model calls upload_file.

// noteChooser records a file chooser the page opened. It runs in the
// event loop.
func (t *Tab) noteChooser(ev *page.EventFileChooserOpened) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.choosers) < maxChoosers {
		t.choosers = append(t.choosers, ev)
	}
}

// maxChoosers is how many file choosers one result names.
const maxChoosers = 4

// chooserNotes returns a line for each file chooser the page opened during
// the tool, naming its input by ref.
func (t *Tab) chooserNotes(ctx context.Context) []string {
	t.mu.Lock()
	evs := t.choosers
	t.choosers = nil
	t.mu.Unlock()
	var notes []string
	for _, ev := range evs {
		desc := "an input that is gone"
		if d, err := t.describeNode(ctx, ev.FrameID, ev.BackendNodeID); err == nil && d != "" {
			desc = "input " + d
		}
		how := "one file"
		if ev.Mode == page.FileChooserOpenedModeSelectMultiple {
			how = "one or more files"
		}
		notes = append(notes, fmt.Sprintf("a file chooser opened for %s (%s): call upload_file with its ref", desc, how))
	}
	return notes
}

// describeNode returns the snapshot line of the node with backend id n in
// frame, giving it a ref.
func (t *Tab) describeNode(ctx context.Context, frame cdp.FrameID, n cdp.BackendNodeID) (string, error) {
	var desc string
	err := t.frames.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		r, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: n, ExecutionContextID: world, ObjectGroup: objectGroup})
		if err != nil {
			return err
		}
		t.madeObjects = true
		prefix := ""
		if num := t.frames.num(frame); num > 0 {
			prefix = "f" + strconv.Itoa(num)
		}
		desc, err = jsDescribe(ctx, r.Object.ObjectID, prefix)
		return err
	})
	return t.frames.noteDesc(desc), err
}

// HasFrame reports whether frame is a frame of the tab (its main frame or
// one attached to it), for downloads, which name the frame that began
// them.
func (t *Tab) HasFrame(frame cdp.FrameID) bool { return t.frames.has(frame) }

// ClipURL cuts an address the page controls for messages.
func ClipURL(u string) string { return clipTo(u, maxURL) }
