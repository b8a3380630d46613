package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/catalog"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// MetaSession is the _meta key of a result that carries its session handle.
const MetaSession = "sovereign/session"

// Messages of the errors that say what the next call does.
const (
	msgLost    = "the browser session was lost (its worker or its browser stopped); the next call opens a fresh session"
	msgExpired = "the browser session was closed or expired (sessions close after a while without calls); the next call opens a fresh session"
)

// mcpTool renders a catalog tool for tools/list.
func mcpTool(t catalog.Tool) mcp.Tool {
	tool := mcp.NewToolWithRawSchema(t.Name, t.Description, t.InputSchema())
	tool.Title = t.Title
	tool.Annotations = mcp.ToolAnnotation{
		Title:         t.Title,
		ReadOnlyHint:  mcp.ToBoolPtr(t.ReadOnly),
		OpenWorldHint: mcp.ToBoolPtr(true),
	}
	if t.ReadOnly {
		tool.Annotations.DestructiveHint = mcp.ToBoolPtr(false)
	}
	return tool
}

// toolHandler is the one handler behind every browser tool: check the
// arguments, find or open the browser session, run the tool on its worker
// and render the result.
func (g *Gateway) toolHandler(t catalog.Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call, err := t.Parse(req.Params.Arguments)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", t.Name, err)), nil
		}
		wait := time.Duration(catalog.Wait(call.Request)) * time.Millisecond
		if call.Profile != "" {
			ctx = withProfile(ctx, call.Profile)
		}
		ctx, cancel := context.WithTimeout(ctx, g.cfg.ToolTimeout+wait)
		defer cancel()

		b, err := g.bind(ctx, call.Session)
		if err != nil {
			return mcp.NewToolResultError(g.errorText(ctx, t, err)), nil
		}
		info := noteCall(ctx)
		info.browserSession = b.sessionID
		if refused := g.refuseWithoutLogin(ctx, t, b); refused != nil { // --require-login (login.go)
			return refused, nil
		}
		call.Request.SessionId = b.sessionID
		call.Request.Policy = g.urlPolicy(ctx, g.sessionGrants(ctx, req.Params.Arguments))
		res, err := g.fleet.Call(ctx, b.workerID, call.Request)
		if err != nil {
			// A failed fill or type does not say whether its field was a
			// password field: keep its text out of the trail.
			if t.TypesText {
				info.hide = catalog.TypedArguments
			}
			switch bus.CodeOf(err) {
			case commonv1.ErrorCode_TIMEOUT:
				info.outcome = historyv1.Outcome_OUTCOME_TIMEOUT
			case commonv1.ErrorCode_FORBIDDEN:
				info.outcome = historyv1.Outcome_OUTCOME_DENIED
			}
			if lost(ctx, err) {
				// No responders can also be a worker that is only
				// re-subscribing after a NATS reconnect: ask it again
				// before letting its session go.
				if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE && g.fleet.Alive(ctx, b.workerID) {
					return b.decorate(mcp.NewToolResultError(fmt.Sprintf("%s: the browser worker did not answer for a moment (reconnecting?); the session is kept, retry the call", t.Name))), nil
				}
				g.unbind(ctx, b)
			}
			return b.decorate(mcp.NewToolResultError(g.errorText(ctx, t, err))), nil
		}
		if res.GetSensitiveInput() {
			info.hide = catalog.TypedArguments
		}
		return b.decorate(render(res)), nil
	}
}

// binding is the browser session a call runs in and the record that holds it.
type binding struct {
	kind                state.Kind
	id                  string // MCP session id or handle
	workerID, sessionID string
	minted              bool // a new handle, to be announced in the result
}

// decorate adds the handle of a handle-bound call to its result: always in
// _meta, and for a new handle also as the first text line and in the
// structured content.
func (b *binding) decorate(r *mcp.CallToolResult) *mcp.CallToolResult {
	if b.kind != state.Handle {
		return r
	}
	if r.Meta == nil {
		r.Meta = &mcp.Meta{}
	}
	if r.Meta.AdditionalFields == nil {
		r.Meta.AdditionalFields = map[string]any{}
	}
	r.Meta.AdditionalFields[MetaSession] = b.id
	if !b.minted {
		return r
	}
	line := mcp.NewTextContent(fmt.Sprintf("session: %s (pass it as %q in later calls)", b.id, catalog.SessionParam))
	r.Content = append([]mcp.Content{line}, r.Content...)
	fields := map[string]json.RawMessage{}
	if raw, ok := r.StructuredContent.(json.RawMessage); ok && json.Unmarshal(raw, &fields) != nil {
		return r // structured content that is not an object stays as it is
	}
	fields["session"], _ = json.Marshal(b.id)
	r.StructuredContent = fields
	return r
}

