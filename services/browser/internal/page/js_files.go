package page

import "context"

// The page.js functions of files and dialogs (jscall.go says how Go calls
// them).

// jsFileInput says whether the element e is a file input that upload_file
// can set (page.js fileInput).
func jsFileInput(ctx context.Context, e *elem) (fileInput, error) {
	return callJSOn[fileInput](ctx, e.obj, pageFn("fileInput"), e.prefix)
}
