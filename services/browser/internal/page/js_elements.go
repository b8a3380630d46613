package page

import (
	"context"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
)

// The page.js functions of snapshots, refs and reading elements (jscall.go
// says how Go calls them).

// pageText is a text that the page cut at the length Go asked for: the
// part it kept and how long the whole text is.
type pageText struct {
	S     string `json:"s"`
	Total int    `json:"total"`
}

// jsEl returns the element with ref number n in frame (page.js el), "" when
// it is gone.
func jsEl(ctx context.Context, t *Tab, frame cdp.FrameID, n int64) (runtime.RemoteObjectID, error) {
	return objectJS(ctx, t, frame, pageFn("el"), n)
}

// jsQuery returns the first element of the main frame that the CSS
// selector matches (page.js query), "" when none does; a selector that is
// not CSS throws.
func jsQuery(ctx context.Context, t *Tab, selector string) (runtime.RemoteObjectID, error) {
	return objectJS(ctx, t, t.frames.main(), pageFn("query"), selector)
}

// jsDescribe returns the snapshot line of the element obj (page.js
// describe), giving it a ref when it has none.
func jsDescribe(ctx context.Context, obj runtime.RemoteObjectID, prefix string) (string, error) {
	return callJSOn[string](ctx, obj, pageFn("describe"), prefix)
}

// jsSnapshot snapshots the document of world (page.js snapshot); frames are
// the owner elements of its child frames, in the order of frameSnap's
// frame numbers.
func jsSnapshot(ctx context.Context, world runtime.ExecutionContextID, opts snapOpts, frames []*runtime.CallArgument) (frameSnap, error) {
	return callJSWith[frameSnap](ctx, world, pageFn("snapshot"), frames, opts)
}

// jsText returns the text of the element (page.js text), cut at max.
func jsText(ctx context.Context, t *Tab, at elementAt, max int) (pageText, error) {
	return callJSAt[pageText](ctx, t, at, pageFn("text"), max)
}

// jsHTML returns the innerHTML of the element (page.js html), cut at max.
func jsHTML(ctx context.Context, t *Tab, at elementAt, max int) (pageText, error) {
	return callJSAt[pageText](ctx, t, at, pageFn("html"), max)
}

// jsAttr returns the value of the element's attribute name (page.js attr),
// nil when it has none.
func jsAttr(ctx context.Context, t *Tab, at elementAt, name string) (*string, error) {
	return callJSAt[*string](ctx, t, at, pageFn("attr"), name)
}
