// Package console is the operator console: a small server-rendered web UI
// (and the start of an admin JSON API under /api/) on the gateway's admin
// listener. It shows the approval queue live and decides requests, searches
// the audit trail, lists and closes live browser sessions, lists tokens and
// secrets by name, and is the agent's chat UI: conversations with the agent
// orchestrator, their runs live, and the model provider's settings.
//
// Every page and API route needs the admin token, as a Bearer header or as
// a session cookie obtained by logging in with it at /login. State changes
// are POST only and must come from the console's own origin when they ride
// on the cookie. The handler answers only Host values that cannot be a DNS
// rebinding: IP literals, localhost, and the names it is configured with.
//
// The console reaches its data only through [Sources], so it does not
// depend on how the gateway stores sessions or how the audit trail is read.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
)

// MinTokenLen is the shortest admin token New accepts.
const MinTokenLen = 16

// ApprovalQueue is what the console uses of the approval queue
// (*approval.Queue implements it).
type ApprovalQueue interface {
	// List returns the pending requests and the recently decided ones.
	List(ctx context.Context) ([]approval.Request, error)
	// Watch delivers every change of a request until ctx ends.
	Watch(ctx context.Context) (<-chan approval.Request, error)
	// Decide approves or denies a pending request; an error wrapping
	// approval.ErrDecided when it was already decided.
	Decide(ctx context.Context, id string, approve bool, scope approval.Scope, by, note string) (approval.Request, error)
}

// Session is one live browser session as the console shows it. It never
// holds a credential: ID is an opaque digest of the MCP session id or
// handle, which are bearer secrets.
type Session struct {
	// ID identifies the session for CloseSession: an opaque digest.
	ID string `json:"id"`
	// Kind is "mcp" (an MCP session) or "handle" (a session handle).
	Kind string `json:"kind"`
	// Owner is the caller's display name (a token name or a digest
	// prefix), never a credential.
	Owner          string `json:"owner"`
	Worker         string `json:"worker"`
	BrowserSession string `json:"browser_session"`
	// URL is the active tab's URL, "busy" when the worker did not answer
	// in time, or "" when unknown.
	URL     string    `json:"url"`
	Created time.Time `json:"created"`
	// Touched is the last time a call used the session.
	Touched time.Time `json:"touched"`
}

// Token is an API token as the console lists it: never its secret.
type Token struct {
	Name     string    `json:"name"`
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used,omitzero"`
	State    string    `json:"state"` // "active", "revoked", "expired"
}

// Secret is a stored secret as the console lists it: never its value.
type Secret struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated,omitzero"`
}

// Agent is what the chat pages use of the agent orchestrator (runs and
// provider settings) and of the history service's chat store. Failures
// are bus errors (*bus.Error) whose code picks the HTTP status:
// INVALID_ARGUMENT 400, NOT_FOUND 404, UNAVAILABLE 503, TIMEOUT 504, any
// other 502.
type Agent interface {
	// StartRun starts a run; it answers at once with the run (its chat id
	// set, a new chat's included) while the run goes on.
	StartRun(ctx context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error)
	GetRun(ctx context.Context, id string) (*agentv1.Run, error)
	// CancelRun asks a run to stop; by names who asked.
	CancelRun(ctx context.Context, id, by string) (*agentv1.Run, error)
	ListRuns(ctx context.Context, req *agentv1.ListRunsRequest) ([]*agentv1.Run, error)
	// Settings are the provider settings, never with the API key itself.
	Settings(ctx context.Context) (*agentv1.Settings, error)
	PutSettings(ctx context.Context, req *agentv1.PutSettingsRequest) (*agentv1.Settings, error)
	ListChats(ctx context.Context, req *historyv1.ListChatSessionsRequest) (*historyv1.ListChatSessionsResponse, error)
	// GetChat returns a chat session and its messages, oldest first.
	GetChat(ctx context.Context, id string) (*historyv1.GetChatSessionResponse, error)
	DeleteChat(ctx context.Context, id string) error
}

// Sources are where the console gets its data. A nil field shows its page
// as "not configured".
type Sources struct {
	Approvals    ApprovalQueue
	Audit        func(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error)
	Sessions     func(ctx context.Context) ([]Session, error)
	CloseSession func(ctx context.Context, id string) error
	Tokens       func(ctx context.Context) ([]Token, error)
	Secrets      func(ctx context.Context) ([]Secret, error)
	// Agent backs the chat pages and /api/agent/.
	Agent Agent
}

// ErrNotFound is what CloseSession returns (wrapped) for a session that is
// not there (any more).
var ErrNotFound = errors.New("not found")

// Config configures a console.
type Config struct {
	// Token is the admin token (at least MinTokenLen characters).
	Token string
	// Hosts are host names (besides localhost and IP literals) the console
	// answers, e.g. the host of --admin-listen.
	Hosts []string
	// SessionTTL is how long a login lasts (12 h when 0).
	SessionTTL time.Duration
	Sources    Sources
	// Admin are the admin API's sources (/admin/…, admin.go).
	Admin Admin
	Log   *slog.Logger
	// Now is the clock (time.Now when nil), for tests.
	Now func() time.Time
}

