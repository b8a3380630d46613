// Package guard enforces URL policies in a worker's Chromium, and gives
// browser contexts that ask for it a CDP session of their own to each of
// their pages before it runs (Hooks, hooks.go: window.nostr uses it).
//
// How each kind of request is covered (each verified in Chromium by the
// worker's policy tests and guard_test.go):
//
//   - HTTP(S) requests of every target of a protected browser context —
//     navigations and each redirect hop, frames (site isolation is off, so
//     iframes belong to their page's target), subresources, fetch/XHR,
//     dedicated workers' requests (they go through their page's target)
//     and service workers (targets of their own) — pause in the CDP Fetch
//     domain, enabled on a guard session of the target, and go on or fail
//     with net::ERR_BLOCKED_BY_CLIENT.
//   - New targets (the session's own tabs, popups from window.open and
//     noopener ones from target=_blank, service workers) are held before
//     their first request: while a context is protected, the browser
//     auto-attaches every new target with waitForDebuggerOnStart, and the
//     guard enables Fetch on that session before it sends
//     Runtime.runIfWaitingForDebugger on it. Only that session releases a
//     noopener popup (its first navigation waits in the browser); neither
//     a detach nor another session's command does.
//   - WebSockets: neither Fetch nor Network.setBlockedURLs sees the
//     handshake. A protected context is created with a SOCKS5 proxy of its
//     own for WebSockets only (http and https go direct), which checks the
//     host and port and connects to the address it checked.
//
// The guard's sessions are flat sessions that chromedp does not know:
// chromedp drops the messages of sessions it did not attach itself, so
// the guard wraps the connection (Wrap) and takes its sessions' messages
// out of it before chromedp reads them.
package guard

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// Guard enforces the policies of the protected browser contexts of one
// Chromium. Browser contexts that are not protected cost nothing while no
// context is protected, and one round trip per new target while some
// other context is.
type Guard struct {
	log  *slog.Logger
	dns  resolver
	mux  *mux
	next atomic.Int64 // ids of the guard's commands

	browser context.Context // the chromedp browser context, once bound

	mu       sync.RWMutex // read on every message of the connection
	contexts map[cdp.BrowserContextID]*Context
	hooks    map[cdp.BrowserContextID]Hooks // hooks.go
	sessions map[target.SessionID]*session
	auto     bool // browser-level auto-attach is on (written under autoMu)

	autoMu sync.Mutex // held across a change of auto and its CDP command
}

// New returns a guard. Wrap its connection to Chromium with Wrap, and
// Bind it to the browser once started.
func New(log *slog.Logger) *Guard {
	g := &Guard{log: log, contexts: make(map[cdp.BrowserContextID]*Context), hooks: make(map[cdp.BrowserContextID]Hooks),
		sessions: make(map[target.SessionID]*session)}
	// Replies to the guard's commands come on its own sessions, so ids
	// need not differ from chromedp's; Chromium takes 32-bit ids only.
	g.next.Store(1 << 30)
	return g
}

// Wrap returns the connection chromedp should use: t, with the guard's
// sessions taken out of it.
func (g *Guard) Wrap(t chromedp.Transport) chromedp.Transport {
	g.mux = &mux{Transport: t, g: g}
	return g.mux
}

// Bind ties the guard to the chromedp browser context of the Chromium
// whose connection it wraps.
func (g *Guard) Bind(browser context.Context) { g.browser = browser }

func (g *Guard) session(id target.SessionID) *session {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.sessions[id]
}

// claimAuto registers a session that the browser (or, for an
// out-of-process iframe, the guard's session to its page) auto-attached:
// it takes the roles that the target's browser context has.
func (g *Guard) claimAuto(id target.SessionID, info *target.Info, parent *session) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	var c *Context
	if guardedType(info.Type) {
		c = g.contexts[info.BrowserContextID]
	}
	return g.claimLocked(id, info, parent, c, g.hooks[info.BrowserContextID])
}

// claim registers a session that the guard attached to a running target
// for one role: the policy c or the hooks h.
func (g *Guard) claim(id target.SessionID, info *target.Info, c *Context, h Hooks) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.claimLocked(id, info, nil, c, h)
}

