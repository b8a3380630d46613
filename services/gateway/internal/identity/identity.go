// Package identity establishes who a request acts for: API tokens
// (svt_…, kit/tokens) and, with an OAuth issuer, JWT access tokens. The
// Authenticator answers 401 to a request without valid credentials (when
// they are required) and puts the Caller in the context of the others;
// it also refuses to serve on an address other machines reach without any
// way to authenticate.
package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/hostguard"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/oauth"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Kinds of callers.
const (
	KindAnonymous = "anonymous" // no credential, on a gateway that does not require one
	KindToken     = "token"     // an API token (kit/tokens)
	KindOAuth     = "oauth"     // a JWT access token of the configured OAuth issuer
)

// Anonymous is the caller identity of requests without credentials.
const Anonymous = "anonymous"

var anonymousCaller = dispatch.Caller{Kind: KindAnonymous, ID: Anonymous, Name: Anonymous}

type callerKey struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c dispatch.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// From returns the request's caller (anonymous when authentication did
// not run).
func From(ctx context.Context) dispatch.Caller {
	if c, ok := ctx.Value(callerKey{}).(dispatch.Caller); ok {
		return c
	}
	return anonymousCaller
}

// Config is a gateway's authentication. A gateway
// listening beyond loopback asks every request for an API token or, with
// OAuthIssuer, a JWT access token; on loopback only when RequireAuth.
type Config struct {
	// InsecureNoAuth lets a gateway listening beyond loopback serve
	// without credentials (a warning is logged at every start).
	InsecureNoAuth bool
	// RequireAuth asks for credentials on loopback too.
	RequireAuth bool
	// PublicURL is the base URL clients reach the gateway at, without
	// /mcp (https://mcp.example.com): the OAuth resource is PublicURL/mcp.
	PublicURL string
	// OAuthIssuer makes the gateway an OAuth 2.1 resource server that
	// accepts JWT access tokens of this issuer (needs PublicURL).
	OAuthIssuer string
	// OAuthAudience is the audience the JWTs must name (PublicURL/mcp
	// when empty).
	OAuthAudience string
	// OAuthJWKSURL is the issuer's JWKS (discovered from its metadata
	// when empty).
	OAuthJWKSURL string
}

// Authenticator checks the credentials of /mcp requests: API tokens
// (svt_…) against kit/tokens, other bearer tokens as OAuth JWT access
// tokens when an issuer is configured.
type Authenticator struct {
	cfg      Config
	tokens   *tokens.Store
	oauth    *oauth.Verifier // nil without an OAuth issuer
	resource string          // the MCP endpoint's public URL (OAuth mode)
	required atomic.Bool     // a request without credentials gets 401
	// metadataURL is the RFC 9728 document (OAuth mode).
	metadataURL string
	log         *slog.Logger
	stop        func() // stops the OAuth key fetch
}

// Reasons of 401 answers.
const (
	reasonMissing = "missing bearer token"
	reasonInvalid = "invalid or revoked token"
	reasonScheme  = `unsupported authorization: send "Authorization: Bearer <token>"`
)

// Wrap answers 401 to a request whose credentials are missing (when they
// are required) or not valid, and puts the caller in the context of the
// others.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" {
			if a.required.Load() {
				a.deny(w, reasonMissing, "")
				return
			}
			next.ServeHTTP(w, r.WithContext(With(r.Context(), anonymousCaller)))
			return
		}
		scheme, credential, _ := strings.Cut(header, " ")
		credential = strings.TrimSpace(credential)
		if !strings.EqualFold(scheme, "Bearer") || credential == "" {
			a.deny(w, reasonScheme, "invalid_request")
			return
		}
		c, err := a.authenticate(r.Context(), credential)
		if err != nil {
			// The error says why (unknown id, revoked, bad signature…) and
			// never holds the credential.
			a.log.InfoContext(r.Context(), "refused credential", "reason", err.Error(), "remote", r.RemoteAddr)
			a.deny(w, reasonInvalid, "invalid_token")
			return
		}
		next.ServeHTTP(w, r.WithContext(With(r.Context(), c)))
	})
}

