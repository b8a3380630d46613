package page

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// settleCap bounds how long click and press wait for a navigation that they
// started to load.
const settleCap = 10 * time.Second

// navHandlers are the navigation and waiting tools (wait.go).
var navHandlers = map[string]handler{
	"open": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.open(ctx, r.GetOpen().GetUrl())
	},
	"back": func(t *Tab, ctx context.Context, _ *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.history(ctx, -1)
	},
	"forward": func(t *Tab, ctx context.Context, _ *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.history(ctx, +1)
	},
	"reload":    noArgs((*Tab).reload),
	"get_url":   noArgs((*Tab).getURL),
	"get_title": noArgs((*Tab).getTitle),
	"wait": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return wait(ctx, r.GetWait().GetMs())
	},
	"wait_for": on((*browserv1.ToolRequest).GetWaitFor, (*Tab).waitFor),
}

// open navigates the tab to raw and waits for the page to load.
func (t *Tab) open(ctx context.Context, raw string) (*browserv1.ToolResult, error) {
	target, err := t.checkURL(raw)
	if err != nil {
		return nil, err
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	nctx, span := startSpan(ctx, spanNavigate)
	res, err := chromedp.Call(nctx, page.Navigate, page.NavigateParams{URL: target})
	if err == nil && res.ErrorText != "" {
		err = bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "could not open %s: %s", target, res.ErrorText)
	}
	if err == nil {
		span.SetAttributes(attribute.Bool("sovereign.navigation.same_document", res.LoaderID == ""),
			attribute.Bool("sovereign.navigation.download", res.IsDownload))
	}
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	if res.IsDownload {
		return textResult("%s is a download, not a page; the tab stays where it was", target), nil
	}
	if res.LoaderID == "" {
		w.finish() // same-document navigation, such as a new #fragment
	}
	return t.afterNav(ctx, w, "Opened", "open "+target)
}

// history goes delta entries back (-1) or forward (+1) in the tab's history.
func (t *Tab) history(ctx context.Context, delta int) (*browserv1.ToolResult, error) {
	h, err := chromedp.Call(ctx, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		return nil, err
	}
	i := int(h.CurrentIndex) + delta
	verb, tool := "Went back to", "back"
	if delta > 0 {
		verb, tool = "Went forward to", "forward"
	}
	if i < 0 || i >= len(h.Entries) {
		where := "earlier"
		if delta > 0 {
			where = "later"
		}
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "there is no %s page in this tab's history", where)
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	nctx, span := startSpan(ctx, spanNavigate)
	_, err = chromedp.Call(nctx, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: h.Entries[i].ID})
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	return t.afterNav(ctx, w, verb, tool)
}

// reload reloads the page, bypassing the cache.
func (t *Tab) reload(ctx context.Context) (*browserv1.ToolResult, error) {
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	nctx, span := startSpan(ctx, spanNavigate)
	_, err = chromedp.Call(nctx, page.Reload, page.ReloadParams{IgnoreCache: new(true)})
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	return t.afterNav(ctx, w, "Reloaded", "reload")
}

// afterNav waits for the navigation that w follows, then for the page to
// settle, and describes where the tab is now.
func (t *Tab) afterNav(ctx context.Context, w *navWatch, verb, what string) (res *browserv1.ToolResult, err error) {
	ctx, span := startSpan(ctx, spanLoad)
	defer func() { endSpan(span, err) }()
	r, err := t.settle(ctx, w, true)
	span.SetAttributes(attribute.Bool("sovereign.navigation.loaded", !r.Loading))
	if s := w.httpStatus(); s > 0 {
		span.SetAttributes(attribute.Int64("http.response.status_code", s))
	}
	if errors.Is(err, errNotLoaded) {
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s: the page did not load before the request deadline; the server may be slow or unreachable", what)
	}
	if err != nil {
		return nil, err
	}
	return t.whereNow(ctx, verb, w, !r.Loading)
}

