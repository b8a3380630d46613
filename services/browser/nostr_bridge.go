package browser

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"

	"github.com/sovereign-fleet/sovereign/services/browser/internal/guard"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/nostrjs"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// nostrCallTimeout bounds one window.nostr call: a signer may wait for a
// person (an nsigner device, a bunker).
const nostrCallTimeout = 2 * time.Minute

// nostrBridge is window.nostr for one session: the guard hooks it into
// every page target of the session's browser context (guard.Hooks). It
// puts the page script (package nostrjs) in each target while the session
// has an identity, tracks each target's frames (their main-world
// execution contexts and origins), and serves the calls that come
// through the binding. Calls never take the session's call lock.
type nostrBridge struct {
	ctx     context.Context // the session's: ends the calls in flight when it closes
	scope   string          // the session id, the signer's scope
	bus     *bus.Conn
	log     *slog.Logger
	binding string // the binding's name (random per session)
	reply   string // the reply function's name (random per session)
	source  string // the page script

	mu       sync.Mutex
	pubkey   string // the identity; "" logged out
	targets  map[*guard.Target]*nostrTarget
	inflight int  // calls being served
	closed   bool // no new calls
	wg       sync.WaitGroup
}

// nostrTarget is a hooked page target (a tab, a popup, an
// out-of-process iframe).
type nostrTarget struct {
	t *guard.Target

	setup   sync.Mutex // orders install and uninstall; owns enabled and script
	enabled bool       // Runtime and Page enabled
	script  cdppage.ScriptIdentifier

	// Guarded by the bridge's mu: the main-world execution contexts of
	// the target's frames by unique id, and the unique id of each
	// context id (bindingCalled names the context id).
	contexts map[string]execContext
	byID     map[runtime.ExecutionContextID]string
}

// execContext is the main world of one document in one frame.
type execContext struct {
	id       runtime.ExecutionContextID
	uniqueID string
	origin   string // as Chromium reports it; never ""
	frame    cdp.FrameID
}

func newNostrBridge(ctx context.Context, scope string, c *bus.Conn, log *slog.Logger) *nostrBridge {
	b := &nostrBridge{ctx: ctx, scope: scope, bus: c, log: log,
		binding: "__sovNostr" + randomHex(8), reply: "__sovNostrReply" + randomHex(8),
		targets: make(map[*guard.Target]*nostrTarget)}
	b.source = nostrjs.Source(b.binding, b.reply)
	return b
}

func (b *nostrBridge) identity() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pubkey
}

// setIdentity puts window.nostr in every target (pubkey set) or takes it
// out ("").
func (b *nostrBridge) setIdentity(ctx context.Context, pubkey string) {
	b.mu.Lock()
	b.pubkey = pubkey
	targets := make([]*nostrTarget, 0, len(b.targets))
	for _, nt := range b.targets {
		targets = append(targets, nt)
	}
	b.mu.Unlock()
	for _, nt := range targets {
		b.reconcile(ctx, nt)
	}
}

// close stops serving calls and waits for those in flight (the session's
// context has ended, so they end at once).
func (b *nostrBridge) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// Attached implements guard.Hooks: a new target gets window.nostr before
// it runs, when the session has an identity.
func (b *nostrBridge) Attached(ctx context.Context, t *guard.Target) {
	nt := &nostrTarget{t: t, contexts: make(map[string]execContext), byID: make(map[runtime.ExecutionContextID]string)}
	b.mu.Lock()
	b.targets[t] = nt
	b.mu.Unlock()
	b.log.Debug("window.nostr: hooked a target", "session", b.scope, "type", t.Type)
	b.reconcile(ctx, nt)
}

// Detached implements guard.Hooks.
func (b *nostrBridge) Detached(t *guard.Target) {
	b.mu.Lock()
	delete(b.targets, t)
	b.mu.Unlock()
}

// reconcile installs or removes the page script in nt to match the
// session's identity. Registering a target before reconciling it, and
// setting the identity before reconciling every target, makes a target
// attached during a change end up right.
func (b *nostrBridge) reconcile(ctx context.Context, nt *nostrTarget) {
	nt.setup.Lock()
	defer nt.setup.Unlock()
	want := b.identity() != ""
	var err error
	switch {
	case want && nt.script == "":
		err = b.install(ctx, nt)
	case !want && nt.script != "":
		err = b.uninstall(ctx, nt)
	}
	if err != nil {
		b.log.Debug("window.nostr: set up a page", "session", b.scope, "type", nt.t.Type, "err", err)
	}
}