// authenticate checks one bearer credential.
func (a *Authenticator) authenticate(ctx context.Context, credential string) (dispatch.Caller, error) {
	if strings.HasPrefix(credential, tokens.Prefix) {
		t, err := a.tokens.Verify(credential)
		if err != nil {
			return dispatch.Caller{}, err
		}
		return dispatch.Caller{
			Kind: KindToken, ID: "token:" + t.ID, Name: t.Name,
			URLAllow: t.URLAllow, URLBlock: t.URLBlock, Approve: t.Approve, MaxSessions: t.MaxSessions,
		}, nil
	}
	if a.oauth == nil {
		return dispatch.Caller{}, errors.New("not an API token (svt_…), and no OAuth issuer is configured")
	}
	sub, err := a.oauth.Verify(ctx, credential)
	if err != nil {
		return dispatch.Caller{}, err
	}
	return dispatch.Caller{Kind: KindOAuth, ID: sub.ID, Name: sub.Name}, nil
}

// Revoked reports whether c's API token was revoked or deleted: the
// approval gate checks it again after a call waited (approve.Credentials).
// Other credentials are not revoked while a call runs.
func (a *Authenticator) Revoked(c dispatch.Caller) bool {
	if c.Kind != KindToken {
		return false
	}
	t, ok := a.tokens.Lookup(strings.TrimPrefix(c.ID, "token:"))
	return !ok || t.Revoked()
}

// deny answers 401 with a WWW-Authenticate challenge (RFC 6750, and the
// RFC 9728 metadata in OAuth mode).
func (a *Authenticator) deny(w http.ResponseWriter, reason, code string) {
	challenge := `Bearer realm="sovereign"`
	if a.metadataURL != "" {
		challenge += `, resource_metadata="` + a.metadataURL + `"`
	}
	if code != "" {
		challenge += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "unauthorized: "+reason, http.StatusUnauthorized)
}

// exposedHost reports whether a listen host reaches beyond this machine:
// every interface (""), an address that is not loopback, or a host name
// other than localhost.
func exposedHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return !ip.IsLoopback()
	}
	return true
}

func exposedAddr(addr net.Addr) bool {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP == nil || !tcp.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	return err != nil || exposedHost(host)
}

// checkExposed refuses to serve on an exposed address without any way to
// authenticate: no active API token, no OAuth issuer, and no
// --insecure-no-auth.
func (a *Authenticator) checkExposed(ctx context.Context, addr string) error {
	if a.cfg.InsecureNoAuth || a.oauth != nil {
		return nil
	}
	n, err := a.tokens.Count(ctx)
	if err != nil {
		return fmt.Errorf("count API tokens before serving on %s: %w", addr, err)
	}
	if n > 0 {
		return nil
	}
	return fmt.Errorf("refusing to serve MCP on %s without authentication: that address is reachable from other machines and no API token exists. "+
		"Create one with `sovereign token create --name <name>` and start again; clients then send \"Authorization: Bearer <token>\" "+
		"(with `sovereign up`, whose NATS runs only while it does: start it once without --listen, create the token, stop it and start it again with --listen). "+
		"Or configure OAuth with --oauth-issuer, listen on 127.0.0.1 only, or pass --insecure-no-auth to let anyone who reaches it drive the browsers", addr)
}

// metadataPath serves the OAuth protected resource metadata (RFC 9728);
// metadataPath+"/mcp" serves it too (the path-suffixed form).
const metadataPath = "/.well-known/oauth-protected-resource"

// serveMetadata answers the RFC 9728 document (OAuth mode only).
func (a *Authenticator) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if a.oauth == nil {
		http.Error(w, "not found: this gateway has no OAuth issuer configured (--oauth-issuer)", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 a.resource,
		"authorization_servers":    []string{a.oauth.Issuer()},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Sovereign browser fleet",
	})
}

