package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/capacity"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// MetaSession is the _meta key of a result that carries its session handle.
const MetaSession = "sovereign/session"

// Messages of the errors that say what the next call does.
const (
	msgLost    = "the browser session was lost (its worker or its browser stopped); the next call opens a fresh session"
	msgExpired = "the browser session was closed or expired (sessions close after a while without calls); the next call opens a fresh session"
)

// catalogTool is a catalog tool as the listings show it.
func catalogTool(t catalog.Tool) dispatch.Tool {
	tool := dispatch.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema(),
		Annotations: dispatch.Annotations{Title: t.Title, ReadOnly: dispatch.Hint(t.ReadOnly), OpenWorld: dispatch.Hint(true)}}
	if t.ReadOnly {
		tool.Annotations.Destructive = dispatch.Hint(false)
	}
	return tool
}

// browserHandler is the one handler behind every browser tool: check the
// arguments, find or open the browser session, run the tool on its worker
// and render the result.
func (g *Gateway) browserHandler(t catalog.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		call, err := t.Parse(c.Args)
		if err != nil {
			return dispatch.Errorf("%s: %v", t.Name, err)
		}
		if err := g.resolveUploadPaths(c, call.Request); err != nil { // files.go
			return dispatch.ErrorText(g.errorText(ctx, t, err))
		}
		wait := time.Duration(catalog.Wait(call.Request)) * time.Millisecond
		ctx, cancel := context.WithTimeout(ctx, g.cfg.ToolTimeout+wait)
		defer cancel()

		b, err := g.bind(ctx, c, call.Profile)
		if err != nil {
			return dispatch.ErrorText(g.errorText(ctx, t, err))
		}
		// The session is in use while its call runs, not idle from the
		// call's start: a long call (a wait, an audit) is neither given
		// back by the keeper nor reclaimed for another caller.
		defer g.capacity.Stream(state.KeyOf(b.kind, b.id))()
		if msg := g.logins.Refusal(ctx, t, b.sessionID); msg != "" { // --require-login (internal/login)
			return b.result(dispatch.Denied(msg))
		}
		call.Request.SessionId = b.sessionID
		call.Request.Policy = g.policy.forCaller(c.Caller, g.sessionGrants(ctx, c))
		call.Request.DefaultDialogs = g.cfg.dialogMode() // files.go
		res, err := g.fleet.Call(ctx, b.workerID, call.Request)
		if err != nil {
			out := dispatch.ErrorText(g.errorText(ctx, t, err))
			// A failed fill or type does not say whether its field was a
			// password field: keep its text out of the trail.
			if t.TypesText {
				out.Hide = catalog.TypedArguments
			}
			switch bus.CodeOf(err) {
			case commonv1.ErrorCode_TIMEOUT:
				out.Outcome = historyv1.Outcome_OUTCOME_TIMEOUT
			case commonv1.ErrorCode_FORBIDDEN:
				out.Outcome = historyv1.Outcome_OUTCOME_DENIED
			}
			if lost(ctx, err) {
				// No responders can also be a worker that is only
				// re-subscribing after a NATS reconnect: ask it again
				// before letting its session go.
				if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE && g.fleet.Alive(ctx, b.workerID) {
					out.Parts[0].Text = fmt.Sprintf("%s: the browser worker did not answer for a moment (reconnecting?); the session is kept, retry the call", t.Name)
					return b.result(out)
				}
				if nb, rerr := g.restore(ctx, b, c.Caller); rerr == nil {
					return g.afterRestore(ctx, t, call.Request, nb, err)
				}
				g.unbind(ctx, b)
			}
			return b.result(out)
		}
		out := render(res)
		if res.GetSensitiveInput() {
			out.Hide = catalog.TypedArguments
		}
		return b.result(out)
	}
}

// binding is the browser session a call runs in and the record that holds it.
type binding struct {
	kind                state.Kind
	id                  string // MCP session id or handle
	workerID, sessionID string
	minted              bool   // a new handle, to be announced in the result
	note                string // said first in the result (a session given back before)
}

// result completes r with the binding: the browser session for the audit
// record, and the handle of a handle-bound call for the transport.
func (b *binding) result(r *dispatch.Result) *dispatch.Result {
	r.BrowserSession = b.sessionID
	if b.note != "" {
		r.Parts = append([]dispatch.Part{{Text: b.note}}, r.Parts...)
	}
	if b.kind == state.Handle {
		r.Session, r.NewSession = b.id, b.minted
	}
	return r
}

