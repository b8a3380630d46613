package gateway

import (
	"context"
	"flag"
	"net/url"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/identity"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/oauth"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Authentication (internal/identity): its settings, and the authenticator
// New opens.

// Kinds of callers.
const (
	KindAnonymous = identity.KindAnonymous // no credential, on a gateway that does not require one
	KindToken     = identity.KindToken     // an API token (kit/tokens)
	KindOAuth     = identity.KindOAuth     // a JWT access token of the configured OAuth issuer
)

// Anonymous is the caller identity of requests without credentials.
const Anonymous = identity.Anonymous

// Caller is who a request acts for, as authentication established it.
type Caller = dispatch.Caller

// AuthConfig is the authentication of a gateway.
type AuthConfig = identity.Config

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
// New): a gateway configured to listen beyond loopback with no way to
// authenticate is refused here already, before it serves.
func (g *Gateway) setupAuth(ctx context.Context) error {
	a, err := identity.Open(ctx, g.bus.NATS(), g.bus.Prefix(), g.cfg.AuthConfig, g.cfg.Listen, g.log)
	if err != nil {
		return err
	}
	g.auth = a
	g.onClose(func(context.Context) error { a.Close(); return nil })
	return nil
}

// Tokens returns the gateway's API token store, for surfaces that list
// tokens (the operator console).
func (g *Gateway) Tokens() *tokens.Store { return g.auth.Tokens() }
