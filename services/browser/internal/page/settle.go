package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"go.opentelemetry.io/otel/attribute"
)

// Settling: one mechanism for every tool that can change the page (open,
// back, forward, reload, click, press, fill, type; tab_new opens a URL
// with open). After the action:
//
//  1. a navigation that the action started (a full one, or a hash or
//     pushState route) is followed until it committed and loaded;
//  2. then the page must be quiet: no network request of the tab is in
//     flight and the DOM has not changed for quietWindow, counted from
//     the later of the last request and the last change (one window, not
//     one for the network and then one for the DOM). The window is waited
//     for only when something happened after the action: a page that
//     changed its DOM during the action itself (it renders synchronously;
//     its microtasks ran), changed nothing more in the task after it (a
//     debounced render with setTimeout(0)) and sent no request returns at
//     once, one that did not react at once gets the frame after the
//     action (and the window when the DOM changed in it), and a route
//     change within the document always gets the window.
//
// Both steps together end at the settle budget (DefaultSettle, or the
// call's settle_ms; 0 skips step 2); a page that did not settle in time
// is not an error: the result says what was still pending.
const (
	// DefaultSettle is how long a tool waits for the page to settle when
	// the call does not say.
	DefaultSettle = 3 * time.Second
	// quietWindow is how long the network and the DOM must be quiet after
	// something happened.
	quietWindow = 50 * time.Millisecond
	// netPoll is how often settling looks at the network while requests
	// are in flight.
	netPoll = 10 * time.Millisecond
)

// activity is what the tab's event listener records about the page
// between and during tools: requests in flight, console errors, windows
// the page opened. Guarded by Tab.mu.
type activity struct {
	inflight map[network.RequestID]request
	started  int64     // requests seen since the tab began
	lastNet  time.Time // last request started or ended
	errors   int       // console errors since the tool began
	firstErr string
	opened   []string // URLs of windows the page opened since the tool began
}

// request is one request in flight.
type request struct {
	url   string
	start time.Time
}

// staleRequest is how long a request may be in flight before settling
// stops waiting for it: a long poll or a stream, or one whose end the
// browser never reported.
const staleRequest = 30 * time.Second

// maxInflight bounds the requests the tab tracks; past it the oldest are
// forgotten.
const maxInflight = 2000

// untracked are request types that stay open by design: they never
// count as in flight.
var untracked = map[network.ResourceType]bool{
	network.ResourceTypeWebSocket:   true,
	network.ResourceTypeEventSource: true,
}

// onActivity records network, console and window events (from onEvent,
// with t.mu held).
func (t *Tab) onActivity(ev any) {
	a := &t.act
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if untracked[ev.Type] || ev.Request == nil {
			return
		}
		if a.inflight == nil {
			a.inflight = map[network.RequestID]request{}
		}
		if _, ok := a.inflight[ev.RequestID]; !ok {
			a.started++
			if len(a.inflight) >= maxInflight {
				a.forgetStale(time.Now().Add(-staleRequest))
			}
		}
		a.inflight[ev.RequestID] = request{url: ev.Request.URL, start: time.Now()}
		a.lastNet = time.Now()
	case *network.EventLoadingFinished:
		if _, ok := a.inflight[ev.RequestID]; ok {
			delete(a.inflight, ev.RequestID)
			a.lastNet = time.Now()
		}
	case *network.EventLoadingFailed:
		if _, ok := a.inflight[ev.RequestID]; ok {
			delete(a.inflight, ev.RequestID)
			a.lastNet = time.Now()
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			a.noteError(consoleText(ev.Args))
		}
	case *runtime.EventExceptionThrown:
		if ev.ExceptionDetails != nil {
			a.noteError(exceptionText(ev.ExceptionDetails))
		}
	case *page.EventWindowOpen:
		if len(a.opened) < 20 {
			a.opened = append(a.opened, clipTo(ev.URL, maxURL))
		}
	}
}

// forgetStale drops the requests started before cutoff, or every request
// when that leaves too many.
func (a *activity) forgetStale(cutoff time.Time) {
	for id, r := range a.inflight {
		if r.start.Before(cutoff) {
			delete(a.inflight, id)
		}
	}
	if len(a.inflight) >= maxInflight {
		clear(a.inflight)
	}
}

func (a *activity) noteError(msg string) {
	if a.errors == 0 {
		a.firstErr = clipTo(firstLines(msg, 1), maxErrLine)
	}
	a.errors++
}

// consoleText joins the arguments of a console.error call as the console
// shows them (strings bare, other values by their description).
func consoleText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		switch {
		case a == nil:
		case a.Type == runtime.RemoteObjectTypeString && len(a.Value) > 0:
			var s string
			if err := json.Unmarshal(a.Value, &s); err == nil {
				parts = append(parts, s)
			}
		case a.Description != "":
			parts = append(parts, a.Description)
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		}
		if len(parts) > 8 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// netState returns the number of requests in flight, the first of their
// URLs, how many requests the tab has started and when the network was
// last busy.
func (t *Tab) netState() (n int, first string, started int64, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cutoff := time.Now().Add(-staleRequest)
	for _, r := range t.act.inflight {
		if r.start.Before(cutoff) {
			continue // a long poll or a stream: not waited for
		}
		n++
		if first == "" || r.url < first {
			first = r.url
		}
	}
	return n, first, t.act.started, t.act.lastNet
}

