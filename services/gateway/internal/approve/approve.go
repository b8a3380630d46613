// Package approve holds a call of a monitored tool until a person
// approves it (once, or for the rest of its browser session) or denies it,
// on the operator console of any replica or in the calling client when its
// transport can ask its user (the call's Ask or Rounds capability):
//
//   - 2025 MCP clients that declared elicitation are asked on the call's
//     response stream (Ask), while the console can decide too; the first
//     decision counts.
//   - 2026 MCP clients that declared elicitation get an input-required
//     result (Rounds): their retry carries the user's answer and a request
//     state that names the pending request, so the retry resumes it (on
//     any replica). A request is used by one call only.
//   - Other callers wait for the console: clients without elicitation, and
//     sov.tools.call (an agent run's calls: nobody to ask on the bus).
//
// A navigation the URL policy refuses only because no allow list names its
// host is held the same way: a person may grant the host (on the console
// only, since a grant lifts the operator's allow lists). A call nobody
// decides is denied after the timeout. The Gate is the dispatcher's
// middleware; it runs inside the audit middleware, so the audit record says
// who decided what.
package approve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// The form of an approval.
const (
	// inputKey keys the approval in a multi round-trip call.
	inputKey = "sovereign_approval"
	// statePrefix prefixes the request state of a multi round-trip call
	// that waits for an approval: the request's id follows.
	statePrefix = "sov-approval:"
	// decisionField is the form's one field and its answers.
	decisionField  = "decision"
	approveOnce    = "approve_once"
	approveSession = "approve_session"
	deny           = "deny"
)

// Config is what the gate holds and for how long.
type Config struct {
	// Tools are the monitored tools (the flags' and the policy file's).
	Tools []string
	// Timeout is how long a call waits for a decision before it is denied.
	Timeout time.Duration
	// ConsoleOnly refuses decisions from the calling client.
	ConsoleOnly bool
}

// URLPolicy is what the gate asks the URL policy.
type URLPolicy interface {
	// NeedsGrant reports whether c navigates to a URL that the policy
	// refuses only because no allow list names its host, why, and the
	// host a person may grant. grants reads the URL grants of c's browser
	// session, when the policy needs them.
	NeedsGrant(c *dispatch.Call, grants func() []string) (reason, host string, ok bool)
}

// Credentials is what the gate asks authentication.
type Credentials interface {
	// Revoked reports whether caller's credential was revoked (an API
	// token may be while its call waits for a person).
	Revoked(caller dispatch.Caller) bool
}

// Gate holds the calls that wait for a person's decision.
type Gate struct {
	cfg       Config
	queue     *approval.Queue
	monitored map[string]bool
	policy    URLPolicy
	creds     Credentials
	log       *slog.Logger
}

// Open opens the approval queue of the bus prefix (every gateway has one:
// its console decides requests made on any replica) and returns the gate
// over it.
func Open(ctx context.Context, nc *nats.Conn, prefix string, cfg Config, policy URLPolicy, creds Credentials, log *slog.Logger) (*Gate, error) {
	q, err := approval.Open(ctx, nc, prefix)
	if err != nil {
		return nil, fmt.Errorf("approval queue: %w", err)
	}
	g := &Gate{cfg: cfg, queue: q, monitored: map[string]bool{}, policy: policy, creds: creds, log: log}
	for _, t := range cfg.Tools {
		g.monitored[t] = true
	}
	return g, nil
}

// Queue is the approval queue (what the console lists and decides).
func (g *Gate) Queue() *approval.Queue { return g.queue }

// URLGrants are the URL patterns people granted to c's browser session.
func (g *Gate) URLGrants(ctx context.Context, c *dispatch.Call) ([]string, error) {
	return g.queue.URLGrants(ctx, Scope(c))
}

// isMonitored reports whether a call must wait for a person's approval, and
// why (the reason the console and the client show).
func (g *Gate) isMonitored(c *dispatch.Call) (reason string, ok bool) {
	if g.monitored[c.Tool] {
		return fmt.Sprintf("tool %q is monitored (global policy)", c.Tool), true
	}
	if slices.Contains(c.Caller.Approve, c.Tool) {
		return fmt.Sprintf("tool %q is monitored for token %q", c.Tool, c.Caller.Name), true
	}
	return "", false
}