func (g *Guard) claimLocked(id target.SessionID, info *target.Info, parent *session, c *Context, h Hooks) *session {
	s := &session{id: id, target: info.TargetID, g: g, ctx: c, parent: parent,
		pending: make(map[int64]chan *cdproto.Message), gone: make(chan struct{})}
	if h != nil && hookedType(info.Type) {
		t := &Target{ID: info.TargetID, Type: info.Type, bcid: info.BrowserContextID, s: s, hooks: h}
		if parent != nil {
			t.Parent = parent.hooked()
		}
		s.hook = t
	}
	g.sessions[id] = s
	return s
}

// drop forgets the session id (its target went away or was detached),
// and the sessions of its out-of-process iframes with it.
func (g *Guard) drop(id target.SessionID) {
	g.mu.Lock()
	s := g.sessions[id]
	delete(g.sessions, id)
	var children []target.SessionID
	for cid, c := range g.sessions {
		if s != nil && c.parent == s {
			children = append(children, cid)
		}
	}
	g.mu.Unlock()
	if s == nil {
		return
	}
	for _, cid := range children {
		g.drop(cid)
	}
	s.close()
	if t := s.hooked(); t != nil {
		t.hooks.Detached(t)
	}
}

// Protect starts to enforce c on the browser context bcid: on its targets
// that exist now, and on every target it opens later, before that target's
// first request. Call it right after creating the context, before its
// first tab, for nothing to go out unchecked.
func (g *Guard) Protect(ctx context.Context, bcid cdp.BrowserContextID, c *Context) error {
	if g.browser == nil || g.mux == nil {
		return fmt.Errorf("the url policy guard is not connected to Chromium")
	}
	c.bcid = bcid
	ctx, cancel := within(g.browser, ctx)
	defer cancel()
	g.mu.Lock()
	g.contexts[bcid] = c
	g.mu.Unlock()
	if err := g.syncAuto(ctx); err != nil {
		return fmt.Errorf("hold new targets for the URL policy: %w", err)
	}
	infos, err := chromedp.CallBrowser(ctx, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return fmt.Errorf("list the targets to protect: %w", err)
	}
	for _, info := range infos.TargetInfos {
		if info.BrowserContextID != bcid || !guardedType(info.Type) || g.guarded(info.TargetID) {
			continue
		}
		if err := g.attach(ctx, info, c); err != nil {
			return fmt.Errorf("protect %s target %s: %w", info.Type, info.URL, err)
		}
	}
	return nil
}

// Unprotect stops watching the browser context bcid (it is being
// disposed of). The last one turns auto-attach off again.
func (g *Guard) Unprotect(bcid cdp.BrowserContextID) {
	g.mu.Lock()
	delete(g.contexts, bcid)
	g.mu.Unlock()
	g.release()
}

// syncAuto turns browser-level auto-attach on while some browser context
// is protected or hooked, and off when none is. autoMu orders the
// commands with the state they set: an Unprotect racing a Protect must
// not leave Chromium's auto-attach off while g.auto says on (new tabs
// would then go unchecked); each call decides from the registry as it is
// when it holds autoMu, so the last one leaves the right state.
func (g *Guard) syncAuto(ctx context.Context) error {
	g.autoMu.Lock()
	defer g.autoMu.Unlock()
	g.mu.Lock()
	want, have := len(g.contexts)+len(g.hooks) > 0, g.auto
	g.mu.Unlock()
	if want == have {
		return nil
	}
	if want || (g.browser != nil && g.browser.Err() == nil) {
		if err := g.autoAttach(ctx, want); err != nil {
			return err // unchanged: g.auto stays what Chromium does
		}
	}
	g.mu.Lock()
	g.auto = want
	g.mu.Unlock()
	return nil
}

// release turns auto-attach off when nothing needs it any more.
func (g *Guard) release() {
	base := context.Background()
	if g.browser != nil {
		base = g.browser // once it is gone, auto-attach is off with it
	}
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	_ = g.syncAuto(ctx)
}

func (g *Guard) autoAttach(ctx context.Context, on bool) error {
	_, err := chromedp.CallBrowser(ctx, target.SetAutoAttach, target.SetAutoAttachParams{AutoAttach: on, WaitForDebuggerOnStart: on, Flatten: new(true)})
	return err
}

// guardedType reports whether targets of the type make requests of their
// own: pages (tabs, popups) and workers that are not part of a page.
func guardedType(t string) bool {
	switch t {
	case "page", "iframe", "service_worker", "shared_worker", "worker":
		return true
	}
	return false
}

func (g *Guard) guarded(id target.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sessions {
		if s.target == id && s.ctx != nil {
			return true
		}
	}
	return false
}