// Open opens the API token store of the bus prefix and sets up the
// authentication of a gateway listening on listen: credentials are
// required from the start when listen is exposed (CheckServe decides again
// on the real listener), and a gateway that would listen beyond loopback
// with no way to authenticate is refused here already, before it serves.
// With an OAuth issuer it fetches the issuer's keys in the background
// until Close.
func Open(ctx context.Context, nc *nats.Conn, prefix string, cfg Config, listen string, log *slog.Logger) (_ *Authenticator, err error) {
	ts, err := tokens.Open(ctx, nc, prefix)
	if err != nil {
		return nil, fmt.Errorf("API tokens: %w", err)
	}
	a := &Authenticator{cfg: cfg, tokens: ts, log: log, stop: func() {}}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if cfg.OAuthIssuer != "" {
		base := strings.TrimSuffix(cfg.PublicURL, "/")
		a.resource = base + "/mcp"
		audience := cfg.OAuthAudience
		if audience == "" {
			audience = a.resource
		}
		a.oauth = oauth.New(cfg.OAuthIssuer, audience, cfg.OAuthJWKSURL, log)
		a.metadataURL = base + metadataPath
		// Fetch the keys now, so that a wrong issuer shows in the log at
		// start rather than at the first client; Close stops the fetch.
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := a.oauth.Refresh(bg); err != nil && bg.Err() == nil {
				log.Warn("OAuth: cannot fetch the issuer's signing keys yet (JWT access tokens are refused until it works)",
					"issuer", a.oauth.Issuer(), "err", err)
			}
		}()
		a.stop = func() { cancel(); <-done }
	}
	host, _, herr := net.SplitHostPort(listen)
	exposed := herr == nil && exposedHost(host)
	a.required.Store(cfg.RequireAuth || exposed && !cfg.InsecureNoAuth)
	if exposed {
		if err := a.checkExposed(ctx, listen); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Close stops the OAuth key fetch and closes the token store.
func (a *Authenticator) Close() {
	a.stop()
	a.tokens.Close()
}

// Tokens is the API token store, for surfaces that list tokens (the
// operator console).
func (a *Authenticator) Tokens() *tokens.Store { return a.tokens }

// Routes serves the OAuth protected resource metadata, behind the Host
// and Origin guard.
func (a *Authenticator) Routes(mux *http.ServeMux, guard *hostguard.Guard) {
	h := guard.Wrap(http.HandlerFunc(a.serveMetadata))
	mux.Handle(metadataPath, h)
	mux.Handle(metadataPath+"/mcp", h)
}

// CheckServe runs as the gateway starts serving on ln: on an address reachable from
// other machines it requires credentials (unless --insecure-no-auth, which
// it warns about), and refuses to serve without any way to authenticate.
// When it refuses, it closes ln (the caller still Closes the gateway).
func (a *Authenticator) CheckServe(ln net.Listener) error {
	addr := ln.Addr().String()
	exposed := exposedAddr(ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if exposed {
		if err := a.checkExposed(ctx, addr); err != nil {
			_ = ln.Close()
			return err
		}
		if a.cfg.InsecureNoAuth {
			a.log.Warn("--insecure-no-auth: serving MCP WITHOUT authentication on an address other machines can reach; "+
				"anyone who reaches it drives the browsers. Create an API token (sovereign token create --name <name>) and drop the flag",
				"addr", addr)
		} else {
			a.required.Store(true)
		}
	}
	if a.required.Load() && a.oauth == nil {
		if n, err := a.tokens.Count(ctx); err == nil && n == 0 {
			a.log.Warn("authentication is required and no API token exists: every MCP request is refused until you create one with 'sovereign token create --name <name>'")
		}
	}
	a.log.Info("MCP authentication", "required", a.required.Load(), "oauth_issuer", a.cfg.OAuthIssuer, "api_tokens_bucket", a.tokens.BucketName())
	return nil
}

// OwnerName names a session owner for display: the API token's name for
// "token:<id>" (while the gateway knows the token), else the identity
// itself ("oauth:<digest>", "anonymous").
func (a *Authenticator) OwnerName(owner string) string {
	if id, ok := strings.CutPrefix(owner, "token:"); ok {
		if t, ok := a.tokens.Lookup(id); ok {
			return t.Name
		}
	}
	return owner
}
