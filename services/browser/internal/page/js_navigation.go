package page

import "context"

// The page.js functions of navigation, settling and waiting (jscall.go
// says how Go calls them).

// jsSettle waits in the main frame until its DOM has been quiet for quiet
// ms (page.js settle; see settle.go for the other arguments).
func jsSettle(ctx context.Context, t *Tab, quiet, max, after, since int64, first bool) (pageQuiet, error) {
	return callJS[pageQuiet](ctx, t, t.frames.main(), pageFn("settle"), quiet, max, after, since, first)
}

// jsTitle returns the main frame's document.title cut at max (page.js
// title).
func jsTitle(ctx context.Context, t *Tab, max int) (pageText, error) {
	return callJS[pageText](ctx, t, t.frames.main(), pageFn("title"), max)
}

// jsFind reports on the first element of the main frame that the CSS
// selector matches, nil when none does (page.js find).
func jsFind(ctx context.Context, t *Tab, selector string) (*found, error) {
	return callJS[*found](ctx, t, t.frames.main(), pageFn("find"), selector, "")
}

// jsHasText reports whether the main frame's visible text contains lower,
// a lower-case text (page.js hasText).
func jsHasText(ctx context.Context, t *Tab, lower string) (bool, error) {
	return callJS[bool](ctx, t, t.frames.main(), pageFn("hasText"), lower)
}