// bind finds the browser session for a call, opening one when needed:
// the explicit handle when there is one, else the MCP session's (2025), else
// a new handle (2026, or a client without a protocol session).
func (g *Gateway) bind(ctx context.Context, handle string) (*binding, error) {
	caller := callerFrom(ctx)
	if id := busMCPSession(ctx); id != "" && handle == "" {
		return g.bindMCPRef(ctx, id) // a bus call in an MCP session's browser session (bus.go)
	}
	switch {
	case handle != "":
		if !state.ValidHandle(handle) {
			return nil, toolErr("%q is not a session handle (handles look like %s…); omit %q to open a new browser session",
				handle, state.HandlePrefix, catalog.SessionParam)
		}
		e, err := g.store.Get(ctx, state.Handle, handle)
		if errors.Is(err, state.ErrNotFound) || err == nil && e.Owner != caller {
			// Another caller's handle is as unknown as a made-up one.
			return nil, toolErr("unknown or expired session handle %s (handles expire after %s unused); omit %q to open a new browser session",
				handle, g.cfg.SessionTTL, catalog.SessionParam)
		}
		if err != nil {
			return nil, err
		}
		return g.ensureBound(ctx, e, caller)
	case !server.IsModernRequest(ctx) && mcpSessionID(ctx) != "":
		e, err := g.store.Get(ctx, state.MCP, mcpSessionID(ctx))
		if errors.Is(err, state.ErrNotFound) {
			return nil, toolErr("unknown MCP session: initialize a new one")
		}
		if err != nil {
			return nil, err
		}
		if e.Owner != caller || e.Terminated {
			return nil, toolErr("the MCP session was terminated: initialize a new one")
		}
		return g.ensureBound(ctx, e, caller)
	}
	worker, session, err := g.fleet.Open(ctx, ownerLabel(state.Handle, caller), g.urlPolicy(ctx, nil), profileFrom(ctx))
	if err != nil {
		return nil, err
	}
	h := state.NewHandle()
	if _, err := g.store.Create(ctx, state.Handle, h, state.Record{Owner: caller, WorkerID: worker, SessionID: session}); err != nil {
		g.closeSession(ctx, worker, session)
		return nil, fmt.Errorf("store session handle: %w", err)
	}
	g.log.InfoContext(ctx, "browser session opened", "for", "handle", "worker", worker, "session", session)
	return &binding{kind: state.Handle, id: h, workerID: worker, sessionID: session, minted: true}, nil
}

func mcpSessionID(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return busMCPSession(ctx) // a bus call acting in an MCP session's browser session (bus.go)
}