// whereNow returns a result like `Opened http://x/ — title "X"`.
func (t *Tab) whereNow(ctx context.Context, verb string, w *navWatch, loaded bool) (*browserv1.ToolResult, error) {
	u, err := t.currentURL(ctx)
	if err != nil {
		return nil, err
	}
	var title string
	if loaded {
		if title, err = t.title(ctx); err != nil {
			title = ""
		}
	} else {
		// Still loading near the deadline: the browser's idea of the
		// title costs one round trip, not a world in a new document.
		title = t.targetTitle(ctx)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s — title %q", verb, u, title)
	if s := w.httpStatus(); s >= 400 {
		fmt.Fprintf(&b, " (HTTP %d)", s)
	}
	if !loaded {
		b.WriteString(" (still loading)")
	}
	return textResult("%s", b.String()), nil
}

// getURL returns the address of the page.
func (t *Tab) getURL(ctx context.Context) (*browserv1.ToolResult, error) {
	u, err := t.currentURL(ctx)
	if err != nil {
		return nil, err
	}
	return textResult("%s", u), nil
}

// getTitle returns the title of the page.
func (t *Tab) getTitle(ctx context.Context) (*browserv1.ToolResult, error) {
	if t.dialogs.open() != nil {
		return textResult("%s", t.targetTitle(ctx)), nil
	}
	s, err := t.title(ctx)
	if err != nil {
		return nil, err
	}
	return textResult("%s", s), nil
}

// currentURL returns the URL of the main frame, with its fragment. While a
// dialog is open it asks the browser (the frame tree may wait for the
// page).
func (t *Tab) currentURL(ctx context.Context) (string, error) {
	if t.dialogs.open() != nil {
		if info := t.targetInfo(ctx); info != nil {
			return info.URL, nil
		}
	}
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return "", err
	}
	f := tree.FrameTree.Frame
	t.frames.setMain(f.ID)
	return f.URL + f.URLFragment, nil
}

// targetTitle returns the title the browser knows for the tab, cut to
// maxTitle characters, or "".
func (t *Tab) targetTitle(ctx context.Context) string {
	info := t.targetInfo(ctx)
	if info == nil {
		return ""
	}
	return clipTo(info.Title, maxTitle)
}

// targetInfo returns what the browser knows about the tab (its address
// and title, also while a dialog freezes the page), or nil.
func (t *Tab) targetInfo(ctx context.Context) *target.Info {
	c := chromedp.FromContext(t.ctx)
	if c == nil || c.Target == nil {
		return nil
	}
	info, err := chromedp.CallBrowser(ctx, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: c.Target.TargetID})
	if err != nil {
		return nil
	}
	return info.TargetInfo
}

// title returns document.title of the main frame, read in the isolated
// world so that the page cannot fake it.
func (t *Tab) title(ctx context.Context) (string, error) {
	room := readRoom(maxTitle)
	r, err := jsTitle(ctx, t, room)
	if err != nil {
		return "", err
	}
	text, cut := cutRead(r.S, maxTitle, r.Total > room)
	if cut {
		text += fmt.Sprintf("… (%d more characters)", r.Total-utf8.RuneCountInString(text))
	}
	return text, nil
}

// checkURL validates raw for open and returns the URL to navigate to.
func (t *Tab) checkURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "open needs a url, such as https://example.com")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url %q is not valid: %v", raw, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" || (u.Opaque != "" && u.Opaque[0] >= '0' && u.Opaque[0] <= '9') {
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url %q has no scheme; use a full URL such as https://%s", raw, strings.TrimPrefix(raw, "//"))
	}
	if !t.allowed[scheme] {
		return "", bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"open refuses %s: URLs: the scheme %q is not allowed on this worker (allowed: %s); an operator can allow it with --allow-scheme %s or SOVEREIGN_ALLOW_SCHEMES=%s",
			scheme, scheme, t.allowedList(), scheme, scheme)
	}
	switch scheme {
	case "about":
		// Chromium maps other about: pages to chrome: pages.
		if !strings.EqualFold(raw, "about:blank") && !t.allowed["chrome"] {
			return "", bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "open allows only about:blank among about: URLs (%s would open a chrome: page, which is not allowed)", raw)
		}
	case "http", "https":
		if u.Host == "" {
			return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url %q has no host; use a full URL such as https://example.com/path", raw)
		}
	}
	return raw, nil
}

// allowedList returns the allowed schemes for messages.
func (t *Tab) allowedList() string {
	s := make([]string, 0, len(t.allowed))
	for k := range t.allowed {
		if k == "about" {
			k = "about (about:blank)"
		}
		s = append(s, k)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// normScheme returns s in lower case without a trailing colon.
func normScheme(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ":")
}

// softDeadline returns when a wait inside a tool should give up, so that
// the tool still answers before ctx's deadline: a tenth of the time left
// (at least 100 ms, at most a second) before it, and no later than limit
// from now when limit is not zero.
func softDeadline(ctx context.Context, limit time.Duration) time.Time {
	now := time.Now()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = now.Add(DefaultTimeout)
	}
	margin := min(max(dl.Sub(now)/10, 100*time.Millisecond), time.Second)
	soft := dl.Add(-margin)
	if limit > 0 && now.Add(limit).Before(soft) {
		soft = now.Add(limit)
	}
	return soft
}

