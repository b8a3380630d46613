package guard

import (
	"context"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Hooks is what a browser context wants done in each of its pages,
// independent of any URL policy: the guard gives it a CDP session of its
// own to every page target of the context — its tabs, the popups its pages
// open and their out-of-process iframes — attached before a new target
// runs anything, through the same auto-attach that holds new targets for
// the URL policy.
//
// The methods run on the guard's goroutines; Event and Detached run on the
// connection's reader and must neither block nor wait for a command's
// reply.
type Hooks interface {
	// Attached is called once per target. For a new target it runs
	// while the target waits for the debugger, so that what it sets up
	// (Page.addScriptToEvaluateOnNewDocument, Runtime.addBinding) is in
	// place before the target's first document; the target runs when it
	// returns. ctx bounds the setup.
	Attached(ctx context.Context, t *Target)
	// Event is each event of t's session (the domains Attached enabled).
	// params is the event's JSON.
	Event(t *Target, method string, params []byte)
	// Detached says that t's session ended: its target closed or crashed.
	// It is not called for the targets of a context that Unhook releases.
	Detached(t *Target)
}

// Target is a page target (a tab, a popup) or an out-of-process iframe as
// Hooks see it.
type Target struct {
	// ID is the target's id; for a page it is also its main frame's id.
	ID target.ID
	// Type is "page" or "iframe".
	Type string
	// Parent is the target of the page an out-of-process iframe belongs
	// to (when that page is hooked too); nil for a page.
	Parent *Target

	bcid  cdp.BrowserContextID
	s     *session
	hooks Hooks
}

// Call sends a CDP command on the target's session and decodes its result
// into res (nil: ignore it).
func (t *Target) Call(ctx context.Context, method string, params, res any) error {
	return t.s.call(ctx, method, params, res)
}

// hookedType reports whether Hooks get targets of the type: those that
// have documents.
func hookedType(t string) bool { return t == "page" || t == "iframe" }

// Hook gives h a session to each page target of the browser context bcid:
// those that exist now (Attached runs before Hook returns) and every one
// it opens later (before it runs). Call Unhook when the context goes.
func (g *Guard) Hook(ctx context.Context, bcid cdp.BrowserContextID, h Hooks) error {
	if g.browser == nil || g.mux == nil {
		return fmt.Errorf("the guard is not connected to Chromium")
	}
	ctx, cancel := within(g.browser, ctx)
	defer cancel()
	g.mu.Lock()
	g.hooks[bcid] = h
	g.mu.Unlock()
	if err := g.syncAuto(ctx); err != nil {
		return fmt.Errorf("watch new targets: %w", err)
	}
	infos, err := chromedp.CallBrowser(ctx, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return fmt.Errorf("list the targets: %w", err)
	}
	for _, info := range infos.TargetInfos {
		if info.BrowserContextID != bcid || info.Type != "page" || g.hooked(info.TargetID) {
			continue
		}
		res, err := chromedp.CallBrowser(ctx, target.AttachToTarget, target.AttachToTargetParams{TargetID: info.TargetID, Flatten: new(true)})
		if err != nil {
			// It closed meanwhile, most likely; a target that opens
			// later is auto-attached.
			g.log.Debug("hooks: attach to a running target", "type", info.Type, "err", err)
			continue
		}
		s := g.claim(res.SessionID, info, nil, h)
		g.runHooks(ctx, s.hooked())
	}
	return nil
}

// Unhook stops giving the browser context bcid's targets to its hooks
// (the context is being disposed of) and detaches the sessions that only
// the hooks used.
func (g *Guard) Unhook(bcid cdp.BrowserContextID) {
	g.mu.Lock()
	delete(g.hooks, bcid)
	var detach []*session
	for _, s := range g.sessions {
		s.mu.Lock()
		if s.hook != nil && s.hook.bcid == bcid {
			s.hook = nil
			if s.ctx == nil && s.parent == nil {
				detach = append(detach, s)
			}
		}
		s.mu.Unlock()
	}
	g.mu.Unlock()
	if len(detach) > 0 && g.browser != nil && g.browser.Err() == nil {
		ctx, cancel := context.WithTimeout(g.browser, 5*time.Second)
		defer cancel()
		for _, s := range detach {
			g.drop(s.id) // its iframes' sessions go with it
			_, _ = chromedp.CallBrowser(ctx, target.DetachFromTarget, target.DetachFromTargetParams{SessionID: s.id})
		}
	}
	g.release()
}

// hooked reports whether the guard has a hooked session to the target id.
func (g *Guard) hooked(id target.ID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, s := range g.sessions {
		if s.target == id && s.hooked() != nil {
			return true
		}
	}
	return false
}

// runHooks prepares a hooked target: its out-of-process iframes are
// auto-attached to its session (and held until their own hooks ran), then
// the hooks set the target up.
func (g *Guard) runHooks(ctx context.Context, t *Target) {
	if t == nil {
		return
	}
	err := t.Call(ctx, target.SetAutoAttach.Method, target.SetAutoAttachParams{AutoAttach: true, WaitForDebuggerOnStart: true,
		Flatten: new(true), Filter: target.Filter{{Type: "iframe"}}}, nil)
	if err != nil && err != errDetached {
		g.log.Debug("hooks: auto-attach iframes", "err", err)
	}
	t.hooks.Attached(ctx, t)
}
