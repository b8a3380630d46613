package page

import "context"

// The forms.js functions of the form and reading tools: select_option,
// check and get_markdown (jscall.go says how Go calls them).

// markdownText is what forms.js's markdown says: the Markdown cut at the
// length Go asked for, and whether the walk stopped before the end.
type markdownText struct {
	pageText
	More bool `json:"more"`
}

// jsSelectOptions selects the options of the select element that values
// name (forms.js selectOptions).
func jsSelectOptions(ctx context.Context, t *Tab, at elementAt, values []string) (selectResult, error) {
	return callJSAt[selectResult](ctx, t, at, formsFn("selectOptions"), values, at.prefix)
}

// jsCheckState says what kind of toggle the element is and whether it is
// checked (forms.js checkState).
func jsCheckState(ctx context.Context, t *Tab, at elementAt) (toggleState, error) {
	return callJSAt[toggleState](ctx, t, at, formsFn("checkState"), at.prefix)
}

// jsCheckSettled is jsCheckState once the toggle shows want, or after
// frames turns of 16 ms (forms.js checkSettled).
func jsCheckSettled(ctx context.Context, t *Tab, at elementAt, want bool, frames int) (toggleState, error) {
	return callJSAt[toggleState](ctx, t, at, formsFn("checkSettled"), at.prefix, want, frames)
}

// jsToggle clicks the toggle with a synthetic click (forms.js toggle).
func jsToggle(ctx context.Context, t *Tab, at elementAt) error {
	_, err := callJSAt[noResult](ctx, t, at, formsFn("toggle"))
	return err
}

// jsMarkdown renders the element, or the main frame's page when at is
// nil, as Markdown cut at max (forms.js markdown).
func jsMarkdown(ctx context.Context, t *Tab, at *elementAt, max int) (markdownText, error) {
	if at == nil {
		return callJS[markdownText](ctx, t, t.frames.main(), formsFn("markdown"), nil, max)
	}
	return callJSAt[markdownText](ctx, t, *at, formsFn("markdown"), max)
}
