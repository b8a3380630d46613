package gateway

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/systools"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// The system tools (catalog.Tool.System: fs_read, fs_write, fs_list,
// fs_mkdir, fs_delete, shell_exec) act on the gateway's host, in a
// workspace directory (internal/systools). SystemTools says who gets them:
//
//   - off (the default): nobody; they are not registered at all.
//   - agent: agent runs only, whose calls come over the bus dispatcher
//     (dispatch.Bus). They are not registered on the MCP server, so MCP
//     clients neither list nor call them; the handler checks again for a
//     script's inner calls.
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

// registerSystemFlags adds --system-tools and --workspace.
func registerSystemFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.StringVar(&cfg.SystemTools, "system-tools", config.Env("SOVEREIGN_SYSTEM_TOOLS", SystemToolsOff),
		"who gets the system tools (fs_read, fs_write, fs_list, fs_mkdir, fs_delete, shell_exec), which act on this host in --workspace "+
			"and, for shell_exec, run any command as this process's user: off, agent (agent runs only) or on (MCP clients too) [SOVEREIGN_SYSTEM_TOOLS]")
	fs.StringVar(&cfg.Workspace, "workspace", config.Env("SOVEREIGN_WORKSPACE", DefaultWorkspace),
		"directory the system tools work in (created 0700 when missing); the file tools cannot leave it [SOVEREIGN_WORKSPACE]")
	fs.StringVar(&cfg.Tools, "tools", config.Env("SOVEREIGN_TOOLS", "all"),
		"the tools MCP clients see: all, or tool groups ("+strings.Join(catalog.GroupNames(), ", ")+") and tool names, comma-separated, "+
			"each removable with a leading - (e.g. core,forms,files or all,-perf); core is always in. Fewer tools, less of the model's context [SOVEREIGN_TOOLS]")
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
	if _, err := catalog.ParseSelection(c.Tools); err != nil {
		bad("tools", "%v", err)
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
	g.onClose(func(context.Context) error { return ws.Close() })
	for _, t := range catalog.Tools() {
		if t.System {
			g.mcpTools().Add(dispatch.Entry{Kind: dispatch.System, Tool: systemTool(t), Handler: g.systemHandler(t),
				Hidden: mode == SystemToolsAgent})
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

// systemTool is a system tool as the listings show it: what it may
// destroy and that the file tools stay in the workspace.
func systemTool(t catalog.Tool) dispatch.Tool {
	tool := catalogTool(t)
	tool.Annotations.OpenWorld = dispatch.Hint(t.Name == catalog.ShellExec)
	switch t.Name {
	case catalog.FSWrite, catalog.FSDelete, catalog.ShellExec:
		tool.Annotations.Destructive = dispatch.Hint(true)
	case catalog.FSMkdir:
		tool.Annotations.Destructive = dispatch.Hint(false)
		tool.Annotations.Idempotent = dispatch.Hint(true)
	}
	return tool
}

// systemHandler is the handler of a system tool.
func (g *Gateway) systemHandler(t catalog.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		if g.cfg.systemMode() == SystemToolsAgent && c.Transport != dispatch.Bus {
			// A script's inner call from an MCP client: not an agent run.
			return dispatch.Errorf("unknown tool %q", t.Name)
		}
		call, err := t.ParseSystem(c.Args)
		if err != nil {
			return dispatch.ErrorText(fmt.Sprintf("%s: %v", t.Name, err))
		}
		ws := g.workspace
		fail := func(err error) *dispatch.Result {
			return dispatch.Errorf("%s: %v", t.Name, err)
		}
		switch t.Name {
		case catalog.FSRead:
			r, err := ws.Read(call.Path, call.Offset, call.Limit)
			if err != nil {
				return fail(err)
			}
			return readResult(r)
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
			return dispatch.Structured(fmt.Sprintf("%s %d bytes to %s (%s; it now has %d bytes).", verb, r.Bytes, r.Path, how, r.Size), map[string]any{
				"path": r.Path, "bytes": r.Bytes, "size": r.Size, "created": r.Created, "appended": r.Appended,
			})
		case catalog.FSList:
			r, err := ws.List(call.Path)
			if err != nil {
				return fail(err)
			}
			return listResult(r)
		case catalog.FSMkdir:
			created, err := ws.Mkdir(call.Path)
			if err != nil {
				return fail(err)
			}
			msg := "Created directory " + call.Path + "."
			if !created {
				msg = "Directory " + call.Path + " already exists."
			}
			return dispatch.Structured(msg, map[string]any{"path": call.Path, "created": created})
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
			return dispatch.Structured(msg, map[string]any{"path": call.Path, "type": kind})
		case catalog.ShellExec:
			r, err := ws.Exec(ctx, call.Command, call.Timeout)
			switch {
			case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
				return dispatch.ErrorText(t.Name + " was cancelled: the command was killed with its process group")
			case err != nil:
				return fail(err)
			}
			res := execResult(r, call.Timeout)
			if r.TimedOut {
				res.Outcome = historyv1.Outcome_OUTCOME_TIMEOUT
			}
			return res
		}
		return dispatch.ErrorText(t.Name + ": internal error: no handler")
	}
}

func kindName(kind string) string {
	if kind == "other" {
		return "special file"
	}
	return kind
}

// readResult is the file's text, then a note when it goes on.
func readResult(r systools.ReadResult) *dispatch.Result {
	if r.Size == 0 {
		return dispatch.Text("(" + r.Path + " is empty)")
	}
	res := dispatch.Text(r.Content)
	if r.Clipped {
		res.Parts = append(res.Parts, dispatch.Part{Text: fmt.Sprintf(
			"[clipped: bytes %d to %d of %d shown; call fs_read with offset %d to read on]", r.Offset, r.Next, r.Size, r.Next)})
	}
	return res
}

// listResult is a listing as lines, and as structured content.
func listResult(r systools.ListResult) *dispatch.Result {
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
	return dispatch.Structured(b.String(), map[string]any{"path": r.Path, "entries": r.Entries, "total": r.Total, "clipped": r.Clipped})
}

// execResult is a command's exit code and output; one that timed out is an
// error result with what it wrote.
func execResult(r systools.ExecResult, timeout time.Duration) *dispatch.Result {
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
	res := dispatch.Structured(b.String(), map[string]any{
		"exit_code": r.ExitCode, "signal": r.Signal, "timed_out": r.TimedOut, "duration_ms": r.Duration.Milliseconds(),
		"stdout": r.Stdout, "stderr": r.Stderr, "stdout_bytes": r.StdoutBytes, "stderr_bytes": r.StderrBytes,
	})
	res.IsError = r.TimedOut
	return res
}
