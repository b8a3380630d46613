package gateway

import (
	"flag"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/capacity"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// The browser sessions' limits: their settings, for the capacity keeper
// (internal/capacity) that New builds.

// Defaults of the session limits.
const (
	DefaultMCPIdleTimeout    = time.Minute
	DefaultHandleIdleTimeout = 10 * time.Minute
	DefaultSessionsPerCaller = 8
	DefaultReclaimGrace      = 30 * time.Second
	// DefaultOpenQueueTimeout is how long a queued call waits at most.
	DefaultOpenQueueTimeout = 30 * time.Second
)

// SessionsConfig is the browser sessions' limits (internal/capacity).
type SessionsConfig struct {
	// MCPIdleTimeout releases the browser session of an MCP session with
	// no request and no open stream for that long.
	MCPIdleTimeout time.Duration
	// HandleIdleTimeout releases the browser session of a handle unused
	// for that long.
	HandleIdleTimeout time.Duration
	// SessionsPerCaller bounds one caller's browser sessions (a token's
	// own limit wins).
	SessionsPerCaller int
	// ReclaimGrace is how long another caller's session must be idle
	// before a full fleet takes it back for a new one.
	ReclaimGrace time.Duration
	// OpenQueue is how many calls may wait for a browser session when
	// the fleet is full and nothing can be reclaimed; 0:
	// none wait, they hear "no browser capacity" at once.
	OpenQueue int
	// OpenQueueTimeout is how long a queued call waits at most.
	OpenQueueTimeout time.Duration
}

// registerSessionFlags adds the session limits' flags.
func registerSessionFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.DurationVar(&cfg.MCPIdleTimeout, "mcp-idle-timeout", config.MustDuration(errs, "SOVEREIGN_MCP_IDLE_TIMEOUT", DefaultMCPIdleTimeout),
		"an MCP session with no request and no open stream for this long gives its browser session back [SOVEREIGN_MCP_IDLE_TIMEOUT]")
	fs.DurationVar(&cfg.HandleIdleTimeout, "handle-idle-timeout", config.MustDuration(errs, "SOVEREIGN_HANDLE_IDLE_TIMEOUT", DefaultHandleIdleTimeout),
		"a session handle (2026 clients) unused for this long gives its browser session back [SOVEREIGN_HANDLE_IDLE_TIMEOUT]")
	fs.IntVar(&cfg.SessionsPerCaller, "sessions-per-caller", config.MustInt(errs, "SOVEREIGN_SESSIONS_PER_CALLER", DefaultSessionsPerCaller),
		"browser sessions one caller (token, OAuth subject, or all anonymous clients together) may hold; a token's --max-sessions wins [SOVEREIGN_SESSIONS_PER_CALLER]")
	fs.DurationVar(&cfg.ReclaimGrace, "reclaim-grace", config.MustDuration(errs, "SOVEREIGN_RECLAIM_GRACE", DefaultReclaimGrace),
		"when every worker is full, another caller's browser session idle this long is given back for a new one [SOVEREIGN_RECLAIM_GRACE]")
	fs.IntVar(&cfg.OpenQueue, "open-queue", config.MustInt(errs, "SOVEREIGN_OPEN_QUEUE", 0),
		"calls that may wait, in order, for a browser session when every worker is full and none can be reclaimed; 0: none wait [SOVEREIGN_OPEN_QUEUE]")
	fs.DurationVar(&cfg.OpenQueueTimeout, "open-queue-timeout", config.MustDuration(errs, "SOVEREIGN_OPEN_QUEUE_TIMEOUT", DefaultOpenQueueTimeout),
		"how long a call waits at most in the open queue (and never past the tool timeout) [SOVEREIGN_OPEN_QUEUE_TIMEOUT]")
}

// withDefaults fills the zero limits.
func (c SessionsConfig) withDefaults() SessionsConfig {
	if c.MCPIdleTimeout == 0 {
		c.MCPIdleTimeout = DefaultMCPIdleTimeout
	}
	if c.HandleIdleTimeout == 0 {
		c.HandleIdleTimeout = DefaultHandleIdleTimeout
	}
	if c.SessionsPerCaller == 0 {
		c.SessionsPerCaller = DefaultSessionsPerCaller
	}
	if c.ReclaimGrace == 0 {
		c.ReclaimGrace = DefaultReclaimGrace
	}
	if c.OpenQueueTimeout == 0 {
		c.OpenQueueTimeout = DefaultOpenQueueTimeout
	}
	return c
}

// validate checks the limits (zero takes the default).
func (c SessionsConfig) validate(bad func(flag, format string, a ...any)) {
	if c.MCPIdleTimeout != 0 && c.MCPIdleTimeout < time.Second {
		bad("mcp-idle-timeout", "%s must be at least 1s", c.MCPIdleTimeout)
	}
	if c.HandleIdleTimeout != 0 && c.HandleIdleTimeout < time.Second {
		bad("handle-idle-timeout", "%s must be at least 1s", c.HandleIdleTimeout)
	}
	if c.SessionsPerCaller < 0 {
		bad("sessions-per-caller", "%d must be at least 1", c.SessionsPerCaller)
	}
	if c.ReclaimGrace < 0 {
		bad("reclaim-grace", "%s must not be negative", c.ReclaimGrace)
	}
	if c.OpenQueue < 0 || c.OpenQueue > 10000 {
		bad("open-queue", "%d must be from 0 (no queue) to 10000", c.OpenQueue)
	}
	if c.OpenQueueTimeout < 0 || c.OpenQueueTimeout > time.Hour {
		bad("open-queue-timeout", "%s must be from 0 (the default) to 1h", c.OpenQueueTimeout)
	}
}

// keeper builds the capacity keeper of these limits (cfg's defaults
// filled). A caller's slot is held while its session opens: the open, a
// wait in the open queue and the record's write.
func (g *Gateway) keeper() *capacity.Keeper {
	c := g.cfg
	return capacity.New(capacity.Config{
		MCPIdleTimeout: c.MCPIdleTimeout, HandleIdleTimeout: c.HandleIdleTimeout, SessionsPerCaller: c.SessionsPerCaller,
		ReclaimGrace: c.ReclaimGrace, OpenQueue: c.OpenQueue, OpenQueueTimeout: c.OpenQueueTimeout,
		Hold: c.ToolTimeout + c.OpenQueueTimeout + time.Minute,
	}, g.store, g.fleet, g.audit, g.log)
}