// Middleware is the dispatcher's middleware that holds calls of monitored
// tools, and navigations only a grant lets through, until they are
// approved.
func (g *Gate) Middleware(next dispatch.Handler) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		scope := Scope(c)
		reason, ok := g.isMonitored(c)
		grant := "tool:" + c.Tool
		if !ok {
			// Not monitored, but perhaps a navigation that only a person's
			// grant of its host lets through.
			var pattern string
			grants := func() []string {
				if scope == "" {
					return nil
				}
				list, _ := g.queue.URLGrants(ctx, scope)
				return list
			}
			if reason, pattern, ok = g.policy.NeedsGrant(c, grants); !ok {
				return next(ctx, c)
			}
			grant = approval.URLGrantPrefix + pattern
			c.URLOnce = pattern // in force for this call once approved, whatever the scope
		}
		if gr, ok, err := g.queue.LookupGrant(ctx, scope, grant); err != nil {
			g.log.WarnContext(ctx, "read approval grant; asking instead", "tool", c.Tool, "err", err)
		} else if ok {
			by := gr.DecidedBy
			if by == "" {
				by = "session grant"
			}
			res := next(ctx, c)
			res.Approval = &historyv1.Approval{State: string(approval.Approved), Scope: string(approval.Session),
				DecidedBy: by, DecidedAtUnixMilli: gr.Created.UnixMilli(), RequestId: gr.RequestID}
			return res
		}
		r := approval.Request{
			Tool:      c.Tool,
			Arguments: string(redact.JSON(dispatch.AuditArguments(c.Args))),
			Reason:    reason,
			Caller:    c.Caller.Name,
			Client:    c.Client,
			Scope:     scope,
			Grant:     grant,
			Deadline:  time.Now().Add(g.cfg.Timeout),
			Owner:     ownerDigest(c.Caller.ID),
			Call:      callDigest(c.Tool, c.Args),
		}
		// The caller's user may decide when its transport can ask them,
		// unless the operator wants the console only. A URL grant lifts
		// the operator's allow lists: only the console grants one.
		clientDecides := !g.cfg.ConsoleOnly && !strings.HasPrefix(grant, approval.URLGrantPrefix)
		switch {
		case clientDecides && c.Rounds != nil:
			return g.roundTrip(ctx, c, r, next)
		case clientDecides && c.Ask != nil:
			got, err := g.queue.Ask(ctx, r, asking(c.Ask))
			return g.decided(ctx, c, got, err, next)
		}
		// Nobody to ask in the call (a bus call, a client without
		// elicitation): the console decides.
		got, err := g.queue.Ask(ctx, r, nil)
		return g.decided(ctx, c, got, err, next)
	}
}

// decided runs the call when r was approved, and otherwise returns the
// error result that says who refused it.
func (g *Gate) decided(ctx context.Context, c *dispatch.Call, r approval.Request, err error, next dispatch.Handler) *dispatch.Result {
	tool := c.Tool
	var rec *historyv1.Approval
	if r.ID != "" && r.State != approval.Pending {
		rec = record(r)
	}
	denied := func(format string, a ...any) *dispatch.Result {
		res := dispatch.Denied(fmt.Sprintf(format, a...))
		res.Approval = rec
		return res
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return denied("%s was cancelled while it waited for approval; it was not run", tool)
	case err != nil:
		g.log.ErrorContext(ctx, "approval queue", "tool", tool, "err", err)
		res := dispatch.Errorf("%s needs approval, but the approval queue failed (%v); it was not run", tool, err)
		res.Approval = rec
		return res
	case r.State == approval.Approved:
		// One approval runs one call: a replayed retry naming the same
		// request finds it consumed.
		if _, cerr := g.queue.Consume(ctx, r.ID); cerr != nil {
			return denied("%s: %v", tool, cerr)
		}
		if g.creds.Revoked(c.Caller) {
			return denied("%s: the caller's token was revoked while the call waited for approval; it was not run", tool)
		}
		res := next(ctx, c)
		res.Approval = rec
		return res
	case r.State == approval.TimedOut:
		return denied("%s needs approval and nobody decided within %s; it was not run",
			tool, r.Deadline.Sub(r.Created).Round(time.Second))
	default:
		msg := fmt.Sprintf("%s was denied by %s", tool, r.DecidedBy)
		if r.Note != "" {
			msg += ": " + r.Note
		}
		return denied("%s", msg)
	}
}

// roundTrip asks a 2026 client for the approval with an input-required
// result, or resumes the request its retry names.
func (g *Gate) roundTrip(ctx context.Context, c *dispatch.Call, r approval.Request, next dispatch.Handler) *dispatch.Result {
	if id, ok := strings.CutPrefix(c.Rounds.State, statePrefix); ok {
		return g.resume(ctx, c, r, id, next)
	}
	p, err := g.queue.Submit(ctx, r)
	if err != nil {
		g.log.ErrorContext(ctx, "approval queue", "tool", c.Tool, "err", err)
		return dispatch.Errorf("%s needs approval, but the approval queue failed (%v); it was not run", c.Tool, err)
	}
	return &dispatch.Result{Input: &dispatch.InputRequest{State: statePrefix + p.ID, Key: inputKey, Form: form(p)}}
}

