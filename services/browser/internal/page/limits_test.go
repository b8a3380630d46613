package page

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// maxChars sets the character cap of req.
func maxChars(req *browserv1.ToolRequest, n int32) *browserv1.ToolRequest {
	req.MaxChars = n
	return req
}

// TestBoundedResults is the hostile page of the issue: a huge title, a
// huge body and a huge eval value give results within their caps, with a
// marker that says what was cut.
func TestBoundedResults(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><div id=big></div><script>
document.title = 'T'.repeat(20 * 1024 * 1024);
document.getElementById('big').textContent = 'x'.repeat(5 * 1024 * 1024);
</script>`})
	tab := newTab(t, Options{})
	res := must(t, tab, openReq(srv.URL))
	if n := len(text(res)); n > maxTitle+maxURL+200 {
		t.Errorf("open result has %d bytes", n)
	}
	title := text(must(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}))
	if utf8.RuneCountInString(title) > maxTitle+50 || !strings.Contains(title, "more characters)") {
		t.Errorf("get_title of a 20 MB title: %d characters, ends %q", utf8.RuneCountInString(title), title[max(0, len(title)-60):])
	}
	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
		cap  int
	}{
		{"get_html", htmlReq(sel("body")), DefaultTextChars},
		{"get_text", textReq(sel("#big")), DefaultTextChars},
		{"get_text_max_chars", maxChars(textReq(sel("#big")), 100), 100},
		{"eval", evalReq(`'y'.repeat(3000000)`), DefaultTextChars},
		{"snapshot_max_chars", maxChars(snapReq(false, true), 500), 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := text(must(t, tab, tc.req))
			body, marker, ok := strings.Cut(got, "\n[")
			if !ok || !strings.Contains(marker, "cut at") {
				t.Fatalf("result of %d characters has no cut marker; ends %q", utf8.RuneCountInString(got), got[max(0, len(got)-100):])
			}
			if n := utf8.RuneCountInString(body); n > tc.cap {
				t.Errorf("%d characters before the marker, cap %d", n, tc.cap)
			}
			if len(marker) > 400 {
				t.Errorf("marker of %d bytes: %q", len(marker), marker)
			}
		})
	}
	// The page's text is cut inside the snapshot too.
	if n := utf8.RuneCountInString(text(must(t, tab, snapReq(false, true)))); n > DefaultSnapshotChars {
		t.Errorf("snapshot of %d characters", n)
	}
	// The structured value of eval goes with its text.
	res = must(t, tab, evalReq(`'y'.repeat(3000000)`))
	if len(string(structured.JSON(res.GetStructured()))) > 200 {
		t.Errorf("eval's structured result has %d bytes", len(string(structured.JSON(res.GetStructured()))))
	}
}

// TestHugeSnapshot: a page of 100,000 buttons gives a bounded snapshot
// within the deadline (the walk stops early and says so).
func TestHugeSnapshot(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><div id=root></div><script>
const root = document.getElementById('root'); const f = document.createDocumentFragment();
for (let i = 0; i < 100000; i++) { const b = document.createElement('button'); b.textContent = 'B' + i; f.appendChild(b); }
root.appendChild(f);
</script>`})
	tab := newTab(t, Options{})
	// Making the buttons takes the page a while on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := tab.Do(ctx, openReq(srv.URL)); err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tab.Do(ctx, snapReq(true, true))
	if err != nil {
		t.Fatalf("snapshot of a huge page: %v", err)
	}
	got := text(res)
	if n := utf8.RuneCountInString(got); n > DefaultSnapshotChars+500 {
		t.Errorf("snapshot of %d characters", n)
	}
	if !strings.Contains(got, "[snapshot") || !strings.Contains(got, "ref=") {
		t.Errorf("snapshot of a huge page has no marker; ends %q", got[max(0, len(got)-300):])
	}
	// A short deadline: the walk stops at it and the result says so, or
	// the call fails with TIMEOUT, never later than the deadline.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err = tab.Do(ctx, maxChars(snapReq(true, true), MaxChars))
	if err != nil {
		wantErr(t, err, commonv1.ErrorCode_TIMEOUT)
	} else if got := text(res); !strings.Contains(got, "too large to snapshot before the request deadline") && !strings.Contains(got, "[snapshot") {
		t.Errorf("a snapshot at a short deadline ends %q", got[max(0, len(got)-300):])
	}
}

