// Package login serves the Nostr identities of browser sessions: the
// identity tools (login, switch_identity, logout, login_status; catalog
// Tool.Identity) and --require-login.
//
// The signer service (<prefix>.signer.*) holds each browser session's
// identity under a scope: the worker's session id of the call's browser
// session, bound exactly as for a browser tool. After a login or logout
// the worker is told the pubkey (ToolRequest.set_identity), so that the
// session's pages get, or lose, window.nostr. A login the worker does not
// take is logged out again at the signer: nothing stays half-logged-in.
// When the gateway or a worker closes a browser session, the worker logs
// its scope out itself.
//
// The login arguments are secrets: they go to the signer and nowhere else
// (dispatch.AuditArguments hides them; no log line or result carries
// them).
package login

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/signerbus"
)

// cleanupTimeout bounds the requests that undo a failed login.
const cleanupTimeout = 5 * time.Second

// Session is the browser session an identity tool call acts in, bound by
// the gateway exactly as for a browser tool.
type Session interface {
	// Scope is its worker's session id: the scope of its identity at the
	// signer.
	Scope() string
	// SetIdentity tells its worker the session's pubkey ("" after a
	// logout).
	SetIdentity(ctx context.Context, pubkey string) error
	// Lost reports whether err of its worker says the session is gone for
	// good; Unbind then forgets it (the next call opens a fresh one).
	Lost(ctx context.Context, err error) bool
	Unbind(ctx context.Context)
	// ErrorText is the message of a failure of its worker in tool t.
	ErrorText(ctx context.Context, t catalog.Tool, err error) string
}

// Identities acts on the identities of browser sessions at the signer
// (<prefix>.signer.*) and on their workers.
type Identities struct {
	bus          *bus.Conn
	requireLogin bool // browser tools refuse until their session logged in
	log          *slog.Logger
}

// New returns the identities of the signer on c.
func New(c *bus.Conn, requireLogin bool, log *slog.Logger) *Identities {
	return &Identities{bus: c, requireLogin: requireLogin, log: log}
}

// Run runs identity tool t of call c in session s within limit: lr is the
// signer request of login and switch_identity (nil for the others).
func (x *Identities) Run(ctx context.Context, t catalog.Tool, c *dispatch.Call, lr *signerv1.Login, s Session, limit time.Duration) *dispatch.Result {
	switch {
	case t.Name == "login_status":
		return x.status(ctx, t, s, c.Caller.ID, limit)
	case t.Name == "logout":
		return x.logout(ctx, t, s, limit)
	case lr != nil:
		lr.Scope = s.Scope()
		lr.Owner = signerOwner(c.Caller.ID)
		return x.login(ctx, t, c.Progress, s, lr, t.Name == "switch_identity", limit)
	}
	return dispatch.ErrorText(t.Name + ": internal error: no handler")
}

// Move moves the identity of a browser session restored elsewhere to its
// new scope (best effort: a gateway without a signer has none to move).
func (x *Identities) Move(ctx context.Context, from, to string) {
	if _, err := call(ctx, x, signerbus.Move, &signerv1.Move{FromScope: from, ToScope: to}); err != nil && x.signerRunning(ctx) {
		x.log.WarnContext(ctx, "move the restored session's identity", "err", err)
	}
}