// resume is the retry of a multi round-trip call: it applies the user's
// answer to the pending request (unless the console decided first), waits
// for the console when there is no usable answer, and runs the call once
// when it is approved.
func (g *Gate) resume(ctx context.Context, c *dispatch.Call, r approval.Request, id string, next dispatch.Handler) *dispatch.Result {
	tool := c.Tool
	cur, err := g.queue.Get(ctx, id)
	if errors.Is(err, approval.ErrNotFound) {
		return dispatch.Denied(fmt.Sprintf("%s: its approval request is unknown or expired; call again (without a request state) to ask anew", tool))
	}
	if err != nil {
		return g.decided(ctx, c, cur, err, next)
	}
	if cur.Owner != r.Owner || cur.Tool != r.Tool || cur.Call != r.Call || cur.Scope != r.Scope {
		return dispatch.Denied(fmt.Sprintf("%s: the request state names the approval of another call; call again without it to ask for this one", tool))
	}
	if cur.State == approval.Pending {
		if ans, ok := c.Rounds.Replies[inputKey]; ok {
			if approve, scope, aerr := decision(ans); aerr == nil {
				cur, err = g.queue.Decide(ctx, id, approve, scope, "elicitation:"+clientOr(r.Client), "")
				if errors.Is(err, approval.ErrDecided) {
					err = nil // the console came first: its decision counts
				}
			}
		}
	}
	if err == nil && cur.State == approval.Pending {
		cur, err = g.queue.Wait(ctx, cur, nil) // no usable answer: the console decides
	}
	return g.decided(ctx, c, cur, err, next)
}

// asking asks a person through ask (the caller's client) to decide a
// request.
func asking(ask dispatch.Asker) func(context.Context, approval.Request) (bool, approval.Scope, error) {
	return func(ctx context.Context, r approval.Request) (bool, approval.Scope, error) {
		ans, err := ask.Ask(ctx, form(r))
		if err != nil {
			return false, "", err
		}
		return decision(ans)
	}
}

// form is the form that asks for r's decision: a message with the exact
// tool and arguments, and one field "decision".
func form(r approval.Request) dispatch.Form {
	choices := []string{approveOnce, approveSession, deny}
	hint := "approve_once runs this call; approve_session also allows later " + r.Tool + " calls in this browser session; deny refuses it."
	if r.Scope == "" {
		// The call opens a new browser session: no session to approve for.
		choices = []string{approveOnce, deny}
		hint = "approve_once runs this call; deny refuses it."
	}
	msg := fmt.Sprintf("Approve this tool call?\n\nTool: %s\nArguments: %s\nWhy: %s\n\n"+
		"If nobody decides within %s it is denied. The operator console can decide it too (request %s).",
		r.Tool, r.Arguments, r.Reason, r.Deadline.Sub(r.Created).Round(time.Second), r.ID)
	return dispatch.Form{Message: msg, Field: decisionField, Title: "Decision", Description: hint, Choices: choices}
}

// decision maps a person's reply to the form. Declining or dismissing the
// form denies; an accepted form without a known decision is an error (the
// console decides).
func decision(ans dispatch.Reply) (bool, approval.Scope, error) {
	if !ans.Accepted {
		return false, "", nil
	}
	switch d, _ := ans.Fields[decisionField].(string); d {
	case approveOnce:
		return true, approval.Once, nil
	case approveSession:
		return true, approval.Session, nil
	case deny:
		return false, "", nil
	default:
		return false, "", fmt.Errorf("the client accepted the approval form without a decision (%q)", d)
	}
}

// Scope is the opaque key of a call's browser-session binding: a digest
// of its caller and its session handle, else its MCP session id (2025
// clients, or the MCP session a bus call acts in); "" for a call that
// opens a new browser session (it can have no grant). Handles and session
// ids are bearer secrets: only digests are stored.
func Scope(c *dispatch.Call) string {
	switch {
	case c.Handle != "":
		return scopeDigest(c.Caller.ID, "handle", c.Handle)
	case c.MCPSession != "":
		return scopeDigest(c.Caller.ID, "mcp", c.MCPSession)
	}
	return ""
}

func scopeDigest(caller, kind, id string) string {
	sum := sha256.Sum256([]byte("sovereign approval scope\x00" + caller + "\x00" + kind + "\x00" + id))
	return hex.EncodeToString(sum[:])
}

// callDigest identifies a call's exact tool and arguments (unredacted,
// the session handle included), so that a multi round-trip retry can only
// resume the approval of the very same call.
func callDigest(tool string, args any) string {
	b, _ := json.Marshal(args)
	sum := sha256.Sum256(append([]byte("sovereign approval call\x00"+tool+"\x00"), b...))
	return hex.EncodeToString(sum[:])
}

// ownerDigest is the opaque owner of an approval request.
func ownerDigest(caller string) string {
	sum := sha256.Sum256([]byte("sovereign approval owner\x00" + caller))
	return hex.EncodeToString(sum[:16])
}

func clientOr(c string) string {
	if c == "" {
		return "client"
	}
	return c
}

// record is the audit trail's view of a decided request.
func record(r approval.Request) *historyv1.Approval {
	a := &historyv1.Approval{
		State:     string(r.State),
		Scope:     string(r.Decision),
		DecidedBy: r.DecidedBy,
		WaitedMs:  r.Waited().Milliseconds(),
		RequestId: r.ID,
	}
	if !r.DecidedAt.IsZero() {
		a.DecidedAtUnixMilli = r.DecidedAt.UnixMilli()
	}
	return a
}