// navWatch follows the main frame through one navigation. Its observe
// method runs in the tab's event loop, in order.
type navWatch struct {
	mu        sync.Mutex
	main      cdp.FrameID
	started   bool
	committed bool
	sameDoc   bool
	// navigating: the frame started a navigation since the watch began;
	// loading: it started loading after that.
	navigating, loading bool
	status              int64
	done                chan struct{}
	closed              bool
}

// watchNav starts to follow navigations of the main frame. Call stop when
// done.
func (t *Tab) watchNav(ctx context.Context) (w *navWatch, stop func(), err error) {
	w = &navWatch{main: t.frames.main(), done: make(chan struct{})}
	lctx, cancel := context.WithCancel(ctx)
	if err := chromedp.Listen(lctx, w.observe); err != nil {
		cancel()
		return nil, nil, err
	}
	return w, cancel, nil
}

func (w *navWatch) observe(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev := ev.(type) {
	case *page.EventFrameRequestedNavigation:
		if ev.FrameID == w.main && ev.Disposition == page.ClientNavigationDispositionCurrentTab {
			w.started = true
		}
	case *page.EventFrameStartedNavigating:
		if ev.FrameID == w.main {
			w.started, w.navigating = true, true
		}
	case *page.EventFrameStartedLoading:
		if ev.FrameID == w.main {
			w.started = true
			w.loading = w.loading || w.navigating
		}
	case *page.EventNavigatedWithinDocument:
		if ev.FrameID == w.main {
			w.sameDoc = true
			w.finishLocked()
		}
	case *page.EventFrameNavigated:
		if ev.Frame.ParentID == "" {
			w.main = ev.Frame.ID
			w.started, w.committed = true, true
			if ev.Type == page.NavigationTypeBackForwardCacheRestore {
				w.finishLocked()
			}
		}
	case *network.EventResponseReceived:
		if ev.Type == network.ResourceTypeDocument && ev.FrameID == w.main && ev.Response != nil {
			w.status = ev.Response.Status
		}
	case *page.EventLoadEventFired:
		if w.committed {
			w.finishLocked()
		}
	case *page.EventFrameStoppedLoading:
		// Only the end of a load that this navigation started: a new tab's
		// first about:blank may stop loading after the navigation began.
		// A navigation that commits nothing (a 204) ends here too.
		if ev.FrameID == w.main && (w.committed || w.loading) {
			w.finishLocked()
		}
	}
}

func (w *navWatch) finish() {
	w.mu.Lock()
	w.finishLocked()
	w.mu.Unlock()
}

func (w *navWatch) finishLocked() {
	if !w.closed {
		w.closed = true
		close(w.done)
	}
}

// markStarted records that the caller started a navigation itself.
func (w *navWatch) markStarted() {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
}

func (w *navWatch) isStarted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

func (w *navWatch) isCommitted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed
}

func (w *navWatch) isSameDocument() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sameDoc
}

func (w *navWatch) httpStatus() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// wait waits until the navigation has loaded (true), or until soft or the
// end of ctx (false).
func (w *navWatch) wait(ctx context.Context, soft time.Time) bool {
	timer := time.NewTimer(time.Until(soft))
	defer timer.Stop()
	select {
	case <-w.done:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// settle waits, after an action such as a click or a key press, for the
// navigation that the action started, if any. It reports whether the page
// is still loading when it gives up.
//
// flush makes one round trip to the page. The renderer reports a
// navigation that the action requested (a link, a form, a handler setting
// location) before it answers a later command, and the tab's listeners see
// events in order, so after the round trip started is known: no fixed
// grace period, and an action that navigates nowhere returns at once.
func (w *navWatch) settle(ctx context.Context, flush func(context.Context) error, soft time.Time) (stillLoading bool) {
	select {
	case <-w.done:
		return false
	default:
	}
	// A failed round trip (the context went away with a navigation) still
	// leaves started set by then.
	if _ = flush(ctx); ctx.Err() != nil || !w.isStarted() {
		return false
	}
	return !w.wait(ctx, soft)
}

// flush is a round trip to the page's main world (see navWatch.settle).
func flush(ctx context.Context) error {
	_, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: "0"})
	return err
}