// TestSnapshotRefAndMaxChars: ref shows one subtree; max_chars cuts at a
// line with a marker that names a ref to ask for.
func TestSnapshotRefAndMaxChars(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html>
<nav aria-label="Top"><a href="/a">A</a><a href="/b">B</a></nav>
<ul aria-label="Todos">
<li><input type=checkbox><label>walk dog</label><button class=destroy></button></li>
<li><input type=checkbox checked><label>buy milk</label><button class=destroy></button></li>
</ul>
<h2>Settings</h2><div><input type=checkbox></div>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	full := text(must(t, tab, snapReq(true, true)))
	for _, want := range []string{`- checkbox "walk dog" [ref=`, `- checkbox "buy milk" [checked] [ref=`, `- button "walk dog" [ref=`, `- checkbox "Settings" [ref=`} {
		if !strings.Contains(full, want) {
			t.Errorf("interactive snapshot lacks %q:\n%s", want, full)
		}
	}
	// The full tree keeps its text instead.
	if tree := text(must(t, tab, snapReq(false, true))); strings.Contains(tree, `checkbox "walk dog"`) {
		t.Errorf("the full tree names controls by context:\n%s", tree)
	}

	list := refFor(t, text(must(t, tab, snapReq(false, true))), `list "Todos"`)
	req := snapReq(true, true)
	req.GetSnapshot().Ref = list
	sub := text(must(t, tab, req))
	if !strings.Contains(sub, "walk dog") || strings.Contains(sub, `link "A"`) || strings.Contains(sub, "Settings") {
		t.Errorf("snapshot of ref %s:\n%s", list, sub)
	}
	req.GetSnapshot().Ref = "e9999"
	_, err := call(t, tab, req)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "e9999")

	cut := text(must(t, tab, maxChars(snapReq(true, true), 60)))
	head, marker, ok := strings.Cut(cut, "[snapshot cut at max_chars=60:")
	if !ok || len(head) > 61 || !strings.Contains(marker, "they start at ref e") || !strings.Contains(marker, "more lines") {
		t.Errorf("snapshot with max_chars 60:\n%s", cut)
	}
	var m struct {
		Truncated bool `json:"truncated"`
	}
	res := must(t, tab, maxChars(snapReq(true, true), 60))
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), &m); err != nil || !m.Truncated {
		t.Errorf("structured result of a cut snapshot = %s", string(structured.JSON(res.GetStructured())))
	}
}

// TestReloadLoop: a page that reloads itself without end never surfaces
// "Cannot find context with specified id": tools answer, or fail with
// "the page navigated while …".
func TestReloadLoop(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><title>Loop</title><button>B</button><script>setTimeout(() => location.reload(), 5)</script>`})
	tab := newTab(t, Options{})
	if _, err := call(t, tab, settleMs(openReq(srv.URL), 0)); err != nil {
		wantNavigated(t, err)
	}
	for i := 0; i < 15; i++ {
		for _, req := range []*browserv1.ToolRequest{
			snapReq(true, true),
			{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}},
			textReq(sel("button")),
		} {
			if _, err := call(t, tab, req); err != nil {
				wantNavigated(t, err)
			}
		}
	}
}

func wantNavigated(t *testing.T, err error) {
	t.Helper()
	be, ok := err.(*bus.Error)
	if !ok {
		t.Fatalf("err = %v (%T), want a *bus.Error", err, err)
	}
	if strings.Contains(strings.ToLower(be.Message), "context") || be.Code == commonv1.ErrorCode_INTERNAL {
		t.Errorf("err = %v %q", be.Code, be.Message)
	}
}

func TestCutLinesAndDiff(t *testing.T) {
	t.Parallel()
	lines := []string{`- list [ref=e1]:`, `  - checkbox "a" [ref=e2]`, `  - checkbox "b" [ref=e3]`, `- button "x" [ref=e4]`}
	got, cut := cutLines(lines, 45)
	if !cut || !strings.HasPrefix(got, lines[0]+"\n"+lines[1]+"\n[snapshot cut") || !strings.Contains(got, "they start at ref e3 inside ref e1") {
		t.Errorf("cutLines = %q", got)
	}
	if got, cut := cutLines(lines, 1000); cut || got != strings.Join(lines, "\n") {
		t.Errorf("cutLines under the cap = %q, %v", got, cut)
	}
	d := diffSnapshots(lines, []string{`- list [ref=e1]:`, `  - checkbox "a" [checked] [ref=e2]`, `- button "x" [ref=e4]`, `- text: hi`})
	for _, want := range []string{`~   - checkbox "a" [checked] [ref=e2]`, `-   - checkbox "b" [ref=e3]`, `+ - text: hi`} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, `button "x"`) {
		t.Errorf("diff shows an unchanged line:\n%s", d)
	}
	if d := diffSnapshots(lines, lines); d != "(snapshot unchanged since the last one)" {
		t.Errorf("diff of equal snapshots = %q", d)
	}
}

// TestDiffIsBounded: snapshot "diff" after an action is cut at max_chars
// like a snapshot.
func TestDiffIsBounded(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<!doctype html><button id=add onclick="for (let i = 0; i < 300; i++) { const b = document.createElement('button'); b.textContent = 'Button number ' + i; document.body.appendChild(b); }">Add</button>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	must(t, tab, snapReq(true, true))
	req := maxChars(clickReq(sel("#add")), 1000)
	req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF
	res := must(t, tab, req)
	diff := res.GetContent()[1].GetText()
	body, marker, ok := strings.Cut(diff, "[snapshot cut at max_chars=1000:")
	if !ok || len(body) > 1000 || !strings.Contains(marker, "more lines") || !strings.Contains(body, `+ - button "Button number 0"`) {
		t.Errorf("diff of 300 new buttons with max_chars 1000:\n%s", diff)
	}
}