// bind finds the browser session for a call, opening one when needed
// (from the base profile named, "" for none): the call's handle when it
// names one, else its MCP session's (a 2025 client's, or the one a bus call
// acts in), else a new handle (2026, or a client without a protocol
// session).
func (g *Gateway) bind(ctx context.Context, c *dispatch.Call, profile string) (*binding, error) {
	caller := c.Caller.ID
	handle := c.Handle
	switch {
	case handle != "":
		if !state.ValidHandle(handle) {
			return nil, dispatch.ToolErrorf("%q is not a session handle (handles look like %s…); omit %q to open a new browser session",
				handle, state.HandlePrefix, catalog.SessionParam)
		}
		e, err := g.store.Get(ctx, state.Handle, handle)
		if errors.Is(err, state.ErrNotFound) || err == nil && e.Owner != caller {
			// Another caller's handle is as unknown as a made-up one.
			return nil, dispatch.ToolErrorf("unknown or expired session handle %s (handles expire after %s unused); omit %q to open a new browser session",
				handle, g.cfg.SessionTTL, catalog.SessionParam)
		}
		if err != nil {
			return nil, err
		}
		return g.ensureBound(ctx, c.Progress, e, c.Caller, profile)
	case c.MCPSession != "" && c.Transport == dispatch.Bus:
		return g.bindMCPRef(ctx, c.Progress, c.MCPSession, c.Caller, profile) // a bus call in an MCP session's browser session (bus.go)
	case c.MCPSession != "" && c.Transport == dispatch.MCP:
		e, err := g.store.Get(ctx, state.MCP, c.MCPSession)
		if errors.Is(err, state.ErrNotFound) {
			return nil, dispatch.ToolErrorf("unknown MCP session: initialize a new one")
		}
		if err != nil {
			return nil, err
		}
		if e.Owner != caller || e.Terminated {
			return nil, dispatch.ToolErrorf("the MCP session was terminated: initialize a new one")
		}
		return g.ensureBound(ctx, c.Progress, e, c.Caller, profile)
	}
	h := state.NewHandle()
	worker, session, release, err := g.capacity.Open(ctx, capacity.Request{Kind: state.Handle, ID: h, Caller: c.Caller,
		Owner: workerOwner(state.Handle, caller), Policy: g.policy.forCaller(c.Caller, nil), Profile: profile, NewHandle: true, Progress: c.Progress})
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := g.store.Create(ctx, state.Handle, h, state.Record{Owner: caller, WorkerID: worker, SessionID: session}); err != nil {
		g.capacity.Close(ctx, worker, session)
		return nil, fmt.Errorf("store session handle: %w", err)
	}
	g.log.InfoContext(ctx, "browser session opened", "for", "handle", "worker", worker, "session", session)
	g.capacity.Touch(state.KeyOf(state.Handle, h))
	return &binding{kind: state.Handle, id: h, workerID: worker, sessionID: session, minted: true}, nil
}

// ensureBound returns e's browser session, opening one when it has none.
// Concurrent first calls race on the record's revision: the loser gives its
// new browser session back and uses the winner's.
func (g *Gateway) ensureBound(ctx context.Context, progress dispatch.Progress, e *state.Entry, caller dispatch.Caller, profile string) (*binding, error) {
	for range 4 {
		if e.Bound() {
			if p := profile; p != "" {
				return nil, dispatch.ToolErrorf("profile %q applies only when a call opens a browser session, and this one is open already; "+
					"to start from the profile, call open with it in a new MCP session or without a %q handle", p, catalog.SessionParam)
			}
			if time.Since(e.Touched) > min(time.Minute, g.store.TTL()/8) {
				_, _ = g.store.Update(ctx, e) // refresh the TTL; a conflict means it was just written
			}
			g.capacity.Touch(state.KeyOf(e.Kind, e.ID))
			return &binding{kind: e.Kind, id: e.ID, workerID: e.WorkerID, sessionID: e.SessionID}, nil
		}
		worker, session, release, err := g.capacity.Open(ctx, capacity.Request{Kind: e.Kind, ID: e.ID, Caller: caller,
			Owner: workerOwner(e.Kind, caller.ID), Policy: g.policy.forCaller(caller, nil), Profile: profile, Progress: progress})
		if err != nil {
			return nil, err
		}
		next := *e
		next.WorkerID, next.SessionID, next.Released = worker, session, ""
		_, err = g.store.Update(ctx, &next)
		release()
		if err == nil {
			g.log.InfoContext(ctx, "browser session opened", "for", string(e.Kind), "worker", worker, "session", session)
			g.capacity.Touch(state.KeyOf(e.Kind, e.ID))
			b := &binding{kind: e.Kind, id: e.ID, workerID: worker, sessionID: session}
			if e.Released != "" {
				b.note = "This is a new browser session: the previous one was given back, " + e.Released +
					". Its pages, cookies and logins went with it."
			}
			return b, nil
		}
		g.capacity.Close(ctx, worker, session)
		if !errors.Is(err, state.ErrConflict) {
			return nil, err
		}
		if e, err = g.store.Get(ctx, e.Kind, e.ID); err != nil {
			return nil, err
		}
		if e.Terminated {
			return nil, dispatch.ToolErrorf("the MCP session was terminated: initialize a new one")
		}
	}
	return nil, fmt.Errorf("bind browser session: %w", state.ErrConflict)
}

