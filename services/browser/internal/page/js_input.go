package page

import (
	"context"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
)

// The page.js and forms.js functions of the input tools: pointing,
// focusing, typing, scrolling, raw mouse actions and drags (jscall.go says
// how Go calls them).

// focusResult is what page.js's focus says.
type focusResult struct {
	Desc string `json:"desc"`
	OK   bool   `json:"ok"`
}

// jsPoint scrolls the element into view and says where to press it
// (page.js point).
func jsPoint(ctx context.Context, t *Tab, at elementAt) (pointInfo, error) {
	return callJSAt[pointInfo](ctx, t, at, pageFn("point"), at.prefix)
}

// jsPointOn is jsPoint for an element found before.
func jsPointOn(ctx context.Context, e *elem) (pointInfo, error) {
	return callJSOn[pointInfo](ctx, e.obj, pageFn("point"), e.prefix)
}

// jsFocus focuses the element (page.js focus).
func jsFocus(ctx context.Context, t *Tab, at elementAt) (focusResult, error) {
	return callJSAt[focusResult](ctx, t, at, pageFn("focus"), at.prefix)
}

// jsStartInput describes the element and gets it ready for fill or type
// (mode) with value (page.js startInput); mask hides what it shows.
func jsStartInput(ctx context.Context, t *Tab, at elementAt, value, mode string, mask bool) (inputPrep, error) {
	return callJSAt[inputPrep](ctx, t, at, pageFn("startInput"), at.prefix, value, mode, mask)
}

// jsStartInputOn is jsStartInput for an element found before.
func jsStartInputOn(ctx context.Context, e *elem, value, mode string, mask bool) (inputPrep, error) {
	return callJSOn[inputPrep](ctx, e.obj, pageFn("startInput"), e.prefix, value, mode, mask)
}

// jsFinishFill fires change on the field that the text went to in frame
// and reads back what it holds (page.js finishFill).
func jsFinishFill(ctx context.Context, t *Tab, frame cdp.FrameID) (filled, error) {
	return callJS[filled](ctx, t, frame, pageFn("finishFill"), nil, true)
}

// jsFinishFillOn is jsFinishFill for the field obj.
func jsFinishFillOn(ctx context.Context, obj runtime.RemoteObjectID) (filled, error) {
	return callJSOn[filled](ctx, obj, pageFn("finishFill"), true)
}

// jsScroll scrolls the page, or what scrolls in the middle of the
// viewport, by (dx, dy) CSS pixels (page.js scroll).
func jsScroll(ctx context.Context, t *Tab, dx, dy int) (scrolled, error) {
	return callJS[scrolled](ctx, t, t.frames.main(), pageFn("scroll"), dx, dy)
}

// jsProbe returns the viewport's size and what is at its point (x, y)
// (page.js probe).
func jsProbe(ctx context.Context, t *Tab, x, y float64) (viewportPoint, error) {
	return callJS[viewportPoint](ctx, t, t.frames.main(), pageFn("probe"), x, y)
}

// jsWatchDrag starts noting whether the page starts an HTML5 drag
// (forms.js watchDrag).
func jsWatchDrag(ctx context.Context, t *Tab) error {
	_, err := callJS[noResult](ctx, t, t.frames.main(), formsFn("watchDrag"))
	return err
}

// jsDragStarted reports whether the page started an HTML5 drag since
// jsWatchDrag (forms.js dragStarted).
func jsDragStarted(ctx context.Context, t *Tab) (bool, error) {
	r, err := callJS[struct {
		Started bool `json:"started"`
	}](ctx, t, t.frames.main(), formsFn("dragStarted"))
	return r.Started, err
}
