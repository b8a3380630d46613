package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/catalog"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/systools"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// The system tools (catalog.Tool.System: fs_read, fs_write, fs_list,
// fs_mkdir, fs_delete, shell_exec) act on the gateway's host, in a
// workspace directory (kit/systools). SystemTools says who gets them:
//
//   - off (the default): nobody; they are not registered at all.
//   - agent: agent runs only, whose calls come over the bus dispatcher
//     (bus.go marks them: busCallFrom(ctx) != nil). A tool filter hides
//     them from MCP clients' tools/list and refuses their calls as unknown
//     tools; the handlers check again.
//   - on: MCP clients too.
//
// Calls take the normal path (audit, approvals): an operator can monitor
// shell_exec with --approve-tools like any tool.

// System tools modes.
const (
	SystemToolsOff   = "off"
	SystemToolsAgent = "agent"
	SystemToolsOn    = "on"
)

// DefaultWorkspace is the system tools' workspace when none is configured
// (`sovereign up` passes <data dir>/workspace).
const DefaultWorkspace = "./workspace"

// maxAuditArgument is the longest string argument the audit middleware
// marshals and redacts whole: longer ones (a 10 MiB fs_write content) are
// clipped first, since the record keeps only audit.MaxArgumentChars.
const maxAuditArgument = 64 << 10

// registerSystemFlags adds --system-tools and --workspace.
func registerSystemFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.StringVar(&cfg.SystemTools, "system-tools", config.Env("SOVEREIGN_SYSTEM_TOOLS", SystemToolsOff),
		"who gets the system tools (fs_read, fs_write, fs_list, fs_mkdir, fs_delete, shell_exec), which act on this host in --workspace "+
			"and, for shell_exec, run any command as this process's user: off, agent (agent runs only) or on (MCP clients too) [SOVEREIGN_SYSTEM_TOOLS]")
	fs.StringVar(&cfg.Workspace, "workspace", config.Env("SOVEREIGN_WORKSPACE", DefaultWorkspace),
		"directory the system tools work in (created 0700 when missing); the file tools cannot leave it [SOVEREIGN_WORKSPACE]")
}

// systemMode is the configured mode, normalized ("" is off).
func (c Config) systemMode() string {
	m := strings.ToLower(strings.TrimSpace(c.SystemTools))
	if m == "" {
		return SystemToolsOff
	}
	return m
}

// validateSystem checks the system tools settings.
func (c Config) validateSystem(bad func(flag, format string, a ...any)) {
	switch c.systemMode() {
	case SystemToolsOff, SystemToolsAgent, SystemToolsOn:
	default:
		bad("system-tools", "%q must be off, agent or on", c.SystemTools)
	}
	if c.Workspace != "" && strings.TrimSpace(c.Workspace) == "" { // "" is DefaultWorkspace
		bad("workspace", "%q is blank: name a directory", c.Workspace)
	}
}

// setupSystem opens the workspace and registers the system tools, unless
// they are off.
func (g *Gateway) setupSystem() error {
	mode := g.cfg.systemMode()
	if mode == SystemToolsOff {
		return nil
	}
	dir := g.cfg.Workspace
	if dir == "" {
		dir = DefaultWorkspace
	}
	ws, err := systools.New(dir)
	if err != nil {
		return fmt.Errorf("--workspace: %w", err)
	}
	g.workspace = ws
	for _, t := range catalog.Tools() {
		if t.System {
			g.mcp.AddTool(systemMCPTool(t), g.systemHandler(t))
		}
	}
	who := "agent runs only (not MCP clients)"
	if mode == SystemToolsOn {
		who = "agent runs and MCP clients"
	}
	g.log.Warn("system tools are on: shell_exec runs arbitrary commands as this process's user, and the fs_* tools read, write "+
		"and delete files in the workspace", "system_tools", mode, "for", who, "workspace", ws.Dir())
	return nil
}

// closeSystem releases the workspace.
func (g *Gateway) closeSystem() {
	if g.workspace != nil {
		_ = g.workspace.Close()
	}
}

// systemAllowed reports whether the call of ctx may see and call the
// system tools.
func (g *Gateway) systemAllowed(ctx context.Context) bool {
	switch g.cfg.systemMode() {
	case SystemToolsOn:
		return true
	case SystemToolsAgent:
		return busCallFrom(ctx) != nil
	}
	return false
}

