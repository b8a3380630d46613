package gateway

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/hostguard"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
)

// Defaults.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultToolTimeout = 60 * time.Second
	DefaultSessionTTL  = 24 * time.Hour
	DefaultMaxBody     = 4 << 20
)

// DefaultAllowed are the hosts the Host and Origin checks accept by default:
// loopback names, any port.
var DefaultAllowed = []string{"localhost", "127.0.0.1", "[::1]"}

// Config configures a gateway. Zero fields take the defaults above.
type Config struct {
	// Listen is the host:port Run serves HTTP on.
	Listen string
	// ToolTimeout bounds one browser tool call (wait and wait_for get
	// their own duration on top).
	ToolTimeout time.Duration
	// AllowedHosts are the Host header values accepted on /mcp: a host name
	// or IP (any port), host:port, "*.example.com", or "*" for any.
	AllowedHosts []string
	// AllowedOrigins are the Origin header values accepted on /mcp: a full
	// origin (https://app.example.com[:port]), a host name (any scheme and
	// port), "*.example.com", or "*". Requests without Origin are accepted.
	AllowedOrigins []string
	// SessionTTL is how long an MCP session or a handle lives unused.
	SessionTTL time.Duration
	// MaxBody caps a request body in bytes.
	MaxBody int64
	// Bucket is the NATS KV bucket for session state.
	Bucket string
	// AuditBuffer is how many audit records the gateway holds while the
	// audit stream does not take them (audit.DefaultBuffer when 0).
	AuditBuffer int

	// One sub-struct per feature; their fields are promoted.
	AuthConfig     // authentication (auth.go)
	AdminConfig    // the operator console (console.go)
	ApprovalConfig // approvals (approve.go)
	PolicyConfig   // the URL policy (policy.go)
	LoginConfig    // Nostr identities (login.go)
	AgentConfig    // agent runs (agent.go)
	SystemConfig   // system tools (system.go)
	FilesConfig    // dialogs and files (files.go)
	ExtendConfig   // deployed tools (extend.go, httptools.go)
	ProfilesConfig // base profiles (profiles.go)
	SessionsConfig // browser sessions' idle timeouts and limits (reclaim.go)
}

// AdminConfig is the operator console (console.go). Without an admin
// token it is off and its routes do not exist.
type AdminConfig struct {
	// AdminListen is the console's host:port (DefaultAdminListen when "").
	AdminListen string
	// AdminPublished is where a container runtime publishes the console's
	// port on the host (host:port, such as compose's 127.0.0.1:8086), when
	// AdminListen is the container's 0.0.0.0: the console's URL is logged
	// with it, and listening beyond loopback is warned about only when its
	// host is not loopback.
	AdminPublished string
	// AdminToken guards the console (at least 16 characters).
	AdminToken string
	// AdminTokenFile holds the admin token instead (its first line).
	AdminTokenFile string
}

// ApprovalConfig is the approvals of monitored tool calls (approve.go).
type ApprovalConfig struct {
	// ApproveTools are the tools whose calls wait for a person's approval
	// (catalog names); ApprovalTimeout is how long a call waits before it
	// is denied (DefaultApprovalTimeout when 0).
	ApproveTools    []string
	ApprovalTimeout time.Duration
	// ApprovalConsoleOnly refuses decisions from the calling client (MCP
	// elicitation): for agents that run unattended, whose "user" is the
	// agent itself. URL grants are decided on the console only, always.
	ApprovalConsoleOnly bool
}

// PolicyConfig is the global tier of the URL rules every session's pages
// are held to (policy.go), from PolicyFile plus URLAllow and URLBlock.
// Loopback, private and metadata addresses are refused unless an allow
// rule names them, or AllowPrivate.
type PolicyConfig struct {
	PolicyFile         string
	URLAllow, URLBlock []string
	AllowPrivate       bool
}

// LoginConfig is the Nostr identities' (login.go). RequireLogin makes
// browser tools refuse until the call's browser session has logged in;
// LoginTimeout bounds login and switch_identity, which may wait for a
// person (DefaultLoginTimeout when 0).
type LoginConfig struct {
	RequireLogin bool
	LoginTimeout time.Duration
}

// AgentConfig is agent runs' (agent.go). TaskTimeout bounds one
// run_browser_task call: the run is cancelled then (DefaultTaskTimeout
// when 0).
type AgentConfig struct {
	TaskTimeout time.Duration
}

// SystemConfig is the system tools' (system.go): SystemTools is off (""),
// agent or on; Workspace is their directory (DefaultWorkspace when "").
// Tools is which catalog tools the gateway lists (--tools: "all" or ""
// for all, else groups and tool names; catalog.ParseSelection).
type SystemConfig struct {
	SystemTools string
	Workspace   string
	Tools       string
}