// ensureBound returns e's browser session, opening one when it has none.
// Concurrent first calls race on the record's revision: the loser gives its
// new browser session back and uses the winner's.
func (g *Gateway) ensureBound(ctx context.Context, e *state.Entry, caller string) (*binding, error) {
	for range 4 {
		if e.Bound() {
			if p := profileFrom(ctx); p != "" {
				return nil, toolErr("profile %q applies only when a call opens a browser session, and this one is open already; "+
					"to start from the profile, call open with it in a new MCP session or without a %q handle", p, catalog.SessionParam)
			}
			if time.Since(e.Touched) > min(time.Minute, g.store.TTL()/8) {
				_, _ = g.store.Update(ctx, e) // refresh the TTL; a conflict means it was just written
			}
			return &binding{kind: e.Kind, id: e.ID, workerID: e.WorkerID, sessionID: e.SessionID}, nil
		}
		worker, session, err := g.fleet.Open(ctx, ownerLabel(e.Kind, caller), g.urlPolicy(ctx, nil), profileFrom(ctx))
		if err != nil {
			return nil, err
		}
		next := *e
		next.WorkerID, next.SessionID = worker, session
		_, err = g.store.Update(ctx, &next)
		if err == nil {
			g.log.InfoContext(ctx, "browser session opened", "for", string(e.Kind), "worker", worker, "session", session)
			return &binding{kind: e.Kind, id: e.ID, workerID: worker, sessionID: session}, nil
		}
		g.closeSession(ctx, worker, session)
		if !errors.Is(err, state.ErrConflict) {
			return nil, err
		}
		if e, err = g.store.Get(ctx, e.Kind, e.ID); err != nil {
			return nil, err
		}
		if e.Terminated {
			return nil, toolErr("the MCP session was terminated: initialize a new one")
		}
	}
	return nil, fmt.Errorf("bind browser session: %w", state.ErrConflict)
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

// closeSession gives back a browser session nobody will use.
func (g *Gateway) closeSession(ctx context.Context, worker, session string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.fleet.Close(ctx, worker, session); err != nil {
		g.log.InfoContext(ctx, "give back browser session", "err", err)
	}
}

// ownerLabel is the opaque owner the worker logs: a kind and the caller's
// label.
func ownerLabel(kind state.Kind, caller string) string {
	return string(kind) + ":" + callerLabel(caller)
}

// callerLabel shortens a caller identity for logs: a prefix of its digest,
// never a credential.
func callerLabel(caller string) string {
	c := strings.TrimPrefix(caller, "sha256:")
	return c[:min(len(c), 12)]
}

// lost reports whether err means the browser session is gone for good (its
// worker died or forgot it), as opposed to a failure of this one call.
func lost(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // our deadline or the client's cancel, not the worker
	}
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_SESSION_LOST, commonv1.ErrorCode_UNAVAILABLE, commonv1.ErrorCode_SESSION_NOT_FOUND:
		return true
	}
	return false
}

// toolError is a failure whose message is already what the model should read.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func toolErr(format string, a ...any) error { return &toolError{msg: fmt.Sprintf(format, a...)} }

// errorText maps a failure to the one clear message of its kind.
func (g *Gateway) errorText(ctx context.Context, t catalog.Tool, err error) string {
	var te *toolError
	if errors.As(err, &te) {
		return te.msg
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
		return fmt.Sprintf("%s: the result is too large: %s; narrow it (a selector, the viewport instead of the full page, jpeg)", t.Name, msg)
	case commonv1.ErrorCode_NO_CAPACITY:
		return "no browser capacity: " + msg
	}
	g.log.ErrorContext(ctx, "tool call failed", "tool", t.Name, "err", err)
	return fmt.Sprintf("%s: internal error: %s", t.Name, msg)
}

// render turns a worker's result into MCP content.
func render(res *browserv1.ToolResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{}}
	for _, c := range res.GetContent() {
		switch p := c.GetPart().(type) {
		case *browserv1.Content_Text:
			out.Content = append(out.Content, mcp.NewTextContent(p.Text))
		case *browserv1.Content_Image:
			mime := p.Image.GetMimeType()
			if mime == "" {
				mime = "image/png"
			}
			out.Content = append(out.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(p.Image.GetData()), mime))
		}
	}
	if s := strings.TrimSpace(res.GetStructuredJson()); s != "" && json.Valid([]byte(s)) {
		out.StructuredContent = json.RawMessage(s)
	}
	return out
}

// recoverTools turns a panic in a tool into a tool error (and a log line
// with the stack) instead of a broken response.
func (g *Gateway) recoverTools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				g.log.ErrorContext(ctx, "tool panic", "tool", req.Params.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = mcp.NewToolResultError(fmt.Sprintf("%s: internal error: %v", req.Params.Name, p)), nil
			}
		}()
		return next(ctx, req)
	}
}

// callInfo is what the tool handler learns about a call that the audit
// middleware records: the browser session it ran in, whether it typed into
// a password field, and how it ended when that is more than ok/error.
type callInfo struct {
	browserSession string
	hide           []string // arguments never to record
	outcome        historyv1.Outcome
	approval       *historyv1.Approval // who decided a monitored call (approve.go)
	urlOnce        string              // a host a person let this call navigate to (policy.go)
}

type callInfoKey struct{}

// noteCall returns the call's info for the handler to fill (a throwaway
// one outside the middleware).
func noteCall(ctx context.Context) *callInfo {
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
		return ci
	}
	return &callInfo{}
}