// restoredNote is what a call on a restored session says first.
const restoredNote = "The browser session was lost with its worker and restored on another worker from its last checkpoint: " +
	"cookies, local storage and tabs are back, page state is not, and refs are new (take a snapshot)."

// restore brings b's lost browser session back on a live worker from its
// last checkpoint (the workers keep one when they hold the operator secret
// key) and binds the call's MCP session or handle to it. An error means the
// session is gone for good (no checkpoint) or another call restored it
// first; the caller then forgets it.
func (g *Gateway) restore(ctx context.Context, b *binding, caller Caller) (*binding, error) {
	worker, session, err := g.fleet.Restore(ctx, b.sessionID, workerOwner(b.kind, caller.ID), g.policy.forCaller(caller, nil))
	if err != nil {
		if bus.CodeOf(err) != commonv1.ErrorCode_SESSION_NOT_FOUND {
			g.log.WarnContext(ctx, "restore a lost browser session", "worker", b.workerID, "session", b.sessionID, "err", err)
		}
		return nil, err
	}
	rebound := false
	_, err = g.store.Modify(ctx, b.kind, b.id, func(r *state.Record) bool {
		if r.WorkerID != b.workerID || r.SessionID != b.sessionID {
			return false
		}
		r.WorkerID, r.SessionID, rebound = worker, session, true
		return true
	})
	if err != nil || !rebound {
		g.capacity.Close(ctx, worker, session)
		return nil, fmt.Errorf("rebind the restored session: %w", errors.Join(err, state.ErrConflict))
	}
	g.logins.Move(ctx, b.sessionID, session) // the Nostr identity of the session moves with it
	g.log.InfoContext(ctx, "browser session restored", "from", b.workerID+"/"+b.sessionID, "to", worker+"/"+session)
	g.capacity.Touch(state.KeyOf(b.kind, b.id))
	return &binding{kind: b.kind, id: b.id, workerID: worker, sessionID: session}, nil
}

// afterRestore answers a call whose session was lost and restored as nb:
// a call that never reached the lost worker (nothing answered its subject)
// runs again in the restored session; one that was in flight may have run,
// and is reported, not repeated.
func (g *Gateway) afterRestore(ctx context.Context, t catalog.Tool, req *browserv1.ToolRequest, nb *binding, lostErr error) *dispatch.Result {
	if !errors.Is(lostErr, bus.ErrNoResponders) {
		return nb.result(dispatch.Errorf("%s may or may not have run: %s", t.Name, restoredNote))
	}
	req.SessionId = nb.sessionID
	res, err := g.fleet.Call(ctx, nb.workerID, req)
	var out *dispatch.Result
	if err != nil {
		out = dispatch.ErrorText(g.errorText(ctx, t, err))
	} else {
		out = render(res)
	}
	out.Parts = append([]dispatch.Part{{Text: restoredNote}}, out.Parts...)
	return nb.result(out)
}

// unbind forgets a lost browser session, so that the next call on the same
// MCP session or handle opens a fresh one.
func (g *Gateway) unbind(ctx context.Context, b *binding) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := g.store.Modify(ctx, b.kind, b.id, func(r *state.Record) bool {
		if r.WorkerID != b.workerID || r.SessionID != b.sessionID {
			return false
		}
		r.WorkerID, r.SessionID = "", ""
		return true
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		g.log.WarnContext(ctx, "forget lost browser session", "err", err)
	}
}