// ExtendConfig is the tools operators deploy (extend.go, httptools.go).
type ExtendConfig struct {
	// HTTPToolsFile is the custom HTTP tools file; "" for none.
	HTTPToolsFile string
	// ToolsDir is the directory of script tools stored into the fleet's
	// script bucket at start and on reload; "" for none.
	ToolsDir string
	// ScriptTimeout is the time budget of one script tool call, its inner
	// tool calls included (DefaultScriptTimeout when 0).
	ScriptTimeout time.Duration
}

// ProfilesConfig is base profiles' (profiles.go): ProfileExport allows the
// admin API's export (SOVEREIGN_PROFILE_EXPORT); ProfileLimits bound an
// upload.
type ProfilesConfig struct {
	ProfileExport bool
	ProfileLimits profiles.Limits
	// StorageExport allows the admin API's export of saved storage
	// (SOVEREIGN_STORAGE_EXPORT; storage.go).
	StorageExport bool
}

// RegisterFlags adds the gateway's flags to fs, each with its environment
// fallback, and returns the Config they fill. Malformed environment values
// are appended to errs; [Config.Validate] checks the rest.
func RegisterFlags(fs *flag.FlagSet, errs *[]error) *Config {
	cfg := &Config{}
	fs.StringVar(&cfg.Listen, "listen", config.Env("SOVEREIGN_LISTEN", DefaultListen),
		"host:port to serve MCP (/mcp), /healthz, /readyz and /metrics on [SOVEREIGN_LISTEN]")
	fs.DurationVar(&cfg.ToolTimeout, "tool-timeout", config.MustDuration(errs, "SOVEREIGN_TOOL_TIMEOUT", DefaultToolTimeout),
		"longest a browser tool call may take [SOVEREIGN_TOOL_TIMEOUT]")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", config.MustDuration(errs, "SOVEREIGN_SESSION_TTL", DefaultSessionTTL),
		"an MCP session or session handle unused for this long expires [SOVEREIGN_SESSION_TTL]")
	fs.Int64Var(&cfg.MaxBody, "max-body", int64(config.MustInt(errs, "SOVEREIGN_MAX_BODY", DefaultMaxBody)),
		"largest request body in bytes; larger ones get 413 [SOVEREIGN_MAX_BODY]")
	fs.StringVar(&cfg.Bucket, "kv-bucket", config.Env("SOVEREIGN_KV_BUCKET", state.DefaultBucket),
		"NATS KV bucket for session state [SOVEREIGN_KV_BUCKET]")
	fs.IntVar(&cfg.AuditBuffer, "audit-buffer", config.MustInt(errs, "SOVEREIGN_AUDIT_BUFFER", audit.DefaultBuffer),
		"audit records held in memory while the NATS audit stream is unreachable or full; beyond it records are dropped and counted [SOVEREIGN_AUDIT_BUFFER]")
	registerAuthFlags(fs, cfg, errs) // authentication (auth.go)
	// Approvals (approve.go).
	registerApprovalFlags(fs, cfg, errs)
	registerPolicyFlags(fs, errs, cfg)  // URL policy (policy.go)
	registerSessionFlags(fs, errs, cfg) // session limits (reclaim.go)
	registerLoginFlags(fs, errs, cfg)   // Nostr identities (login.go)
	registerAgentFlags(fs, errs, cfg)   // agent runs (agent.go)
	registerSystemFlags(fs, errs, cfg)  // system tools (system.go)
	registerFilesFlags(fs, cfg)         // dialogs and files (files.go)
	registerHTTPToolsFlags(fs, cfg)     // custom HTTP tools (httptools.go)
	registerProfileFlags(fs, errs, cfg) // base profiles (profiles.go)
	registerStorageFlags(fs, errs, cfg) // saved storage (storage.go)
	registerExtendFlags(fs, errs, cfg)  // script tools (extend.go)
	// Operator console (console.go). The token itself is never a flag: it
	// would show in the process list.
	fs.StringVar(&cfg.AdminListen, "admin-listen", config.Env("SOVEREIGN_ADMIN_LISTEN", ""),
		"host:port of the operator console (default "+DefaultAdminListen+"); it runs only with an admin token [SOVEREIGN_ADMIN_LISTEN]")
	fs.StringVar(&cfg.AdminPublished, "admin-published", config.Env("SOVEREIGN_ADMIN_PUBLISHED", ""),
		"host:port where a container runtime publishes --admin-listen's port on the host (compose: 127.0.0.1:8086); logged as the console's URL, and no beyond-loopback warning when it is loopback [SOVEREIGN_ADMIN_PUBLISHED]")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", config.Env("SOVEREIGN_ADMIN_TOKEN_FILE", ""),
		"file holding the operator console's admin token (at least 16 characters), instead of SOVEREIGN_ADMIN_TOKEN [SOVEREIGN_ADMIN_TOKEN_FILE]")
	cfg.AdminToken = config.Env("SOVEREIGN_ADMIN_TOKEN", "")
	// Listed hosts and origins are accepted besides the loopback names.
	cfg.AllowedHosts = splitList(config.Env("SOVEREIGN_ALLOWED_HOSTS", ""))
	cfg.AllowedOrigins = splitList(config.Env("SOVEREIGN_ALLOWED_ORIGINS", ""))
	fs.Func("allowed-hosts", "comma-separated Host header values accepted on /mcp: name or IP (any port), host:port, *.domain or * "+
		"accepted besides the loopback names "+strings.Join(DefaultAllowed, ",")+" [SOVEREIGN_ALLOWED_HOSTS]", func(v string) error {
		cfg.AllowedHosts = splitList(v)
		return nil
	})
	fs.Func("allowed-origins", "comma-separated Origin values accepted on /mcp: scheme://host[:port], a host (any scheme and port), *.domain or * "+
		"accepted besides the loopback names "+strings.Join(DefaultAllowed, ",")+" [SOVEREIGN_ALLOWED_ORIGINS]", func(v string) error {
		cfg.AllowedOrigins = splitList(v)
		return nil
	})
	return cfg
}

