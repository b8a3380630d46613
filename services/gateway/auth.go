package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/hostguard"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/oauth"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Kinds of callers.
const (
	KindAnonymous = "anonymous" // no credential, on a gateway that does not require one
	KindToken     = "token"     // an API token (kit/tokens)
	KindOAuth     = "oauth"     // a JWT access token of the configured OAuth issuer
)

// Caller is who a request acts for, as authentication established it.
type Caller = dispatch.Caller

var anonymousCaller = Caller{Kind: KindAnonymous, ID: Anonymous, Name: Anonymous}

type callerKey struct{}

// withCallerInfo returns ctx carrying c.
func withCallerInfo(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerInfo returns the request's caller (anonymous when authentication
// did not run).
func callerInfo(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return anonymousCaller
}

// authenticator checks the credentials of /mcp requests: API tokens
// (svt_…) against kit/tokens, other bearer tokens as OAuth JWT access
// tokens when an issuer is configured.
type authenticator struct {
	tokens   *tokens.Store
	oauth    *oauth.Verifier // nil without --oauth-issuer
	resource string          // the MCP endpoint's public URL (OAuth mode)
	required atomic.Bool     // a request without credentials gets 401
	// metadataURL is the RFC 9728 document (OAuth mode).
	metadataURL string
	log         *slog.Logger
}

// Reasons of 401 answers.
const (
	reasonMissing = "missing bearer token"
	reasonInvalid = "invalid or revoked token"
	reasonScheme  = `unsupported authorization: send "Authorization: Bearer <token>"`
)

// wrap answers 401 to a request whose credentials are missing (when they
// are required) or not valid, and puts the caller in the context of the
// others.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" {
			if a.required.Load() {
				a.deny(w, reasonMissing, "")
				return
			}
			next.ServeHTTP(w, r.WithContext(withCallerInfo(r.Context(), anonymousCaller)))
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
		next.ServeHTTP(w, r.WithContext(withCallerInfo(r.Context(), c)))
	})
}

// authenticate checks one bearer credential.
func (a *authenticator) authenticate(ctx context.Context, credential string) (Caller, error) {
	if strings.HasPrefix(credential, tokens.Prefix) {
		t, err := a.tokens.Verify(credential)
		if err != nil {
			return Caller{}, err
		}
		return Caller{
			Kind: KindToken, ID: "token:" + t.ID, Name: t.Name,
			URLAllow: t.URLAllow, URLBlock: t.URLBlock, Approve: t.Approve, MaxSessions: t.MaxSessions,
		}, nil
	}
	if a.oauth == nil {
		return Caller{}, errors.New("not an API token (svt_…), and no OAuth issuer is configured")
	}
	sub, err := a.oauth.Verify(ctx, credential)
	if err != nil {
		return Caller{}, err
	}
	return Caller{Kind: KindOAuth, ID: sub.ID, Name: sub.Name}, nil
}

// deny answers 401 with a WWW-Authenticate challenge (RFC 6750, and the
// RFC 9728 metadata in OAuth mode).
// Revoked reports whether c's API token was revoked or deleted: the
// approval gate checks it again after a call waited (approve.Credentials).
// Other credentials are not revoked while a call runs.
func (a *authenticator) Revoked(c Caller) bool {
	if c.Kind != KindToken || a.tokens == nil {
		return false
	}
	t, ok := a.tokens.Lookup(strings.TrimPrefix(c.ID, "token:"))
	return !ok || t.Revoked()
}