// DefaultSessionTTL is how long a console login lasts.
const DefaultSessionTTL = 12 * time.Hour

//go:embed templates/*.html static/*
var assets embed.FS

// Console is the operator console's http.Handler.
type Console struct {
	cfg     Config
	src     Sources
	log     *slog.Logger
	mux     *http.ServeMux
	pages   map[string]*template.Template
	static  http.Handler
	cookies *cookieKeys
	limiter *limiter

	mu      sync.Mutex
	revoked map[string]time.Time // nonces of logged-out cookies → expiry
}

// New returns the console. It refuses an admin token shorter than
// MinTokenLen characters.
func New(cfg Config) (*Console, error) {
	if len(cfg.Token) < MinTokenLen {
		return nil, fmt.Errorf("the admin token is %d characters long; it must have at least %d (generate one with `openssl rand -hex 32`)",
			len(cfg.Token), MinTokenLen)
	}
	if strings.TrimSpace(cfg.Token) != cfg.Token {
		return nil, errors.New("the admin token starts or ends with white space; remove it")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Console{
		cfg:     cfg,
		src:     cfg.Sources,
		log:     cfg.Log.With("component", "console"),
		cookies: newCookieKeys(cfg.Token),
		limiter: newLimiter(loginLimit, time.Minute, cfg.Now),
		revoked: map[string]time.Time{},
	}
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix("/static/", http.FileServerFS(sub))
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	c.mux = m
	m.Handle("GET /static/", c.static)
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.Handle("POST /logout", c.authed(c.logout))

	m.Handle("GET /{$}", c.authed(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	}))
	m.Handle("GET /approvals", c.authed(c.approvalsPage))
	m.Handle("POST /approvals/{id}", c.authed(c.decideForm))
	m.Handle("GET /audit", c.authed(c.auditPage))
	m.Handle("GET /audit/{id}", c.authed(c.auditDetail))
	m.Handle("GET /sessions", c.authed(c.sessionsPage))
	m.Handle("POST /sessions/{id}/close", c.authed(c.closeForm))
	m.Handle("GET /tokens", c.authed(c.tokensPage))
	m.Handle("GET /secrets", c.authed(c.secretsPage))

	m.Handle("GET /chat", c.authed(c.chatsPage))
	m.Handle("GET /chat/new", c.authed(c.chatPage))
	m.Handle("GET /chat/{id}", c.authed(c.chatPage))
	m.Handle("POST /chat/{id}/messages", c.authed(c.sendForm))
	m.Handle("POST /chat/{id}/stop", c.authed(c.stopForm))
	m.Handle("POST /chat/{id}/delete", c.authed(c.deleteChatForm))
	m.Handle("GET /chat/settings", c.authed(c.settingsPage))
	m.Handle("POST /chat/settings", c.authed(c.settingsForm))

	c.adminRoutes(m)

	m.Handle("GET /api/approvals", c.authed(c.apiApprovals))
	m.Handle("POST /api/approvals/{id}", c.authed(c.apiDecide))
	m.Handle("GET /api/approvals/events", c.authed(c.apiApprovalEvents))
	m.Handle("GET /api/audit", c.authed(c.apiAudit))
	m.Handle("GET /api/sessions", c.authed(c.apiSessions))
	m.Handle("POST /api/sessions/{id}/close", c.authed(c.apiClose))
	m.Handle("GET /api/tokens", c.authed(c.apiTokens))
	m.Handle("GET /api/secrets", c.authed(c.apiSecrets))
	m.Handle("POST /api/agent/runs", c.authed(c.apiStartRun))
	m.Handle("GET /api/agent/runs", c.authed(c.apiListRuns))
	m.Handle("GET /api/agent/runs/{id}", c.authed(c.apiGetRun))
	m.Handle("POST /api/agent/runs/{id}/cancel", c.authed(c.apiCancelRun))
	m.Handle("GET /api/agent/chats", c.authed(c.apiListChats))
	m.Handle("GET /api/agent/chats/{id}", c.authed(c.apiGetChat))
	m.Handle("POST /api/agent/chats/{id}/messages", c.authed(c.apiSendMessage))
	m.Handle("DELETE /api/agent/chats/{id}", c.authed(c.apiDeleteChat))
	m.Handle("POST /api/agent/chats/{id}/delete", c.authed(c.apiDeleteChat))
	m.Handle("GET /api/agent/settings", c.authed(c.apiGetSettings))
	m.Handle("PUT /api/agent/settings", c.authed(c.apiPutSettings))
	m.Handle("/api/", c.authed(func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "no such admin API route: "+r.Method+" "+r.URL.Path)
	}))
}

// ServeHTTP checks the Host, sets the security headers and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !c.hostAllowed(r.Host) {
		http.Error(w, fmt.Sprintf("forbidden: Host %q is not served by the admin listener; "+
			"open the console at 127.0.0.1 or localhost, or at the address given to --admin-listen", r.Host), http.StatusForbidden)
		return
	}
	c.mux.ServeHTTP(w, r)
}
