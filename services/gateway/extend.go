package gateway

import (
	"context"
	"flag"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/extend"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/scripts"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Tools an operator deploys (internal/extend): their settings, and the
// extensions New opens.

// DefaultScriptTimeout is the time budget of one script tool call.
var DefaultScriptTimeout = scripts.DefaultLimits().Call

// maxScriptTimeout is the longest --script-timeout.
const maxScriptTimeout = time.Hour

// registerExtendFlags adds --tools-dir and --script-timeout.
func registerExtendFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.StringVar(&cfg.ToolsDir, "tools-dir", config.Env("SOVEREIGN_TOOLS_DIR", ""),
		"directory of script tools (*.js) stored into the fleet's script bucket at start and on sovereign__reload; see docs/extending.md [SOVEREIGN_TOOLS_DIR]")
	fs.DurationVar(&cfg.ScriptTimeout, "script-timeout", config.MustDuration(errs, "SOVEREIGN_SCRIPT_TIMEOUT", DefaultScriptTimeout),
		"time budget of one script tool call, its inner tool calls included; a call over it is stopped with an error result [SOVEREIGN_SCRIPT_TIMEOUT]")
}

// validateExtend checks the script tools' settings (part of Validate).
func (c Config) validateExtend(bad func(flag, format string, a ...any)) {
	if c.ScriptTimeout < 0 || c.ScriptTimeout > maxScriptTimeout {
		bad("script-timeout", "%s must be more than 0 and at most %s", c.ScriptTimeout, maxScriptTimeout)
	}
}

// setupExtensions opens the deployed tools (script and custom HTTP tools)
// over the MCP adapter and the URL policy. Loading scripts may take
// seconds (describe() has 5 s each): ctx is the caller's.
func (g *Gateway) setupExtensions(ctx context.Context) error {
	cfg := extend.Config{ToolsDir: g.cfg.ToolsDir, ScriptTimeout: g.cfg.ScriptTimeout,
		HTTPToolsFile: g.cfg.HTTPToolsFile, ToolTimeout: g.cfg.ToolTimeout}
	x, err := extend.Open(ctx, g.bus, cfg, g.mcpTools(), g.policy, g.log)
	g.ext = x
	g.onClose(func(context.Context) error { x.Close(); return nil })
	return err
}

// HTTPTools returns the custom HTTP tools file in force (nil without one)
// and what could not be loaded from it, one line per problem, each naming
// the tool and the field (the admin API's GET /admin/http-tools).
func (g *Gateway) HTTPTools(ctx context.Context) (file []byte, errs []string, err error) {
	return g.ext.HTTPTools(ctx)
}