// install adds the binding and the page script to nt, running the script
// in the documents it has loaded already.
func (b *nostrBridge) install(ctx context.Context, nt *nostrTarget) error {
	if !nt.enabled {
		// Runtime events: the frames' execution contexts (with their
		// origins) and the binding's calls. Page: its scripts for new
		// documents run only while it is enabled.
		if err := nt.t.Call(ctx, runtime.Enable.Method, nil, nil); err != nil {
			return err
		}
		if err := nt.t.Call(ctx, cdppage.Enable.Method, nil, nil); err != nil {
			return err
		}
		nt.enabled = true
	}
	if err := nt.t.Call(ctx, runtime.AddBinding.Method, runtime.AddBindingParams{Name: b.binding}, nil); err != nil {
		return err
	}
	var res cdppage.AddScriptToEvaluateOnNewDocumentResult
	err := nt.t.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument.Method, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: b.source, RunImmediately: new(true)}, &res)
	if err != nil {
		return err
	}
	nt.script = res.Identifier
	return nil
}

// uninstall removes the page script and the binding from nt, and tells
// its loaded documents that the session logged out (even when a removal
// failed: no document may go on calling).
func (b *nostrBridge) uninstall(ctx context.Context, nt *nostrTarget) error {
	err := nt.t.Call(ctx, cdppage.RemoveScriptToEvaluateOnNewDocument.Method,
		cdppage.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: nt.script}, nil)
	if err == nil {
		nt.script = ""
		err = nt.t.Call(ctx, runtime.RemoveBinding.Method, runtime.RemoveBindingParams{Name: b.binding}, nil)
	}
	b.mu.Lock()
	docs := make([]execContext, 0, len(nt.contexts))
	for _, ec := range nt.contexts {
		docs = append(docs, ec)
	}
	b.mu.Unlock()
	for _, ec := range docs {
		b.send(ctx, nt, ec, "", 0, nostrjs.ReplyLogout, nil)
	}
	return err
}

// The events the bridge reads; the fields it needs of each.
type (
	contextCreated struct {
		Context struct {
			ID       runtime.ExecutionContextID `json:"id"`
			Origin   string                     `json:"origin"`
			UniqueID string                     `json:"uniqueId"`
			AuxData  struct {
				IsDefault bool        `json:"isDefault"`
				FrameID   cdp.FrameID `json:"frameId"`
			} `json:"auxData"`
		} `json:"context"`
	}
	contextDestroyed struct {
		UniqueID string `json:"executionContextUniqueId"`
	}
	bindingCalled struct {
		Name      string                     `json:"name"`
		Payload   string                     `json:"payload"`
		ContextID runtime.ExecutionContextID `json:"executionContextId"`
	}
)

// Event implements guard.Hooks. It runs on the connection's reader, in
// order, so a call always finds the context it came from.
func (b *nostrBridge) Event(t *guard.Target, method string, params []byte) {
	switch method {
	case "Runtime.executionContextCreated":
		var ev contextCreated
		if json.Unmarshal(params, &ev) != nil || !ev.Context.AuxData.IsDefault {
			return // isolated worlds (the worker's own) never call window.nostr
		}
		c := ev.Context
		origin := c.Origin
		if origin == "" || origin == "://" {
			// Never "": to the signer that means the agent itself.
			origin = "null"
		}
		b.mu.Lock()
		if nt := b.targets[t]; nt != nil {
			nt.contexts[c.UniqueID] = execContext{id: c.ID, uniqueID: c.UniqueID, origin: origin, frame: c.AuxData.FrameID}
			nt.byID[c.ID] = c.UniqueID
		}
		b.mu.Unlock()
	case "Runtime.executionContextDestroyed":
		var ev contextDestroyed
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		b.mu.Lock()
		if nt := b.targets[t]; nt != nil {
			if ec, ok := nt.contexts[ev.UniqueID]; ok {
				delete(nt.byID, ec.id)
				delete(nt.contexts, ev.UniqueID)
			}
		}
		b.mu.Unlock()
	case "Runtime.executionContextsCleared":
		b.mu.Lock()
		if nt := b.targets[t]; nt != nil {
			clear(nt.contexts)
			clear(nt.byID)
		}
		b.mu.Unlock()
	case "Runtime.bindingCalled":
		var ev bindingCalled
		if json.Unmarshal(params, &ev) != nil || ev.Name != b.binding {
			return
		}
		b.called(t, ev)
	}
}

// called starts serving one call. The caller's origin is its execution
// context's, as Chromium reported it; a call from a context the bridge
// does not know (an isolated world) is ignored.
func (b *nostrBridge) called(t *guard.Target, ev bindingCalled) {
	b.mu.Lock()
	defer b.mu.Unlock()
	nt := b.targets[t]
	if nt == nil || b.closed {
		return
	}
	ec, ok := nt.contexts[nt.byID[ev.ContextID]]
	if !ok {
		return
	}
	top := b.topOriginLocked(nt)
	busy := b.inflight >= nostrjs.MaxPending
	if !busy {
		b.inflight++
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if busy {
			b.refuse(nt, ec, ev.Payload)
			return
		}
		// The slot is free before the page sees the answer: a call the
		// page makes once its promise settled must find it free.
		release := sync.OnceFunc(func() {
			b.mu.Lock()
			b.inflight--
			b.mu.Unlock()
		})
		defer release()
		b.serve(nt, ec, top, ev.Payload, release)
	}()
}