// filterSystemTools is the MCP server's tool filter: it takes the system
// tools out of tools/list, and out of reach of tools/call, for calls that
// may not use them.
func (g *Gateway) filterSystemTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if g.cfg.systemMode() != SystemToolsAgent || g.systemAllowed(ctx) {
		return tools
	}
	return slices.DeleteFunc(slices.Clone(tools), func(t mcp.Tool) bool {
		ct, ok := catalog.Lookup(t.Name)
		return ok && ct.System
	})
}

// systemMCPTool renders a system tool for tools/list: what it may destroy
// and that the file tools stay in the workspace.
func systemMCPTool(t catalog.Tool) mcp.Tool {
	tool := mcpTool(t)
	tool.Annotations.OpenWorldHint = mcp.ToBoolPtr(t.Name == catalog.ShellExec)
	switch t.Name {
	case catalog.FSWrite, catalog.FSDelete, catalog.ShellExec:
		tool.Annotations.DestructiveHint = mcp.ToBoolPtr(true)
	case catalog.FSMkdir:
		tool.Annotations.DestructiveHint = mcp.ToBoolPtr(false)
		tool.Annotations.IdempotentHint = mcp.ToBoolPtr(true)
	}
	return tool
}

// systemHandler is the handler of a system tool.
func (g *Gateway) systemHandler(t catalog.Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !g.systemAllowed(ctx) { // the filter refuses first; this holds if it is bypassed
			return mcp.NewToolResultError(fmt.Sprintf("unknown tool %q", t.Name)), nil
		}
		call, err := t.ParseSystem(req.Params.Arguments)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", t.Name, err)), nil
		}
		ws := g.workspace
		fail := func(err error) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", t.Name, err)), nil
		}
		switch t.Name {
		case catalog.FSRead:
			r, err := ws.Read(call.Path, call.Offset, call.Limit)
			if err != nil {
				return fail(err)
			}
			return readResult(r), nil
		case catalog.FSWrite:
			r, err := ws.Write(call.Path, call.Content, call.Append)
			if err != nil {
				return fail(err)
			}
			verb, how := "Wrote", "created"
			if r.Appended {
				verb = "Appended"
			}
			if !r.Created {
				how = "existing file"
			}
			return structured(fmt.Sprintf("%s %d bytes to %s (%s; it now has %d bytes).", verb, r.Bytes, r.Path, how, r.Size), map[string]any{
				"path": r.Path, "bytes": r.Bytes, "size": r.Size, "created": r.Created, "appended": r.Appended,
			}), nil
		case catalog.FSList:
			r, err := ws.List(call.Path)
			if err != nil {
				return fail(err)
			}
			return listResult(r), nil
		case catalog.FSMkdir:
			created, err := ws.Mkdir(call.Path)
			if err != nil {
				return fail(err)
			}
			msg := "Created directory " + call.Path + "."
			if !created {
				msg = "Directory " + call.Path + " already exists."
			}
			return structured(msg, map[string]any{"path": call.Path, "created": created}), nil
		case catalog.FSDelete:
			kind, err := ws.Delete(call.Path, call.Recursive)
			if err != nil {
				return fail(err)
			}
			msg := fmt.Sprintf("Deleted %s %s.", kindName(kind), call.Path)
			switch kind {
			case "dir":
				msg = fmt.Sprintf("Deleted directory %s and everything in it.", call.Path)
			case "symlink":
				msg = fmt.Sprintf("Deleted symbolic link %s (not what it pointed to).", call.Path)
			}
			return structured(msg, map[string]any{"path": call.Path, "type": kind}), nil
		case catalog.ShellExec:
			r, err := ws.Exec(ctx, call.Command, call.Timeout)
			switch {
			case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
				return mcp.NewToolResultError(t.Name + " was cancelled: the command was killed with its process group"), nil
			case err != nil:
				return fail(err)
			}
			if r.TimedOut {
				noteCall(ctx).outcome = historyv1.Outcome_OUTCOME_TIMEOUT
			}
			return execResult(r, call.Timeout), nil
		}
		return mcp.NewToolResultError(t.Name + ": internal error: no handler"), nil
	}
}

func kindName(kind string) string {
	if kind == "other" {
		return "special file"
	}
	return kind
}