// login logs session s in with lr (switching: after logging its
// identity out), then tells its worker the new pubkey.
func (x *Identities) login(ctx context.Context, t catalog.Tool, progress dispatch.Progress, s Session, lr *signerv1.Login, switching bool, limit time.Duration) *dispatch.Result {
	var prev *signerv1.StatusResponse // the identity switch_identity freed
	if switching {
		st, err := call(ctx, x, signerbus.Status, &signerv1.Status{Scope: lr.GetScope()})
		if err != nil {
			return dispatch.ErrorText(x.errorText(ctx, t, err, limit))
		}
		if st.GetState() == signerv1.LoginState_LOGIN_STATE_LOGGED_IN {
			if _, err := call(ctx, x, signerbus.Logout, &signerv1.Logout{Scope: lr.GetScope()}); err != nil {
				return dispatch.ErrorText(x.errorText(ctx, t, err, limit) + "; the previous identity is still logged in")
			}
			prev = st
		}
	}
	resp, authURL, err := x.signerLogin(ctx, progress, lr)
	if err != nil {
		msg := x.errorText(ctx, t, err, limit)
		if authURL != "" && (ctx.Err() != nil || bus.Is(err, commonv1.ErrorCode_TIMEOUT)) {
			msg += fmt.Sprintf(" (the bunker asked for approval at %s)", authURL)
		}
		switch {
		case ctx.Err() != nil:
			// Given up on without an answer: the signer may still finish
			// it. Leave nothing half-logged-in.
			x.forget(ctx, s)
			msg += "; this browser session was logged out, so that no login completes unseen"
		case prev != nil:
			x.forget(ctx, s) // the signer holds none now; the worker must not think so
			msg += fmt.Sprintf("; the previous identity %s was logged out first, so this browser session is now logged out", prev.GetNpub())
		case !switching && !errors.As(err, new(*dispatch.ToolError)):
			msg += "; the browser session's identity is unchanged"
		}
		return dispatch.ErrorText(msg)
	}
	if err := s.SetIdentity(ctx, resp.GetPubkey()); err != nil {
		text := s.ErrorText(ctx, t, err)
		if s.Lost(ctx, err) {
			s.Unbind(ctx)
		}
		x.signerForget(ctx, lr.GetScope())
		return dispatch.ErrorText(fmt.Sprintf("%s: the signer logged %s in, but the browser session did not take the identity (%s); "+
			"it was logged out again", t.Name, resp.GetNpub(), text))
	}

	method := resp.GetMethod()
	if method == signerv1.Method_METHOD_UNSPECIFIED {
		method = lr.GetMethod()
	}
	name := catalog.MethodName(method)
	out := map[string]any{"state": "logged_in", "method": name, "pubkey": resp.GetPubkey(), "npub": resp.GetNpub()}
	detail := "method: " + name
	switch method {
	case signerv1.Method_METHOD_LOCAL:
		switch {
		case lr.GetPubkey() != "":
			detail += ", loaded from the remembered identities"
		case lr.GetRemember():
			detail += ", remembered encrypted by the signer"
		}
	case signerv1.Method_METHOD_SEED:
		detail += fmt.Sprintf(", account %d", lr.GetAccount())
		out["account"] = lr.GetAccount()
		if lr.GetRemember() {
			detail += ", remembered encrypted by the signer"
		}
	case signerv1.Method_METHOD_READONLY:
		detail += ": it gives its public key but cannot sign or decrypt"
	case signerv1.Method_METHOD_NSIGNER:
		tg := lr.GetNsigner()
		detail += fmt.Sprintf(" over %s, key index %d", tg.GetTransport(), tg.GetIndex())
		out["transport"], out["device"], out["index"] = tg.GetTransport(), tg.GetDevice(), tg.GetIndex()
	}
	if lr.GetMethod() == signerv1.Method_METHOD_LOCAL || lr.GetMethod() == signerv1.Method_METHOD_SEED {
		out["remembered"] = lr.GetRemember() || lr.GetPubkey() != ""
	}
	var text strings.Builder
	if switching {
		text.WriteString("Switched identity. ")
		if prev != nil {
			out["previous_npub"] = prev.GetNpub()
		}
	}
	fmt.Fprintf(&text, "Logged in as %s (%s)\npubkey: %s\nPages of this browser session get window.nostr (NIP-07) for this identity.",
		resp.GetNpub(), detail, resp.GetPubkey())
	if prev != nil {
		fmt.Fprintf(&text, "\nThe previous identity %s was logged out.", prev.GetNpub())
	}
	return dispatch.Structured(text.String(), out)
}

// logout wipes the identity of session s at the signer and tells its
// worker.
func (x *Identities) logout(ctx context.Context, t catalog.Tool, s Session, limit time.Duration) *dispatch.Result {
	resp, err := call(ctx, x, signerbus.Logout, &signerv1.Logout{Scope: s.Scope()})
	if err != nil {
		return dispatch.ErrorText(x.errorText(ctx, t, err, limit))
	}
	// Also when there was nothing to wipe: a worker may still think it
	// has an identity the signer lost (a signer restart).
	if err := s.SetIdentity(ctx, ""); err != nil {
		if !s.Lost(ctx, err) {
			return dispatch.ErrorText(fmt.Sprintf("%s: the identity was wiped at the signer (window.nostr calls now fail), "+
				"but the browser session did not confirm removing window.nostr: %s", t.Name, s.ErrorText(ctx, t, err)))
		}
		s.Unbind(ctx) // the session is gone, and its identity with it
	}
	text := "Logged out: the Nostr identity of this browser session was wiped from the signer; new pages get no window.nostr."
	if !resp.GetWasLoggedIn() {
		text = "Not logged in: this browser session had no Nostr identity to log out."
	}
	return dispatch.Structured(text, map[string]any{"state": "logged_out", "was_logged_in": resp.GetWasLoggedIn()})
}

