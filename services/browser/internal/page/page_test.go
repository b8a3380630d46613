package page

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/chrome"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// The one Chromium of the test binary, started by the first test that
// needs it (chromium), so that the tests of pure code (perftrace_test.go,
// changes_test.go) run without one: go test -run 'TestAnalyzeTrace|...'.
var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserStop context.CancelFunc
	browserErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browserStop != nil {
		browserStop()
	}
	os.Exit(code)
}

// chromium returns the context of the test binary's Chromium, starting it
// on first use; without Chromium the test fails.
func chromium(tb testing.TB) context.Context {
	tb.Helper()
	browserOnce.Do(func() {
		var path string
		if path, browserErr = chrome.Find(""); browserErr == nil {
			browserCtx, browserStop, browserErr = chrome.Start(context.Background(), path)
		}
	})
	if browserErr != nil {
		tb.Fatalf("page tests need Chromium: %v", browserErr)
	}
	return browserCtx
}

// newTab opens a tab in a new browser context and returns its Tab.
func newTab(tb testing.TB, opts Options) *Tab {
	tb.Helper()
	ctx, cancel := chromedp.NewContext(chromium(tb), chromedp.WithNewBrowserContext())
	tb.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("open tab: %v", err)
	}
	return New(ctx, opts)
}

// serve serves pages by path; "/" is pages[""] when there is no "/".
func serve(tb testing.TB, pages map[string]string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { servePage(w, r, pages) }))
	tb.Cleanup(srv.Close)
	return srv
}

// servePage answers r with pages[r.URL.Path] as HTML, or 404.
func servePage(w http.ResponseWriter, r *http.Request, pages map[string]string) {
	body, ok := pages[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, body)
}

// call runs req on tab with a 15 s deadline.
func call(tb testing.TB, tab *Tab, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return tab.Do(ctx, req)
}

// must runs req and fails the test on an error.
func must(tb testing.TB, tab *Tab, req *browserv1.ToolRequest) *browserv1.ToolResult {
	tb.Helper()
	res, err := call(tb, tab, req)
	if err != nil {
		tb.Fatalf("%s: %v", toolName(req), err)
	}
	return res
}

// text returns the text parts of res.
func text(res *browserv1.ToolResult) string {
	var parts []string
	for _, c := range res.GetContent() {
		if s := c.GetText(); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// wantErr checks that err has code and that its message contains each of
// parts.
func wantErr(tb testing.TB, err error, code commonv1.ErrorCode, parts ...string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("err = nil, want %s", code)
	}
	if got := bus.CodeOf(err); got != code {
		tb.Fatalf("code = %s (%v), want %s", got, err, code)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			tb.Errorf("error %q does not contain %q", err.Error(), p)
		}
	}
}

// evalString runs script and returns its text result.
func evalString(tb testing.TB, tab *Tab, script string) string {
	tb.Helper()
	return text(must(tb, tab, evalReq(script)))
}

// Request builders.

func openReq(u string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: u}}}
}

func snapReq(interactive, compact bool) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Interactive: interactive, Compact: compact}}}
}

func evalReq(script string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: script}}}
}

func ref(r string) *browserv1.Element {
	return &browserv1.Element{By: &browserv1.Element_Ref{Ref: r}}
}

func sel(s string) *browserv1.Element {
	return &browserv1.Element{By: &browserv1.Element_Selector{Selector: s}}
}

func clickReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: el}}}
}

func hoverReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Hover{Hover: el}}
}

func focusReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Focus{Focus: el}}
}

func textReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetText{GetText: el}}
}

func htmlReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetHtml{GetHtml: el}}
}

func attrReq(el *browserv1.Element, name string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetAttr{GetAttr: &browserv1.GetAttr{Element: el, Attr: name}}}
}

func fillReq(el *browserv1.Element, v string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: el, Value: v}}}
}

func typeReq(el *browserv1.Element, v string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Element: el, Value: v}}}
}

func pressReq(key string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: key}}}
}

func scrollReq(dir string, amount int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Scroll{Scroll: &browserv1.Scroll{Direction: dir, Amount: amount}}}
}

func waitReq(ms int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Wait{Wait: &browserv1.Wait{Ms: ms}}}
}

func waitForReq(s string, ms int32) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: &browserv1.WaitFor{Selector: s, TimeoutMs: ms}}}
}

func shotReq(s *browserv1.Screenshot) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: s}}
}

var (
	backReq     = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Back{Back: &browserv1.NoArgs{}}}
	forwardReq  = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Forward{Forward: &browserv1.NoArgs{}}}
	reloadReq   = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Reload{Reload: &browserv1.NoArgs{}}}
	getURLReq   = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetUrl{GetUrl: &browserv1.NoArgs{}}}
	getTitleReq = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}
)

// refFor returns the ref of the first snapshot line that contains part.
func refFor(tb testing.TB, snapshot, part string) string {
	tb.Helper()
	for _, line := range strings.Split(snapshot, "\n") {
		if !strings.Contains(line, part) {
			continue
		}
		_, after, ok := strings.Cut(line, "[ref=")
		if !ok {
			continue
		}
		r, _, _ := strings.Cut(after, "]")
		return r
	}
	tb.Fatalf("no line with %q and a ref in snapshot:\n%s", part, snapshot)
	return ""
}

func TestSessionToolsAreRefused(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	for _, req := range []*browserv1.ToolRequest{
		{Tool: &browserv1.ToolRequest_Close{Close: &browserv1.NoArgs{}}},
		{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}},
		{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{}}},
		{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{}}},
		{Tool: &browserv1.ToolRequest_TabClose{TabClose: &browserv1.TabIndex{}}},
	} {
		t.Run(toolName(req), func(t *testing.T) {
			_, err := call(t, tab, req)
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, toolName(req), "session tool")
		})
	}
	t.Run("no_tool", func(t *testing.T) {
		_, err := call(t, tab, &browserv1.ToolRequest{})
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "names no tool")
	})
}