func (a *authenticator) deny(w http.ResponseWriter, reason, code string) {
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
func (g *Gateway) checkExposed(ctx context.Context, addr string) error {
	if g.cfg.InsecureNoAuth || g.auth.oauth != nil {
		return nil
	}
	n, err := g.auth.tokens.Count(ctx)
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

// Tokens returns the gateway's API token store, for surfaces that list
// tokens (the operator console).
func (g *Gateway) Tokens() *tokens.Store { return g.auth.tokens }

// newAuthenticator checks requests against ts, and JWTs of the OAuth issuer
// when one is configured. Credentials are required from the start when
// cfg.Listen is exposed (checkServe decides again on the real listener).
func newAuthenticator(cfg Config, ts *tokens.Store, log *slog.Logger) *authenticator {
	a := &authenticator{tokens: ts, log: log}
	if cfg.OAuthIssuer != "" {
		base := strings.TrimSuffix(cfg.PublicURL, "/")
		a.resource = base + "/mcp"
		audience := cfg.OAuthAudience
		if audience == "" {
			audience = a.resource
		}
		a.oauth = oauth.New(cfg.OAuthIssuer, audience, cfg.OAuthJWKSURL, log)
		a.metadataURL = base + metadataPath
	}
	required := cfg.RequireAuth
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil && exposedHost(host) && !cfg.InsecureNoAuth {
		required = true
	}
	a.required.Store(required)
	return a
}

// metadataPath serves the OAuth protected resource metadata (RFC 9728);
// metadataPath+"/mcp" serves it too (the path-suffixed form).
const metadataPath = "/.well-known/oauth-protected-resource"

// serveMetadata answers the RFC 9728 document (OAuth mode only).
func (a *authenticator) serveMetadata(w http.ResponseWriter, r *http.Request) {
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

// validateAuth reports the auth flags' problems (part of Config.Validate).
func (c Config) validateAuth(bad func(flag, format string, a ...any)) {
	if c.InsecureNoAuth && c.RequireAuth {
		bad("insecure-no-auth", "contradicts --require-auth: pick one")
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			bad("public-url", "%q is not a URL like https://mcp.example.com", c.PublicURL)
		}
	}
	if c.OAuthIssuer == "" {
		if c.OAuthAudience != "" {
			bad("oauth-audience", "needs --oauth-issuer")
		}
		if c.OAuthJWKSURL != "" {
			bad("oauth-jwks-url", "needs --oauth-issuer")
		}
		return
	}
	if err := oauth.ValidURL(c.OAuthIssuer); err != nil {
		bad("oauth-issuer", "%v", err)
	}
	if c.PublicURL == "" {
		bad("oauth-issuer", "needs --public-url, the URL clients reach this gateway at (like https://mcp.example.com): "+
			"it is the resource in the OAuth metadata and the default audience")
	}
	if c.OAuthJWKSURL != "" {
		if err := oauth.ValidURL(c.OAuthJWKSURL); err != nil {
			bad("oauth-jwks-url", "%v", err)
		}
	}
	if c.OAuthAudience != "" && strings.TrimSpace(c.OAuthAudience) != c.OAuthAudience {
		bad("oauth-audience", "%q has surrounding spaces", c.OAuthAudience)
	}
}

// registerAuthFlags adds the authentication flags (part of RegisterFlags).
func registerAuthFlags(fs *flag.FlagSet, cfg *Config, errs *[]error) {
	fs.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", config.MustBool(errs, "SOVEREIGN_INSECURE_NO_AUTH", false),
		"serve MCP without authentication even when listening beyond loopback: anyone who reaches the port drives the browsers (a warning is logged at every start) [SOVEREIGN_INSECURE_NO_AUTH]")
	fs.BoolVar(&cfg.RequireAuth, "require-auth", config.MustBool(errs, "SOVEREIGN_REQUIRE_AUTH", false),
		"require an API token (or OAuth access token) on every request, on loopback too; beyond loopback it is always required [SOVEREIGN_REQUIRE_AUTH]")
	fs.StringVar(&cfg.PublicURL, "public-url", config.Env("SOVEREIGN_PUBLIC_URL", ""),
		"the URL clients reach this gateway at, without /mcp (like https://mcp.example.com): the OAuth resource and default audience [SOVEREIGN_PUBLIC_URL]")
	fs.StringVar(&cfg.OAuthIssuer, "oauth-issuer", config.Env("SOVEREIGN_OAUTH_ISSUER", ""),
		"also accept JWT access tokens of this OAuth 2.1 authorization server (its issuer URL); needs --public-url [SOVEREIGN_OAUTH_ISSUER]")
	fs.StringVar(&cfg.OAuthAudience, "oauth-audience", config.Env("SOVEREIGN_OAUTH_AUDIENCE", ""),
		"the audience JWT access tokens must name (default: the public /mcp URL) [SOVEREIGN_OAUTH_AUDIENCE]")
	fs.StringVar(&cfg.OAuthJWKSURL, "oauth-jwks-url", config.Env("SOVEREIGN_OAUTH_JWKS_URL", ""),
		"the issuer's JWKS URL (default: from its /.well-known/openid-configuration or oauth-authorization-server metadata) [SOVEREIGN_OAUTH_JWKS_URL]")
}

// setupAuth opens the API token store and sets up authentication (part of
// New). A gateway configured to listen beyond loopback with no way to
// authenticate is refused here already, before it serves.
func (g *Gateway) setupAuth(ctx context.Context) error {
	ts, err := tokens.Open(ctx, g.bus.NATS(), g.bus.Prefix())
	if err != nil {
		return fmt.Errorf("API tokens: %w", err)
	}
	g.onClose(func(context.Context) error { ts.Close(); return nil })
	g.auth = newAuthenticator(g.cfg, ts, g.log)
	if v := g.auth.oauth; v != nil {
		// Fetch the keys now, so that a wrong issuer shows in the log at
		// start rather than at the first client; Close stops the fetch.
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := v.Refresh(bg); err != nil && bg.Err() == nil {
				g.log.Warn("OAuth: cannot fetch the issuer's signing keys yet (JWT access tokens are refused until it works)",
					"issuer", v.Issuer(), "err", err)
			}
		}()
		g.onClose(func(context.Context) error { cancel(); <-done; return nil })
	}
	if host, _, err := net.SplitHostPort(g.cfg.Listen); err == nil && exposedHost(host) {
		if err := g.checkExposed(ctx, g.cfg.Listen); err != nil {
			return err
		}
	}
	return nil
}