// status describes the identity of session s, the identities the signer
// remembers and its origin policy.
func (x *Identities) status(ctx context.Context, t catalog.Tool, s Session, caller string, limit time.Duration) *dispatch.Result {
	st, err := call(ctx, x, signerbus.Status, &signerv1.Status{Scope: s.Scope(), Owner: signerOwner(caller)})
	if err != nil {
		return dispatch.ErrorText(x.errorText(ctx, t, err, limit))
	}
	out := map[string]any{"state": "logged_out", "remembered": nonNil(st.GetRemembered()), "policy": nonNil(st.GetPolicy())}
	var text strings.Builder
	if st.GetState() == signerv1.LoginState_LOGIN_STATE_LOGGED_IN {
		name := catalog.MethodName(st.GetMethod())
		out["state"], out["method"], out["pubkey"], out["npub"] = "logged_in", name, st.GetPubkey(), st.GetNpub()
		fmt.Fprintf(&text, "Logged in as %s (method: %s)\npubkey: %s", st.GetNpub(), name, st.GetPubkey())
		if s := st.GetLinkState(); s != "" {
			out["link_state"] = s
			fmt.Fprintf(&text, "\nsigner link: %s", s)
		}
		if e := st.GetLinkError(); e != "" {
			out["link_error"] = e
			fmt.Fprintf(&text, " (last error: %s)", e)
		}
		if u := st.GetPendingAuthUrl(); u != "" {
			out["pending_auth_url"] = u
			fmt.Fprintf(&text, "\nA request waits for approval in the bunker: open %s", u)
		}
	} else {
		text.WriteString("Not logged in: this browser session has no Nostr identity; " + catalog.LoginHint + ".")
	}
	if r := st.GetRemembered(); len(r) > 0 {
		fmt.Fprintf(&text, "\nRemembered identities (log in with method local and only the npub): %s", strings.Join(r, ", "))
	}
	if p := st.GetPolicy(); len(p) > 0 {
		text.WriteString("\nwindow.nostr origin policy (first match wins):")
		for _, line := range p {
			text.WriteString("\n- " + line)
		}
	}
	return dispatch.Structured(text.String(), out)
}

// Refusal is the refusal of a browser tool call whose session (the
// worker's session id) has no identity while the gateway requires a
// login; "" lets the call run.
func (x *Identities) Refusal(ctx context.Context, t catalog.Tool, sessionID string) string {
	if !x.requireLogin {
		return ""
	}
	st, err := call(ctx, x, signerbus.Status, &signerv1.Status{Scope: sessionID})
	if err != nil {
		var te *dispatch.ToolError
		if errors.As(err, &te) {
			return fmt.Sprintf("%s: this gateway requires a Nostr login first, but %s", t.Name, te.Error())
		}
		return fmt.Sprintf("%s: this gateway requires a Nostr login first, but the signer could not say whether this browser session "+
			"has logged in: %s", t.Name, bus.MessageOf(err))
	}
	if st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_IN {
		return "this gateway requires a Nostr login first: " + catalog.LoginHint
	}
	return ""
}

// signerOwner is the opaque owner of the identities a caller remembers at
// the signer: another token (or OAuth subject) neither lists nor loads them.
func signerOwner(caller string) string {
	sum := sha256.Sum256([]byte("sovereign signer owner\x00" + caller))
	return hex.EncodeToString(sum[:16])
}

// call sends req to the signer's endpoint e. When nothing answers
// there, the error is a *dispatch.ToolError that says the signer is not running.
//
// Everything but a login is quick for a running signer: it gets
// signerQuickTimeout, so that a signer that just died (its subscription
// not yet gone from the NATS server) or hangs is reported in seconds,
// not at the tool's deadline.
func call[Req, Resp proto.Message](ctx context.Context, x *Identities, e bus.Endpoint[Req, Resp], req Req) (Resp, error) {
	outer := ctx
	if e.Name != signerbus.Login.Name {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, signerQuickTimeout)
		defer cancel()
	}
	resp, err := e.Call(ctx, x.bus, req)
	switch {
	case err == nil:
	case outer.Err() == nil && ctx.Err() != nil:
		err = dispatch.ToolErrorf("the signer service did not answer within %s (%s): it may be restarting or overloaded; see its logs",
			signerQuickTimeout, e.Subject(x.bus))
	case bus.Is(err, commonv1.ErrorCode_UNAVAILABLE) && ctx.Err() == nil && !x.signerRunning(ctx):
		err = dispatch.ToolErrorf("the signer service is not running (%s has no responders): start `sovereign signer` or use `sovereign up`",
			signerbus.All(x.bus))
	}
	return resp, err
}

// signerQuickTimeout bounds signer requests other than login.
const signerQuickTimeout = 10 * time.Second

// signerRunning reports whether anything serves the signer's subjects (an
// UNAVAILABLE error may also be a device the signer cannot reach).
func (x *Identities) signerRunning(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return signerbus.Serving(ctx, x.bus)
}