// settleResult is what settling saw.
type settleResult struct {
	// Navigated: the action started a navigation that committed (full or
	// within the document); Loading: it had not loaded when the wait
	// ended.
	Navigated, Loading bool
	// Timeout: the budget ran out before the page was quiet; Pending
	// says what was still going on.
	Timeout bool
	Pending string
	Waited  time.Duration
	// URL and Title of the page afterwards ("" when not read).
	URL, Title string
}

// pageQuiet is what page.js's settle says.
type pageQuiet struct {
	Changed  bool   `json:"changed"`
	QuietFor int64  `json:"quietFor"`
	URL      string `json:"url"`
	Title    string `json:"title"`
	TitleLen int    `json:"titleLen"`
}

// settle waits for the page to settle after an action (see the comment at
// the top of this file). w follows the navigation the action may have
// started; nav says that the tool itself navigated (open, back, forward,
// reload), so the navigation is known to have started. What it saw goes
// to t.call.settled for the change report.
func (t *Tab) settle(ctx context.Context, w *navWatch, nav bool) (r settleResult, err error) {
	start := time.Now()
	netMark := t.call.netMark
	ctx, span := startSpan(ctx, spanSettle)
	defer func() {
		span.SetAttributes(attribute.Bool("sovereign.navigation.committed", r.Navigated),
			attribute.Bool("sovereign.navigation.loaded", !r.Loading),
			attribute.Bool("sovereign.settle.timeout", r.Timeout))
		endSpan(span, err)
		t.call.settled = &r
	}()
	budget := t.call.settle
	end := softDeadline(ctx, budget)
	if budget == 0 {
		end = softDeadline(ctx, 0)
	}
	// 1. The navigation, if the action started one.
	if nav {
		w.markStarted()
		r.Loading = !w.wait(ctx, softDeadline(ctx, 0))
	} else {
		r.Loading = w.settle(ctx, flush, softDeadline(ctx, settleCap))
	}
	r.Navigated = w.isCommitted() || w.isSameDocument()
	if nav && r.Loading && !w.isCommitted() {
		return r, errNotLoaded
	}
	if budget == 0 || r.Loading || ctx.Err() != nil {
		r.Waited = time.Since(start)
		return r, nil
	}
	// 2. Quiet: the page's reaction to the action (the task or frame
	// after it), then, when anything happened, quietWindow without
	// requests or DOM changes, counted from the later of the two. After a
	// navigation that loaded, what counts is what happens from now on. A
	// route change within the document always waits for the window:
	// routers render from the hashchange or popstate handler, or a task
	// after it.
	if r.Navigated {
		_, _, netMark, _ = t.netState()
	}
	route := w.isSameDocument() && !w.isCommitted() || t.call.slowReaction
	for round := 0; ; round++ {
		left := time.Until(end)
		// How long ago the action's input went to the page (-1: none), so
		// the page can tell its reaction from what happened before.
		since := int64(-1)
		if !t.call.inputAt.IsZero() {
			since = time.Since(t.call.inputAt).Milliseconds()
		}
		after := int64(0)
		if round == 0 && route {
			after = quietWindow.Milliseconds()
		}
		_, _, startedBefore, _ := t.netState()
		q, err := jsSettle(ctx, t, quietWindow.Milliseconds(), max(left.Milliseconds(), 1), after, since, round == 0)
		changed := q.Changed
		if err != nil {
			if ctx.Err() != nil {
				return r, err
			}
			if !contextGone(err) && !isFrameGone(err) && !isJSError(err) {
				return r, err
			}
			// The page navigated during the wait: follow the new document.
			q, changed = pageQuiet{}, true
		}
		r.URL, r.Title = q.URL, q.Title
		n, first, started, last := t.netState()
		busy := n > 0 || started > netMark
		if round == 0 && !changed && !busy && !route {
			break // nothing happened after the action
		}
		// No request started while the page waited for its frame either.
		netQuiet := n == 0 && time.Since(last) >= quietWindow && started == startedBefore
		if netQuiet && err == nil && q.QuietFor >= quietWindow.Milliseconds() {
			break
		}
		if time.Now().After(end) {
			r.Timeout = true
			r.Pending = pending(n, first, err != nil || q.QuietFor < quietWindow.Milliseconds())
			break
		}
		// Wait for the network before asking the page again.
		for {
			n, _, _, last = t.netState()
			if (n == 0 && time.Since(last) >= quietWindow) || time.Now().After(end) {
				break
			}
			select {
			case <-time.After(netPoll):
			case <-ctx.Done():
				return r, ctx.Err()
			}
		}
	}
	r.Waited = time.Since(start)
	return r, nil
}

// errNotLoaded says that a navigation the tool started neither committed
// nor loaded before the request deadline.
var errNotLoaded = errors.New("the page did not load before the request deadline")

// pending describes what kept the page from settling.
func pending(requests int, first string, changing bool) string {
	var parts []string
	switch {
	case requests == 1:
		parts = append(parts, "1 request still in flight ("+clipTo(first, 200)+")")
	case requests > 1:
		parts = append(parts, fmt.Sprintf("%d requests still in flight (first: %s)", requests, clipTo(first, 200)))
	}
	if changing {
		parts = append(parts, "the page was still changing")
	}
	if len(parts) == 0 {
		parts = append(parts, "requests had only just finished")
	}
	return strings.Join(parts, "; ")
}
