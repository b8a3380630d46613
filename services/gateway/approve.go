package gateway

import (
	"context"
	"flag"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/approve"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/httptools"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Approvals of monitored tool calls (internal/approve): their settings,
// and the gate New builds.

// Approval timeout: default and bounds.
const (
	DefaultApprovalTimeout = 2 * time.Minute
	minApprovalTimeout     = 5 * time.Second
	maxApprovalTimeout     = time.Hour
)

// registerApprovalFlags adds --approve-tools and --approval-timeout.
func registerApprovalFlags(fs *flag.FlagSet, cfg *Config, errs *[]error) {
	fs.DurationVar(&cfg.ApprovalTimeout, "approval-timeout", config.MustDuration(errs, "SOVEREIGN_APPROVAL_TIMEOUT", DefaultApprovalTimeout),
		"a call of a monitored tool that nobody approves within this time is denied (5s to 1h) [SOVEREIGN_APPROVAL_TIMEOUT]")
	fs.BoolVar(&cfg.ApprovalConsoleOnly, "approval-console-only", config.MustBool(errs, "SOVEREIGN_APPROVAL_CONSOLE_ONLY", false),
		"decide approvals on the operator console only, never through the calling client's elicitation; use it when agents run unattended "+
			"(a client that answers its own elicitation approves its own calls) [SOVEREIGN_APPROVAL_CONSOLE_ONLY]")
	cfg.ApproveTools = splitList(config.Env("SOVEREIGN_APPROVE_TOOLS", ""))
	fs.Func("approve-tools", "comma-separated tools whose calls wait for a person's approval on the operator console "+
		"or in the client (e.g. eval,fill) [SOVEREIGN_APPROVE_TOOLS]", func(v string) error {
		cfg.ApproveTools = splitList(v)
		return nil
	})
}

// validateApprovals checks the approval settings.
func (c Config) validateApprovals(bad func(flag, format string, a ...any)) {
	if c.ApprovalTimeout != 0 && (c.ApprovalTimeout < minApprovalTimeout || c.ApprovalTimeout > maxApprovalTimeout) {
		bad("approval-timeout", "%s must be from %s to %s", c.ApprovalTimeout, minApprovalTimeout, maxApprovalTimeout)
	}
	var names []string
	known := map[string]bool{}
	for _, t := range catalog.Tools() {
		names = append(names, t.Name)
		known[t.Name] = true
	}
	// Script tools (stem__name) and the HTTP tools of --http-tools may be
	// monitored too; they are deployed later, so only their form is known.
	if c.HTTPToolsFile != "" {
		if data, err := os.ReadFile(c.HTTPToolsFile); err == nil {
			if list, _, err := httptools.Parse(data); err == nil {
				for _, t := range list {
					known[t.Name] = true
				}
			}
		}
	}
	for _, t := range c.ApproveTools {
		if !known[t] && !strings.Contains(t, "__") {
			bad("approve-tools", "%q is not a tool of the catalog, a script tool (stem__name) or an HTTP tool of --http-tools; the tools are %s", t, strings.Join(names, ", "))
		}
	}
}

// openApprovals opens the approval gate (every gateway has one: its
// console decides requests made on any replica) over the URL policy and
// the API tokens.
func (g *Gateway) openApprovals(ctx context.Context) error {
	cfg := approve.Config{Tools: slices.Concat(g.cfg.ApproveTools, g.policy.approve),
		Timeout: g.cfg.ApprovalTimeout, ConsoleOnly: g.cfg.ApprovalConsoleOnly}
	gate, err := approve.Open(ctx, g.bus.NATS(), g.bus.Prefix(), cfg, g.policy, g.auth, g.log)
	if err != nil {
		return err
	}
	g.approvals = gate
	return nil
}

// Approvals is the gateway's approval queue (what the console lists and
// decides).
func (g *Gateway) Approvals() *approval.Queue { return g.approvals.Queue() }