func TestNilRequest(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	_, err := call(t, tab, nil)
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "names no tool")
}

func TestClosedTab(t *testing.T) {
	t.Parallel()
	ctx, cancel := chromedp.NewContext(chromium(t), chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	tab := New(ctx, Options{})
	must(t, tab, openReq("about:blank"))
	if tab.Closed() {
		t.Fatal("Closed() = true for an open tab")
	}
	cancel()
	if !tab.Closed() {
		t.Error("Closed() = false after the tab context ended")
	}
	_, err := call(t, tab, getTitleReq)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "get_title", "this tab was closed")
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := tab.URL(ctx2); bus.CodeOf(err) != commonv1.ErrorCode_NOT_FOUND {
		t.Errorf("URL() of a closed tab: %v", err)
	}
}

// openAt opens a tab whose first and only page is u, as a link with
// target=_blank would: its history has one entry, so the page may close
// it with window.close() (Chromium refuses that to a page with more).
func openAt(tb testing.TB, u string) *Tab {
	tb.Helper()
	ctx, cancel := context.WithTimeout(chromium(tb), 10*time.Second)
	defer cancel()
	res, err := chromedp.CallBrowser(ctx, target.CreateTarget, target.CreateTargetParams{URL: u})
	if err != nil {
		tb.Fatalf("create target: %v", err)
	}
	tctx, tcancel := chromedp.NewContext(chromium(tb), chromedp.WithTargetID(res.TargetID))
	tb.Cleanup(tcancel)
	if err := chromedp.Do(tctx); err != nil {
		tb.Fatalf("attach to the tab: %v", err)
	}
	return New(tctx, Options{})
}

// waitClosed waits until tab.Closed() says true.
func waitClosed(tb testing.TB, tab *Tab) {
	tb.Helper()
	kittest.Eventually(tb, 30*time.Second, func() error {
		return kittest.Check(tab.Closed(), "Closed() stays false after the tab went away")
	})
}

// wantClosed checks that tools on tab fail with NOT_FOUND (not
// SESSION_LOST: the session and its other tabs still work) and say what
// to do, and fast.
func wantClosed(tb testing.TB, tab *Tab) {
	tb.Helper()
	start := time.Now()
	_, err := call(tb, tab, getTitleReq)
	wantErr(tb, err, commonv1.ErrorCode_NOT_FOUND, "get_title: this tab was closed (by the page, or its renderer crashed)", "tab_list", "tab_switch", "tab_new")
	_, err = call(tb, tab, evalReq("1 + 1"))
	wantErr(tb, err, commonv1.ErrorCode_NOT_FOUND, "eval: this tab was closed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tab.URL(ctx); bus.CodeOf(err) != commonv1.ErrorCode_NOT_FOUND {
		tb.Errorf("URL() of a closed tab: %v, want NOT_FOUND", err)
	}
	// Waiting on the closed tab would take the calls' deadlines (15 s);
	// 5 s leaves a loaded machine time for three answers.
	if d := time.Since(start); d > 5*time.Second {
		tb.Errorf("three calls on a closed tab took %v", d)
	}
}

func TestTabClosedByPage(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<title>Bye</title><button onclick="window.close()">Close</button>`})
	tab := openAt(t, srv.URL)
	if got := evalString(t, tab, `history.length`); got != "1" {
		t.Fatalf("history.length = %s, want 1 (else window.close() does nothing)", got)
	}
	if tab.Closed() {
		t.Fatal("Closed() = true before the page closed the tab")
	}
	// The click can return before or after the tab closes.
	if _, err := call(t, tab, clickReq(sel("button"))); err != nil {
		wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "this tab was closed")
	}
	waitClosed(t, tab)
	wantClosed(t, tab)
}

// TestTabGoneDuringTool: a tool that is running when its tab goes away —
// closed from outside, or its renderer crashed (the browser then answers
// no command) — ends at once with NOT_FOUND, not at its deadline.
func TestTabGoneDuringTool(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		breakTab func(t *testing.T, tab *Tab)
	}{
		{"target closed", func(t *testing.T, tab *Tab) {
			ctx, cancel := context.WithTimeout(chromium(t), 5*time.Second)
			defer cancel()
			id := chromedp.FromContext(tab.Context()).Target.TargetID
			if _, err := chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: id}); err != nil {
				t.Fatalf("close the target: %v", err)
			}
		}},
		{"renderer crashed", func(t *testing.T, tab *Tab) {
			ctx, cancel := context.WithTimeout(tab.Context(), 5*time.Second)
			go func() { defer cancel(); _, _ = chromedp.Call(ctx, page.Crash, cdp.Empty{}) }() // never answered
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab := newTab(t, Options{}) // its own browser context, so its own renderer
			srv := serve(t, map[string]string{"/": `<title>Doomed</title>`})
			must(t, tab, openReq(srv.URL))
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				_, err := tab.Do(ctx, waitForReq("#never", 10000))
				done <- err
			}()
			// Break the tab once wait_for runs (holds the tab).
			kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(len(tab.sem) > 0, "wait_for has not started") })
			tt.breakTab(t, tab)
			select {
			case err := <-done:
				wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "wait_for: this tab was closed")
			case <-time.After(5 * time.Second):
				t.Fatalf("wait_for still ran 5 s after its tab went away (%s)", tt.name)
			}
			waitClosed(t, tab)
			wantClosed(t, tab)
		})
	}
}
