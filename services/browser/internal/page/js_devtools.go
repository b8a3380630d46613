package page

import "context"

// The page.js functions of the developer tools: computed styles, and the
// viewport that emulation sets (jscall.go says how Go calls them).

// computedStyles is what page.js's styles says.
type computedStyles struct {
	Desc   string            `json:"desc"`
	Values map[string]string `json:"values"`
	Gone   bool              `json:"gone"`
}

// jsStyles returns the computed values of the CSS properties props of the
// element e (page.js styles).
func jsStyles(ctx context.Context, e *elem, props []string) (computedStyles, error) {
	return callJSOn[computedStyles](ctx, e.obj, pageFn("styles"), props, e.prefix)
}

// jsViewport returns the main frame's viewport as "WxH" CSS pixels
// (page.js viewport).
func jsViewport(ctx context.Context, t *Tab) (string, error) {
	return callJS[string](ctx, t, t.frames.main(), pageFn("viewport"))
}