// withLoopback returns DefaultAllowed followed by the entries of extra it
// does not already hold.
func withLoopback(extra []string) []string {
	out := slices.Clone(DefaultAllowed)
	for _, e := range extra {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, e) }) {
			out = append(out, e)
		}
	}
	return out
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.ToolTimeout == 0 {
		c.ToolTimeout = DefaultToolTimeout
	}
	c.AllowedHosts = withLoopback(c.AllowedHosts)
	c.AllowedOrigins = withLoopback(c.AllowedOrigins)
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.ApprovalTimeout == 0 {
		c.ApprovalTimeout = DefaultApprovalTimeout // approvals (approve.go)
	}
	if c.Bucket == "" {
		c.Bucket = state.DefaultBucket
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = DefaultLoginTimeout // login.go
	}
	if c.TaskTimeout == 0 {
		c.TaskTimeout = DefaultTaskTimeout // agent.go
	}
	c.SessionsConfig = c.SessionsConfig.withDefaults() // reclaim.go
	return c
}

// Validate reports every bad value, one error each, naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, format string, a ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, a...)))
	}
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (like 127.0.0.1:8080)", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		bad("listen", "port %q of %q is not a number from 0 to 65535", port, c.Listen)
	} else if host != "" && net.ParseIP(host) == nil && !hostguard.ValidHostName(host) {
		bad("listen", "host %q of %q is neither an IP address nor a host name", host, c.Listen)
	}
	if c.ToolTimeout <= 0 || c.ToolTimeout > time.Hour {
		bad("tool-timeout", "%s must be more than 0 and at most 1h", c.ToolTimeout)
	}
	if c.SessionTTL < time.Minute {
		bad("session-ttl", "%s must be at least 1m", c.SessionTTL)
	}
	if c.MaxBody < 1024 {
		bad("max-body", "%d bytes is too small (at least 1024)", c.MaxBody)
	}
	for _, h := range c.AllowedHosts {
		if _, err := hostguard.ParseHost(h); err != nil {
			bad("allowed-hosts", "%v", err)
		}
	}
	for _, o := range c.AllowedOrigins {
		if _, err := hostguard.ParseOrigin(o); err != nil {
			bad("allowed-origins", "%v", err)
		}
	}
	if c.AuditBuffer < 0 {
		bad("audit-buffer", "%d: must not be negative", c.AuditBuffer)
	}
	c.validateAuth(bad) // auth.go
	// Approvals (approve.go).
	c.validateApprovals(bad)
	c.validatePolicy(bad)          // policy.go
	c.validateLogin(bad)           // login.go
	c.validateAgent(bad)           // agent.go
	c.validateSystem(bad)          // system.go
	c.validateFiles(bad)           // files.go
	c.validateHTTPTools(bad)       // httptools.go
	c.validateExtend(bad)          // script tools (extend.go)
	c.SessionsConfig.validate(bad) // reclaim.go

	errs = append(errs, c.validateAdmin()...) // operator console (console.go)
	if c.Bucket != "" && !validBucket(c.Bucket) {
		bad("kv-bucket", "%q may only hold letters, digits, - and _", c.Bucket)
	}
	return errors.Join(errs...)
}

func validBucket(b string) bool {
	for _, r := range b {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