// workerOwner is the owner a worker keeps for a browser session: the
// record's kind and the digest of the caller's full identity (never its
// label: two callers may share one).
func workerOwner(kind state.Kind, caller string) string {
	return string(kind) + ":" + dispatch.OwnerDigest(caller)
}

// lost reports whether err means the browser session is gone for good (its
// worker died or forgot it), as opposed to a failure of this one call.
func lost(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, bus.ErrDisconnected) {
		return false // our deadline, the client's cancel or NATS, not the worker
	}
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_SESSION_LOST, commonv1.ErrorCode_UNAVAILABLE, commonv1.ErrorCode_SESSION_NOT_FOUND:
		return true
	}
	return false
}

// errorText maps a failure to the one clear message of its kind.
func (g *Gateway) errorText(ctx context.Context, t catalog.Tool, err error) string {
	var te *dispatch.ToolError
	if errors.As(err, &te) {
		return te.Error()
	}
	var ce *fleet.CapacityError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	msg := err.Error()
	var be *bus.Error
	if errors.As(err, &be) {
		msg = be.Message
	}
	if errors.Is(err, bus.ErrDisconnected) {
		return fmt.Sprintf("%s: the gateway lost its connection to NATS while the call ran, so it may or may not have run; "+
			"the browser session is kept: retry in a few seconds", t.Name)
	}
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_SESSION_LOST, commonv1.ErrorCode_UNAVAILABLE:
		if errors.Is(ctx.Err(), context.Canceled) {
			return t.Name + " was cancelled"
		}
		if ctx.Err() != nil {
			return fmt.Sprintf("%s did not finish within %s", t.Name, g.cfg.ToolTimeout)
		}
		return msgLost
	case commonv1.ErrorCode_SESSION_NOT_FOUND:
		return msgExpired
	case commonv1.ErrorCode_TIMEOUT:
		return fmt.Sprintf("%s did not finish in time: %s", t.Name, msg)
	case commonv1.ErrorCode_INVALID_ARGUMENT:
		return fmt.Sprintf("%s: invalid argument: %s", t.Name, msg)
	case commonv1.ErrorCode_NOT_FOUND:
		return fmt.Sprintf("%s: not found: %s", t.Name, msg)
	case commonv1.ErrorCode_SCRIPT_ERROR:
		return fmt.Sprintf("%s: JavaScript error: %s", t.Name, msg)
	case commonv1.ErrorCode_NAVIGATION_FAILED:
		return fmt.Sprintf("%s: navigation failed: %s", t.Name, msg)
	case commonv1.ErrorCode_FORBIDDEN:
		return fmt.Sprintf("%s: refused by policy: %s", t.Name, msg)
	case commonv1.ErrorCode_TOO_LARGE:
		if t.Name != "screenshot" {
			return fmt.Sprintf("%s: too large: %s", t.Name, msg) // the worker's message says what to do
		}
		return fmt.Sprintf("%s: the result is too large: %s; narrow it (a selector, the viewport instead of the full page, jpeg)", t.Name, msg)
	case commonv1.ErrorCode_NO_CAPACITY:
		return "no browser capacity: " + msg
	case commonv1.ErrorCode_DIALOG_OPEN:
		return msg // names the tool and the dialog
	case commonv1.ErrorCode_FAILED_PRECONDITION:
		if strings.HasPrefix(msg, t.Name) {
			return msg
		}
		return t.Name + ": " + msg
	}
	g.log.ErrorContext(ctx, "tool call failed", "tool", t.Name, "err", err)
	return fmt.Sprintf("%s: internal error: %s", t.Name, msg)
}

// render turns a worker's result into the dispatcher's.
func render(res *browserv1.ToolResult) *dispatch.Result {
	out := &dispatch.Result{Parts: make([]dispatch.Part, 0, len(res.GetContent()))}
	for _, c := range res.GetContent() {
		switch p := c.GetPart().(type) {
		case *browserv1.Content_Text:
			out.Parts = append(out.Parts, dispatch.Part{Text: p.Text})
		case *browserv1.Content_Image:
			mime := p.Image.GetMimeType()
			if mime == "" {
				mime = "image/png"
			}
			out.Parts = append(out.Parts, dispatch.Part{Data: p.Image.GetData(), MIME: mime})
		case *browserv1.Content_Resource:
			name := p.Resource.GetName()
			if name == "" {
				name = "file"
			}
			out.Parts = append(out.Parts, dispatch.Part{Data: p.Resource.GetData(), MIME: p.Resource.GetMimeType(), Name: name})
		}
	}
	out.Structured = res.GetStructured()
	return out
}