// signerLogin sends lr to the signer and, while it runs, forwards each
// LoginProgress the signer publishes (a NIP-46 bunker's auth_url) to the
// caller. It returns the last auth_url seen too.
func (x *Identities) signerLogin(ctx context.Context, progress dispatch.Progress, lr *signerv1.Login) (*signerv1.LoginResponse, string, error) {
	nc := x.bus.NATS()
	updates := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(nc.NewInbox(), updates)
	if err != nil {
		return nil, "", fmt.Errorf("subscribe to login progress: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The subscription reaches the server before the request, on the same
	// connection: no progress is missed.
	lr.ProgressSubject = sub.Subject
	type reply struct {
		resp *signerv1.LoginResponse
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		resp, err := call(ctx, x, signerbus.Login, lr)
		done <- reply{resp, err}
	}()
	authURL := ""
	for n := 1; ; {
		select {
		case r := <-done:
			return r.resp, authURL, r.err
		case m := <-updates:
			var p signerv1.LoginProgress
			if err := proto.Unmarshal(m.Data, &p); err != nil {
				x.log.WarnContext(ctx, "bad login progress message from the signer", "err", err)
				continue
			}
			if p.GetAuthUrl() != "" {
				authURL = p.GetAuthUrl()
			}
			if x.notify(ctx, progress, n, &p) {
				n++
			}
		}
	}
}

// notify tells the caller what a login waits for: a progress report
// and a notice (a bunker's auth_url is a warning: the person must act). It
// reports whether there was anything to say.
func (x *Identities) notify(ctx context.Context, progress dispatch.Progress, n int, p *signerv1.LoginProgress) bool {
	text, warn := strings.TrimSpace(p.GetMessage()), false
	if u := p.GetAuthUrl(); u != "" {
		text, warn = fmt.Sprintf("Open %s to approve this login in your bunker; waiting…", u), true
	}
	if text == "" {
		return false
	}
	x.log.InfoContext(ctx, "login waits for a person", "auth_url", p.GetAuthUrl() != "")
	if err := progress.Report(ctx, float64(n), 0, text); err != nil {
		x.log.InfoContext(ctx, "send login progress", "err", err)
	}
	if err := progress.Notify(ctx, "sovereign.login", text, warn); err != nil {
		x.log.InfoContext(ctx, "send login message", "err", err)
	}
	return true
}

// forget logs session s out at the signer and on its worker, on a
// context of its own (the call's may be over).
func (x *Identities) forget(ctx context.Context, s Session) {
	x.signerForget(ctx, s.Scope())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.SetIdentity(ctx, ""); err != nil && !s.Lost(ctx, err) {
		x.log.WarnContext(ctx, "remove window.nostr after a failed login", "err", err)
	}
}

// signerForget logs scope out at the signer, on a context of its own.
func (x *Identities) signerForget(ctx context.Context, scope string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := call(ctx, x, signerbus.Logout, &signerv1.Logout{Scope: scope}); err != nil {
		x.log.ErrorContext(ctx, "log out after a failed login", "err", err)
	}
}

// errorText maps a signer failure to the message of its kind: the
// signer's own message (which never holds a secret) for what it refused.
func (x *Identities) errorText(ctx context.Context, t catalog.Tool, err error, limit time.Duration) string {
	var te *dispatch.ToolError
	if errors.As(err, &te) {
		return te.Error()
	}
	// The signer's copy of the deadline may expire first, and answer
	// TIMEOUT: the call's deadline all the same.
	deadline, _ := ctx.Deadline()
	callDeadline := bus.Is(err, commonv1.ErrorCode_TIMEOUT) && time.Until(deadline) < 250*time.Millisecond
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return t.Name + " was cancelled"
	case ctx.Err() != nil || callDeadline:
		if t.Name == "login" || t.Name == "switch_identity" {
			return fmt.Sprintf("%s did not finish within %s (a nip46 bunker or an nsigner device may wait for a person to approve; "+
				"the gateway's --login-timeout sets how long)", t.Name, limit)
		}
		return fmt.Sprintf("%s did not finish within %s", t.Name, limit)
	}
	msg := bus.MessageOf(err)
	if !strings.HasPrefix(msg, t.Name) {
		msg = t.Name + ": " + msg
	}
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_INVALID_ARGUMENT, commonv1.ErrorCode_NOT_FOUND, commonv1.ErrorCode_FORBIDDEN,
		commonv1.ErrorCode_UNAVAILABLE, commonv1.ErrorCode_TIMEOUT:
		// What the signer refused, and said why.
	default:
		x.log.ErrorContext(ctx, "signer request failed", "tool", t.Name, "err", err)
	}
	return msg
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
