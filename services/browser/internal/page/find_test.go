package page

import (
	"fmt"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func findReq(find, ref string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Interactive: true, Compact: true, Find: find, Ref: ref}}}
}

// find shows only the lines of the full tree that hold the text (or match
// the regular expression), with the elements that hold them, on a page far
// bigger than the snapshot cap; bad expressions and overlong finds are
// refused, naming the argument.
func TestSnapshotFind(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`<!doctype html><title>Shop</title><main><h1>Catalog</h1><ul>`)
	for i := range 3000 {
		fmt.Fprintf(&b, `<li><article><h2>Item %d</h2><p>A plain thing, number %d.</p><button>Buy item %d</button></article></li>`, i, i, i)
	}
	b.WriteString(`<li><input type=checkbox> walk dog</li>`)
	b.WriteString(`</ul><footer><p>Shipping: free over 50 EUR</p></footer></main>`)
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": b.String()})
	must(t, tab, openReq(srv.URL))

	got := text(must(t, tab, findReq("shipping", "")))
	if !strings.HasPrefix(got, `# 1 line matches for find "shipping"`) || !strings.Contains(got, "Shipping: free over 50 EUR") ||
		!strings.Contains(got, "- main [ref=") {
		t.Fatalf("find shipping (the last element of a page far past the snapshot cap) =\n%s\nwant the line under its main", got)
	}
	if strings.Contains(got, "Item 7") {
		t.Errorf("find shipping shows unrelated items:\n%s", got)
	}

	got = text(must(t, tab, findReq(`/^- button "buy item 12\d\d"/`, "")))
	if !strings.Contains(got, "# 100 lines match") || !strings.Contains(got, "the first 50 shown") || !strings.Contains(got, `button "Buy item 1200" [ref=`) {
		t.Errorf("find by regex with 100 matches =\n%.600s\nwant 50 shown and the count", got)
	}

	if got := text(must(t, tab, findReq("no such words", ""))); !strings.Contains(got, `nothing on the page matches find "no such words"`) {
		t.Errorf("find with no match = %q", got)
	}
	// The control beside the text that matched comes with it.
	if got := text(must(t, tab, findReq("walk dog", ""))); !strings.Contains(got, "- checkbox [ref=") {
		t.Errorf("find walk dog =\n%s\nwant the checkbox of its list item too", got)
	}
	_, err := call(t, tab, findReq("/(unclosed/", ""))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "not a valid regular expression")
	_, err = call(t, tab, findReq(strings.Repeat("x", maxFind+1), ""))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "at most 1000")
}
