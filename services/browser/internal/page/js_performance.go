package page

import "context"

// The page.js functions of the performance tools (jscall.go says how Go
// calls them).

// jsWebVitals reads the main frame's Web Vitals (page.js webVitals).
func jsWebVitals(ctx context.Context, t *Tab) (webVitals, error) {
	return callJS[webVitals](ctx, t, t.frames.main(), pageFn("webVitals"))
}