// auditTools logs every tool call (who as a digest prefix, what, how long,
// the error of a failed one) and publishes its audit record: the full
// arguments and result, redacted, for the history service.
func (g *Gateway) auditTools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		ci := &callInfo{}
		res, err := next(context.WithValue(ctx, callInfoKey{}, ci), req)
		if err == nil && res != nil && res.NeedsInput() {
			return res, nil // asks the client for input (approve.go); its retry is the call recorded
		}
		took := time.Since(start)
		caller := callerLabel(callerFrom(ctx))
		attrs := []any{"tool", req.Params.Name, "caller", caller, "duration", took.Round(time.Millisecond).String()}
		outcome, text := historyv1.Outcome_OUTCOME_OK, ""
		switch {
		case err != nil:
			g.log.WarnContext(ctx, "tool call failed", append(attrs, "err", err)...)
			outcome, text = historyv1.Outcome_OUTCOME_ERROR, err.Error()
		case res != nil && res.IsError:
			text = resultText(res)
			g.log.InfoContext(ctx, "tool call returned an error", append(attrs, "error", text)...)
			outcome = historyv1.Outcome_OUTCOME_ERROR
		default:
			g.log.InfoContext(ctx, "tool call", attrs...)
			text = auditText(res)
		}
		if outcome != historyv1.Outcome_OUTCOME_OK && ci.outcome != historyv1.Outcome_OUTCOME_UNSPECIFIED {
			outcome = ci.outcome
		}
		observeToolCall(req.Params.Name, outcome, took) // metrics.go
		if g.audit != nil {
			g.audit.Publish(audit.Record{
				Start:          start,
				Duration:       took,
				Caller:         callerInfo(ctx).Name,
				Client:         clientName(ctx),
				MCPSession:     mcpSessionID(ctx),
				BrowserSession: ci.browserSession,
				Tool:           req.Params.Name,
				Arguments:      auditArguments(req.Params.Arguments),
				Result:         text,
				Outcome:        outcome,
				HideArguments:  ci.hide,
				Trace:          trace.SpanContextFromContext(ctx),
				Approval:       ci.approval,
			})
		}
		return res, err
	}
}

// clientName is the MCP client's clientInfo ("claude-code 1.2.3"), when
// its session declared one.
func clientName(ctx context.Context) string {
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return busClient(ctx) // "agent" for a call of an agent run (bus.go)
	}
	info := s.GetClientInfo()
	return strings.TrimSpace(info.Name + " " + info.Version)
}

// auditArguments renders a call's arguments as JSON without the session
// handle: a handle is a bearer of the browser session and never leaves the
// gateway's memory and KV (the record names the browser session instead).
// The secrets of the login tools (catalog.SecretArguments, a bunker URL's
// secret) are hidden.
func auditArguments(args any) []byte {
	if m, ok := args.(map[string]any); ok {
		m = catalog.HideSecrets(m, audit.Hidden)
		m = clipAuditArguments(m) // a huge fs_write content (system.go)
		args = m
		if _, has := m[catalog.SessionParam]; has {
			c := make(map[string]any, len(m))
			for k, v := range m {
				if k != catalog.SessionParam {
					c[k] = v
				}
			}
			args = c
		}
	}
	b, err := json.Marshal(args)
	if err != nil || string(b) == "null" {
		return []byte("{}")
	}
	return b
}

// auditText is a successful result as the trail keeps it: its text parts
// (not the handle line) and a size note for each image.
func auditText(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			if strings.HasPrefix(c.Text, "session: "+state.HandlePrefix) {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c.Text)
		case mcp.ImageContent:
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, base64.StdEncoding.DecodedLen(len(c.Data)))
		}
		if b.Len() > audit.MaxResultChars*4 {
			break
		}
	}
	return b.String()
}

// resultText is the error text of a failed result for the log: its last
// text part, since a new handle's "session: sov_…" line comes first and a
// handle must never reach a log.
func resultText(r *mcp.CallToolResult) string {
	for i := len(r.Content) - 1; i >= 0; i-- {
		if t, ok := r.Content[i].(mcp.TextContent); ok && !strings.HasPrefix(t.Text, "session: "+state.HandlePrefix) {
			return t.Text
		}
	}
	return ""
}

type profileKey struct{}

// withProfile returns ctx asking that a browser session opened for the
// call start from the base profile name.
func withProfile(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, profileKey{}, name)
}

// profileFrom is the base profile the call asks for, "" for none.
func profileFrom(ctx context.Context) string {
	s, _ := ctx.Value(profileKey{}).(string)
	return s
}
