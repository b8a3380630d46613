package gateway

import (
	"context"
	"flag"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Nostr identities of browser sessions (internal/login): their settings,
// and the identity tools' handler, which binds the call's browser session
// like a browser tool's.

// Login timeout: default and bounds.
const (
	DefaultLoginTimeout = 3 * time.Minute
	minLoginTimeout     = 5 * time.Second
	maxLoginTimeout     = time.Hour
)

// registerLoginFlags adds --require-login and --login-timeout.
func registerLoginFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.BoolVar(&cfg.RequireLogin, "require-login", config.MustBool(errs, "SOVEREIGN_REQUIRE_LOGIN", false),
		"browser tools refuse until the call's browser session has logged in with a Nostr identity (the login tool) [SOVEREIGN_REQUIRE_LOGIN]")
	fs.DurationVar(&cfg.LoginTimeout, "login-timeout", config.MustDuration(errs, "SOVEREIGN_LOGIN_TIMEOUT", DefaultLoginTimeout),
		"longest a login or switch_identity call may take; nip46 and nsigner logins may wait for a person to approve (5s to 1h) [SOVEREIGN_LOGIN_TIMEOUT]")
}

// validateLogin checks the login settings.
func (c Config) validateLogin(bad func(flag, format string, a ...any)) {
	if c.LoginTimeout != 0 && (c.LoginTimeout < minLoginTimeout || c.LoginTimeout > maxLoginTimeout) {
		bad("login-timeout", "%s must be from %s to %s", c.LoginTimeout, minLoginTimeout, maxLoginTimeout)
	}
}

// identityHandler is the handler of the identity tools: check the
// arguments, bind the call's browser session like a browser tool, and act
// on its identity at the signer and on its worker.
func (g *Gateway) identityHandler(t catalog.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		call, err := t.Parse(c.Args)
		if err != nil {
			return dispatch.Errorf("%s: %v", t.Name, err)
		}
		limit := g.cfg.ToolTimeout
		if call.Login != nil {
			limit = g.cfg.LoginTimeout // nip46 and nsigner may wait for a person
		}
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		b, err := g.bind(ctx, c, "")
		if err != nil {
			return dispatch.ErrorText(g.errorText(ctx, t, err))
		}
		return b.result(g.logins.Run(ctx, t, c, call.Login, boundSession{g: g, b: b}, limit))
	}
}

// boundSession is a bound browser session as the identity tools see it
// (login.Session).
type boundSession struct {
	g *Gateway
	b *binding
}

func (s boundSession) Scope() string { return s.b.sessionID }

func (s boundSession) SetIdentity(ctx context.Context, pubkey string) error {
	_, err := s.g.fleet.Call(ctx, s.b.workerID, &browserv1.ToolRequest{SessionId: s.b.sessionID,
		Tool: &browserv1.ToolRequest_SetIdentity{SetIdentity: &browserv1.SetIdentity{Pubkey: pubkey}}})
	return err
}

func (s boundSession) Lost(ctx context.Context, err error) bool { return lost(ctx, err) }

func (s boundSession) Unbind(ctx context.Context) { s.g.unbind(ctx, s.b) }

func (s boundSession) ErrorText(ctx context.Context, t catalog.Tool, err error) string {
	return s.g.errorText(ctx, t, err)
}