// topOriginLocked is the origin of the top-level frame of nt's tab: its
// main frame's, or for an out-of-process iframe its page's. "null" when
// unknown, which no policy takes for the top-level origin.
func (b *nostrBridge) topOriginLocked(nt *nostrTarget) string {
	for nt.t.Parent != nil {
		if nt = b.targets[nt.t.Parent]; nt == nil {
			return "null"
		}
	}
	for _, ec := range nt.contexts {
		if ec.frame == cdp.FrameID(nt.t.ID) {
			return ec.origin
		}
	}
	return "null"
}

// refuse answers a call beyond the session's limit of calls in flight.
func (b *nostrBridge) refuse(nt *nostrTarget, ec execContext, payload string) {
	var req nostrjs.Request
	if json.Unmarshal([]byte(payload), &req) != nil {
		return
	}
	b.log.Info("window.nostr", "session", b.scope, "method", req.Method, "origin", ec.origin, "outcome", "too many pending calls")
	b.settle(nt, ec, &req, nil, errTooMany)
}

// serve runs one call and settles its promise in the calling document,
// calling release (which frees its slot among the calls in flight) first.
func (b *nostrBridge) serve(nt *nostrTarget, ec execContext, top, payload string, release func()) {
	var req nostrjs.Request
	if err := json.Unmarshal([]byte(payload), &req); err != nil {
		b.log.Debug("window.nostr: a call that does not parse", "session", b.scope, "origin", ec.origin)
		return
	}
	if len(payload) > nostrjs.MaxRequest {
		release()
		b.settle(nt, ec, &req, nil, nostrErrorf("%s is too large: %d bytes, the limit is %d", req.Method, len(payload), nostrjs.MaxRequest))
		return
	}
	if b.identity() == "" {
		release()
		b.settle(nt, ec, &req, nil, errLoggedOut)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, nostrCallTimeout)
	defer cancel()
	start := time.Now()
	value, kind, err := b.call(ctx, &req, ec.origin, top)
	if err == nil && b.identity() == "" {
		err = errLoggedOut // logged out while the signer worked
	}
	attrs := []any{"session", b.scope, "method", req.Method, "origin", ec.origin, "top_origin", top,
		"duration", time.Since(start).Round(time.Millisecond).String()}
	if kind >= 0 {
		attrs = append(attrs, "kind", kind)
	}
	if err != nil {
		attrs = append(attrs, "outcome", bus.CodeOf(err).String())
	} else {
		attrs = append(attrs, "outcome", "ok")
	}
	b.log.Info("window.nostr", attrs...)
	release()
	b.settle(nt, ec, &req, value, err)
}

// settle resolves (err nil) or rejects the call req in its document.
func (b *nostrBridge) settle(nt *nostrTarget, ec execContext, req *nostrjs.Request, value any, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err != nil {
		b.send(ctx, nt, ec, req.Token, req.ID, nostrjs.ReplyError, pageMessage(err))
		return
	}
	b.send(ctx, nt, ec, req.Token, req.ID, nostrjs.ReplyOK, value)
}

// callArg is a Runtime.CallArgument by value.
type callArg struct {
	Value json.RawMessage `json:"value"`
}

// send calls the page script's reply function in the document ec (by its
// unique id: a context id of another process is never confused with it).
func (b *nostrBridge) send(ctx context.Context, nt *nostrTarget, ec execContext, token string, id int64, kind string, value any) {
	arg := func(v any) callArg {
		raw, err := json.Marshal(v)
		if err != nil {
			raw = []byte("null")
		}
		return callArg{Value: raw}
	}
	var tok any
	if token != "" {
		tok = token
	}
	params := struct {
		FunctionDeclaration string    `json:"functionDeclaration"`
		UniqueContextID     string    `json:"uniqueContextId"`
		Arguments           []callArg `json:"arguments"`
		Silent              bool      `json:"silent"`
	}{nostrjs.ReplyFunction(b.reply), ec.uniqueID, []callArg{arg(tok), arg(id), arg(kind), arg(value)}, true}
	if err := nt.t.Call(ctx, runtime.CallFunctionOn.Method, params, nil); err != nil {
		b.log.Debug("window.nostr: reply to a page", "session", b.scope, "origin", ec.origin, "err", err)
	}
}