// structured is a text result with structured content.
func structured(text string, v any) *mcp.CallToolResult {
	res := mcp.NewToolResultText(text)
	if b, err := json.Marshal(v); err == nil {
		res.StructuredContent = json.RawMessage(b)
	}
	return res
}

// readResult is the file's text, then a note when it goes on.
func readResult(r systools.ReadResult) *mcp.CallToolResult {
	if r.Size == 0 {
		return mcp.NewToolResultText("(" + r.Path + " is empty)")
	}
	res := mcp.NewToolResultText(r.Content)
	if r.Clipped {
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf(
			"[clipped: bytes %d to %d of %d shown; call fs_read with offset %d to read on]", r.Offset, r.Next, r.Size, r.Next)))
	}
	return res
}

// listResult is a listing as lines, and as structured content.
func listResult(r systools.ListResult) *mcp.CallToolResult {
	var b strings.Builder
	switch {
	case r.Total == 0:
		fmt.Fprintf(&b, "%s is empty.", r.Path)
	case r.Clipped:
		fmt.Fprintf(&b, "%s: the first %d of %d entries (by name):", r.Path, len(r.Entries), r.Total)
	default:
		fmt.Fprintf(&b, "%s: %d entries:", r.Path, r.Total)
	}
	for _, e := range r.Entries {
		name := e.Name
		switch e.Type {
		case "dir":
			name += "/"
		case "symlink":
			name += " -> " + e.Target
		}
		fmt.Fprintf(&b, "\n%-7s %10d  %s  %s", e.Type, e.Size, e.ModTime.Format(time.RFC3339), name)
	}
	if r.Clipped {
		fmt.Fprintf(&b, "\n[%d more entries not shown: at most %d are listed]", r.Total-len(r.Entries), systools.MaxList)
	}
	return structured(b.String(), map[string]any{"path": r.Path, "entries": r.Entries, "total": r.Total, "clipped": r.Clipped})
}

// execResult is a command's exit code and output; one that timed out is an
// error result with what it wrote.
func execResult(r systools.ExecResult, timeout time.Duration) *mcp.CallToolResult {
	if timeout == 0 {
		timeout = systools.DefaultTimeout
	}
	var b strings.Builder
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "shell_exec: the command did not finish within %s and was killed with its process group.\n", timeout)
	case r.Signal != "":
		fmt.Fprintf(&b, "The command was ended by signal %s.\n", r.Signal)
	default:
		fmt.Fprintf(&b, "exit code %d\n", r.ExitCode)
	}
	section := func(name, out string, total int64, clipped bool) {
		if total == 0 {
			return
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", name, out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteByte('\n')
		}
		if clipped {
			fmt.Fprintf(&b, "[%s clipped: the first %d of %d bytes are shown]\n", name, len(out), total)
		}
	}
	section("stdout", r.Stdout, r.StdoutBytes, r.StdoutClipped())
	section("stderr", r.Stderr, r.StderrBytes, r.StderrClipped())
	if r.StdoutBytes == 0 && r.StderrBytes == 0 {
		b.WriteString("(no output)\n")
	}
	res := structured(b.String(), map[string]any{
		"exit_code": r.ExitCode, "signal": r.Signal, "timed_out": r.TimedOut, "duration_ms": r.Duration.Milliseconds(),
		"stdout": r.Stdout, "stderr": r.Stderr, "stdout_bytes": r.StdoutBytes, "stderr_bytes": r.StderrBytes,
	})
	res.IsError = r.TimedOut
	return res
}

// clipAuditArguments returns args with every string longer than
// maxAuditArgument cut to that length and prefixed with its size, copying
// the map only when it changes: the audit record keeps a few thousand
// characters anyway, and a huge argument would be marshalled and redacted
// whole first.
func clipAuditArguments(args map[string]any) map[string]any {
	var out map[string]any
	for k, v := range args {
		s, ok := v.(string)
		if !ok || len(s) <= maxAuditArgument {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(args))
			for k, v := range args {
				out[k] = v
			}
		}
		n := maxAuditArgument
		for n > 0 && !utf8.RuneStart(s[n]) { // not inside a character
			n--
		}
		out[k] = fmt.Sprintf("[%d bytes, clipped for the audit trail] %s", len(s), s[:n])
	}
	if out == nil {
		return args
	}
	return out
}