// authRoutes serves the OAuth protected resource metadata, behind the Host
// and Origin guard.
func (g *Gateway) authRoutes(mux *http.ServeMux, guard *hostguard.Guard) {
	h := guard.Wrap(http.HandlerFunc(g.auth.serveMetadata))
	mux.Handle(metadataPath, h)
	mux.Handle(metadataPath+"/mcp", h)
}

// checkServe runs as ServeListener starts: on an address reachable from
// other machines it requires credentials (unless --insecure-no-auth, which
// it warns about), and refuses to serve without any way to authenticate.
// When it refuses, it closes ln (the caller still Closes the gateway).
func (g *Gateway) checkServe(ln net.Listener) error {
	addr := ln.Addr().String()
	exposed := exposedAddr(ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if exposed {
		if err := g.checkExposed(ctx, addr); err != nil {
			_ = ln.Close()
			return err
		}
		if g.cfg.InsecureNoAuth {
			g.log.Warn("--insecure-no-auth: serving MCP WITHOUT authentication on an address other machines can reach; "+
				"anyone who reaches it drives the browsers. Create an API token (sovereign token create --name <name>) and drop the flag",
				"addr", addr)
		} else {
			g.auth.required.Store(true)
		}
	}
	if g.auth.required.Load() && g.auth.oauth == nil {
		if n, err := g.auth.tokens.Count(ctx); err == nil && n == 0 {
			g.log.Warn("authentication is required and no API token exists: every MCP request is refused until you create one with 'sovereign token create --name <name>'")
		}
	}
	g.log.Info("MCP authentication", "required", g.auth.required.Load(), "oauth_issuer", g.cfg.OAuthIssuer, "api_tokens_bucket", g.auth.tokens.BucketName())
	return nil
}

// ownerName names a session owner for display: the API token's name for
// "token:<id>" (while the gateway knows the token), else the identity
// itself ("oauth:<digest>", "anonymous").
func (g *Gateway) ownerName(owner string) string {
	if id, ok := strings.CutPrefix(owner, "token:"); ok {
		if t, ok := g.auth.tokens.Lookup(id); ok {
			return t.Name
		}
	}
	return owner
}