// adopt handles a new target that waits for the debugger on the session
// s that the browser auto-attached: when its browser context is
// protected, it enables request interception on s; when it is hooked, it
// runs the hooks (hooks.go); then it lets the target run. s stays
// attached for as long as it protects or hooks the target; otherwise it
// is detached.
func (g *Guard) adopt(s *session, info *target.Info) {
	if g.browser == nil {
		return
	}
	ctx, cancel := context.WithTimeout(g.browser, 10*time.Second)
	defer cancel()
	if s.ctx != nil {
		if err := s.call(ctx, fetch.Enable.Method, fetchAll, nil); err != nil {
			// Fail closed: a target the guard cannot watch must not run.
			g.log.Warn("url policy: closing a target that could not be protected", "type", info.Type, "err", err)
			_, _ = chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: info.TargetID})
			return
		}
	}
	if t := s.hooked(); t != nil {
		g.runHooks(ctx, t)
	}
	if err := s.call(ctx, "Runtime.runIfWaitingForDebugger", nil, nil); err != nil && err != errDetached {
		g.log.Debug("url policy: run target", "err", err)
	}
	if s.ctx == nil && s.hooked() == nil {
		g.drop(s.id)
		if s.parent == nil {
			_, _ = chromedp.CallBrowser(ctx, target.DetachFromTarget, target.DetachFromTargetParams{SessionID: s.id})
		} else {
			_ = s.parent.call(ctx, target.DetachFromTarget.Method, target.DetachFromTargetParams{SessionID: s.id}, nil)
		}
	}
}

var fetchAll = fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}}

// attach opens a guard session to a target that runs already and enables
// request interception on it.
func (g *Guard) attach(ctx context.Context, info *target.Info, c *Context) error {
	res, err := chromedp.CallBrowser(ctx, target.AttachToTarget, target.AttachToTargetParams{TargetID: info.TargetID, Flatten: new(true)})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	s := g.claim(res.SessionID, info, c, nil)
	if err := s.call(ctx, fetch.Enable.Method, fetchAll, nil); err != nil {
		g.drop(s.id)
		_, _ = chromedp.CallBrowser(ctx, target.DetachFromTarget, target.DetachFromTargetParams{SessionID: s.id})
		return fmt.Errorf("enable request interception: %w", err)
	}
	return nil
}

// decide answers one paused request. It runs on its own goroutine: DNS
// and the answer's round trip never hold up the event loop.
func (g *Guard) decide(s *session, ev *fetch.EventRequestPaused) {
	ctx, cancel := context.WithTimeout(g.browser, 10*time.Second)
	defer cancel()
	raw := ev.Request.URL + ev.Request.URLFragment
	d := s.ctx.check(ctx, &g.dns, raw)
	if d.Allowed {
		_ = s.call(ctx, fetch.ContinueRequest.Method, fetch.ContinueRequestParams{RequestID: ev.RequestID}, nil)
		return
	}
	s.ctx.record(s.target, ev.FrameID, &browserv1.BlockedRequest{
		Url:          raw,
		ResourceType: string(ev.ResourceType),
		Rule:         d.Rule,
		TimeMs:       time.Now().UnixMilli(),
	})
	_ = s.call(ctx, fetch.FailRequest.Method, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient}, nil)
}

// check decides on raw under the context's current policy, resolving the
// host when the policy needs its addresses.
func (c *Context) check(ctx context.Context, dns *resolver, raw string) urlpolicy.Decision {
	p := c.Policy()
	if p == nil {
		return urlpolicy.Decision{Allowed: true}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return urlpolicy.Decision{Rule: "the URL does not parse"}
	}
	d := p.Check(u, nil)
	if !d.Allowed || !p.NeedsIPs(u) {
		return d
	}
	ips, err := dns.lookup(ctx, u.Hostname())
	if err != nil || len(ips) == 0 {
		return urlpolicy.Decision{Rule: fmt.Sprintf("host %s did not resolve, and the policy needs its addresses (block_private or an IP rule)", u.Hostname())}
	}
	return p.Check(u, ips)
}

// within derives a context from base (a chromedp context) that also ends
// with req.
func within(base, req context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(base)
	stop := context.AfterFunc(req, cancel)
	return ctx, func() { stop(); cancel() }
}

// hostPort joins a SOCKS target for messages.
func hostPort(host string, port int) string {
	return net.JoinHostPort(strings.Trim(host, "[]"), fmt.Sprint(port))
}
