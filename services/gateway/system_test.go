package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
)

var systemToolNames = []string{"fs_read", "fs_write", "fs_list", "fs_mkdir", "fs_delete", "shell_exec"}

// systemSetup is a temporary workspace path (not created) and, next to it,
// an outside directory holding secret.txt.
func systemSetup(t *testing.T) (workspace, outside string) {
	t.Helper()
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(base, "ws"), outside
}

// listNames is the names of an MCP client's tools/list.
func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// callOK calls a tool and fails the test unless it succeeded.
func callOK(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	r := callTool(t, c, name, args)
	if r.IsError {
		t.Fatalf("%s(%v): %s", name, args, text(r))
	}
	return r
}

// callFails calls a tool and fails the test unless it returned an error
// result holding every want.
func callFails(t *testing.T, c *client.Client, name string, args map[string]any, want ...string) {
	t.Helper()
	r := callTool(t, c, name, args)
	if !r.IsError {
		t.Fatalf("%s(%v) succeeded: %s; want an error", name, args, text(r))
	}
	for _, w := range want {
		if !strings.Contains(text(r), w) {
			t.Errorf("%s(%v) = %q, want it to say %q", name, args, text(r), w)
		}
	}
}

// unknownTool checks that calling name fails as an unknown tool.
func unknownTool(t *testing.T, c *client.Client, name string, args map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err == nil {
		t.Fatalf("%s: answered %q (error %v); want the call refused as an unknown tool", name, text(res), res.IsError)
	}
	if !strings.Contains(err.Error(), "not found") {
		t.Errorf("%s: %v; want an unknown tool error", name, err)
	}
}

// TestSystemToolsOn: with --system-tools on, an MCP client works in the
// workspace (write, list, read, mkdir, delete, shell_exec with a timeout),
// every way out is refused, and a huge fs_write does not bloat the audit.
func TestSystemToolsOn(t *testing.T) {
	t.Parallel()
	workspace, outside := systemSetup(t)
	srv := startNATS(t, "")
	url := startGateway(t, srv, gateway.Config{SystemConfig: gateway.SystemConfig{SystemTools: "on", Workspace: workspace}})
	if st, err := os.Stat(workspace); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("workspace %s: %v, %v; want a 0700 directory created at start", workspace, st, err)
	}
	c := modernClient(t, url, nil)
	names := listNames(t, c)
	for _, n := range systemToolNames {
		if !slices.Contains(names, n) {
			t.Errorf("tools/list has no %s", n)
		}
	}

	// Write, list, read, append, delete.
	r := callOK(t, c, "fs_write", map[string]any{"path": "notes/a.txt", "content": "hello\n"})
	if !strings.Contains(text(r), "Wrote 6 bytes to notes/a.txt (created") {
		t.Errorf("fs_write = %q", text(r))
	}
	if b, err := os.ReadFile(filepath.Join(workspace, "notes", "a.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("notes/a.txt on disk = %q, %v", b, err)
	}
	callOK(t, c, "fs_write", map[string]any{"path": "notes/a.txt", "content": "world\n", "append": true})
	r = callOK(t, c, "fs_list", map[string]any{"path": "notes"})
	if !strings.Contains(text(r), "a.txt") || !strings.Contains(text(r), "file") {
		t.Errorf("fs_list notes = %q", text(r))
	}
	var listing struct {
		Entries []struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Size int64  `json:"size"`
		} `json:"entries"`
		Total int `json:"total"`
	}
	raw, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(raw, &listing); err != nil || listing.Total != 1 || listing.Entries[0].Name != "a.txt" || listing.Entries[0].Size != 12 {
		t.Errorf("fs_list structured = %s (%v)", raw, err)
	}
	if r := callOK(t, c, "fs_list", nil); !strings.Contains(text(r), "notes/") {
		t.Errorf("fs_list of the workspace = %q", text(r))
	}
	if r := callOK(t, c, "fs_read", map[string]any{"path": "notes/a.txt"}); text(r) != "hello\nworld\n" {
		t.Errorf("fs_read = %q", text(r))
	}
	if r := callOK(t, c, "fs_read", map[string]any{"path": "notes/a.txt", "offset": 6, "limit": 3}); !strings.HasPrefix(text(r), "wor\n[clipped: bytes 6 to 9 of 12 shown; call fs_read with offset 9") {
		t.Errorf("fs_read clipped = %q", text(r))
	}
	callOK(t, c, "fs_mkdir", map[string]any{"path": "a/b"})
	if r := callOK(t, c, "fs_mkdir", map[string]any{"path": "a/b"}); !strings.Contains(text(r), "already exists") {
		t.Errorf("fs_mkdir again = %q", text(r))
	}
	callFails(t, c, "fs_delete", map[string]any{"path": "notes"}, "fs_delete: notes: is a directory that is not empty")
	callOK(t, c, "fs_delete", map[string]any{"path": "notes/a.txt"})
	callFails(t, c, "fs_read", map[string]any{"path": "notes/a.txt"}, "fs_read: notes/a.txt: no such file or directory in the workspace")
	callOK(t, c, "fs_delete", map[string]any{"path": "a", "recursive": true})
	callFails(t, c, "fs_read", map[string]any{"path": ""}, `fs_read: argument "path" must not be empty`)
	callFails(t, c, "fs_write", map[string]any{"path": "x"}, `fs_write: argument "content" is required`)

	// shell_exec.
	r = callOK(t, c, "shell_exec", map[string]any{"command": "echo hello from $HOME; echo warn >&2; exit 2"})
	want := "exit code 2\n--- stdout ---\nhello from " + workspace + "\n--- stderr ---\nwarn\n"
	if r := callOK(t, c, "shell_exec", map[string]any{"command": "true"}); text(r) != "exit code 0\n(no output)\n" {
		t.Errorf("shell_exec true = %q", text(r))
	}
	if text(r) != want {
		t.Errorf("shell_exec = %q, want %q", text(r), want)
	}
	// The timeout leaves the shell time to start and echo on a loaded
	// machine (300 ms could pass before it echoed).
	r = callTool(t, c, "shell_exec", map[string]any{"command": "echo started; sleep 300", "timeout_ms": 5000})
	if !r.IsError || !strings.Contains(text(r), "did not finish within 5s and was killed") || !strings.Contains(text(r), "started") {
		t.Errorf("shell_exec timeout = %q (error %v)", text(r), r.IsError)
	}
	callFails(t, c, "shell_exec", map[string]any{"command": "true", "timeout_ms": 600001}, `argument "timeout_ms" must be at most 600000`)
	callFails(t, c, "shell_exec", map[string]any{"command": " "}, `argument "command" must not be empty`)

	// Every way out of the workspace is refused, and nothing outside changes.
	if err := os.Symlink(outside, filepath.Join(workspace, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(workspace, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(workspace, "in", "flink")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../outside/secret.txt", "in/../../outside/secret.txt", "out/secret.txt", "in/flink", filepath.Join(outside, "secret.txt")} {
		callFails(t, c, "fs_read", map[string]any{"path": p}, "fs_read: ", p)
		callFails(t, c, "fs_write", map[string]any{"path": p, "content": "pwned"}, "fs_write: ", p)
		callFails(t, c, "fs_mkdir", map[string]any{"path": p + "/d"}, "fs_mkdir: ")
		if p != "in/flink" { // deleting the link itself is allowed
			callFails(t, c, "fs_delete", map[string]any{"path": p, "recursive": true}, "fs_delete: ", p)
		}
	}
	for _, p := range []string{"..", "out", "/etc"} {
		callFails(t, c, "fs_list", map[string]any{"path": p}, "fs_list: ")
	}
	callFails(t, c, "fs_read", map[string]any{"path": "../x"}, "fs_read: path escapes the workspace: ../x")
	callFails(t, c, "fs_read", map[string]any{"path": "/etc/passwd"}, "fs_read: path must be relative to the workspace, not absolute: /etc/passwd")
	callFails(t, c, "fs_write", map[string]any{"path": "out/new.txt", "content": "x"}, "fs_write: path escapes the workspace (through a symbolic link or ..): out/new.txt")
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "top secret" {
		t.Fatalf("outside secret.txt = %q, %v", b, err)
	}
	if des, _ := os.ReadDir(outside); len(des) != 1 {
		t.Errorf("outside holds %d entries, want only secret.txt", len(des))
	}
	if r := callOK(t, c, "fs_delete", map[string]any{"path": "out"}); !strings.Contains(text(r), "symbolic link") {
		t.Errorf("fs_delete of the link = %q", text(r))
	}
	if _, err := os.Stat(filepath.Join(outside, "secret.txt")); err != nil {
		t.Errorf("deleting the link removed its target: %v", err)
	}

	// A large fs_write reaches the audit trail clipped, its size said.
	big := strings.Repeat("0123456789", 20000) // 200 kB
	callOK(t, c, "fs_write", map[string]any{"path": "big.txt", "content": big})
	var rec *historyv1.AuditRecord
	for want := 1; rec == nil; want++ { // auditRecords fails the test when no more come
		if r := auditRecords(t, srv, want)[want-1]; r.GetTool() == "fs_write" && strings.Contains(r.GetArguments(), "clipped for the audit trail") {
			rec = r
		}
	}
	if !strings.Contains(rec.GetArguments(), "[200000 bytes, clipped for the audit trail] 0123456789") || rec.GetArgumentsChars() > 70000 {
		t.Errorf("audit record of the big fs_write: arguments %.200q (%d chars)", rec.GetArguments(), rec.GetArgumentsChars())
	}
}

// TestSystemToolsOff: by default the system tools do not exist, and no
// workspace is created.
func TestSystemToolsOff(t *testing.T) {
	t.Parallel()
	workspace, _ := systemSetup(t)
	srv := startNATS(t, "")
	url := startGateway(t, srv, gateway.Config{SystemConfig: gateway.SystemConfig{Workspace: workspace}})
	c := modernClient(t, url, nil)
	for _, n := range listNames(t, c) {
		if slices.Contains(systemToolNames, n) {
			t.Errorf("tools/list has %s with system tools off", n)
		}
	}
	unknownTool(t, c, "shell_exec", map[string]any{"command": "touch pwned"})
	unknownTool(t, c, "fs_write", map[string]any{"path": "pwned", "content": "x"})
	if _, err := os.Stat(workspace); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("workspace %s: %v; want it not created while system tools are off", workspace, err)
	}
	bc := connect(t, srv)
	for _, tool := range busList(t, bc, true) {
		if slices.Contains(systemToolNames, tool.GetName()) {
			t.Errorf("sov.tools.list has %s with system tools off", tool.GetName())
		}
	}
	if _, err := busCall(bc, &toolsv1.CallToolRequest{Caller: busAnon, Name: "shell_exec", ArgumentsJson: `{"command":"touch pwned"}`}); err == nil {
		t.Error("sov.tools.call shell_exec with system tools off: no error")
	}
}

// TestSystemToolsAgent: in agent mode MCP clients neither see nor can call
// the system tools, while agent runs (calls over the bus) can.
func TestSystemToolsAgent(t *testing.T) {
	t.Parallel()
	workspace, _ := systemSetup(t)
	srv := startNATS(t, "")
	url := startGateway(t, srv, gateway.Config{SystemConfig: gateway.SystemConfig{SystemTools: "agent", Workspace: workspace}})
	for _, c := range []*client.Client{modernClient(t, url, nil), legacyClient(t, url, nil)} {
		names := listNames(t, c)
		for _, n := range systemToolNames {
			if slices.Contains(names, n) {
				t.Errorf("an MCP client's tools/list has %s in agent mode", n)
			}
		}
		if !slices.Contains(names, "open") {
			t.Errorf("tools/list = %v, want the browser tools", names)
		}
		unknownTool(t, c, "shell_exec", map[string]any{"command": "touch pwned"})
		unknownTool(t, c, "fs_write", map[string]any{"path": "pwned", "content": "x"})
		unknownTool(t, c, "fs_list", nil)
	}
	if des, err := os.ReadDir(workspace); err != nil || len(des) != 0 {
		t.Fatalf("workspace after refused calls: %v, %v; want it empty", des, err)
	}

	bc := connect(t, srv)
	var listed []string
	for _, tool := range busList(t, bc, true) {
		listed = append(listed, tool.GetName())
	}
	for _, n := range systemToolNames {
		if !slices.Contains(listed, n) {
			t.Errorf("sov.tools.list (for agents) has no %s", n)
		}
	}
	run := func(name, args string) string {
		t.Helper()
		_, out := busOK(t, bc, &toolsv1.CallToolRequest{Caller: busAnon, Name: name, ArgumentsJson: args, RunId: "r_test"})
		return out
	}
	run("fs_write", `{"path":"links.txt","content":"https://example.com/\n"}`)
	if out := run("fs_read", `{"path":"links.txt"}`); out != "https://example.com/\n" {
		t.Errorf("fs_read over the bus = %q", out)
	}
	if out := run("shell_exec", `{"command":"wc -c < links.txt"}`); !strings.Contains(out, "exit code 0") || !strings.Contains(out, "21") {
		t.Errorf("shell_exec over the bus = %q", out)
	}
	busErr(t, bc, &toolsv1.CallToolRequest{Caller: busAnon, Name: "fs_read", ArgumentsJson: `{"path":"../x"}`, RunId: "r_test"},
		"fs_read: path escapes the workspace: ../x")
}

// TestSystemToolsConfig: the flags, their environment fallbacks and their
// checks; monitoring shell_exec with approvals is accepted.
func TestSystemToolsConfig(t *testing.T) {
	t.Setenv("SOVEREIGN_SYSTEM_TOOLS", "agent")
	t.Setenv("SOVEREIGN_WORKSPACE", "/tmp/ws-from-env")
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var errs []error
	cfg := gateway.RegisterFlags(fs, &errs)
	if err := fs.Parse(nil); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if cfg.SystemTools != "agent" || cfg.Workspace != "/tmp/ws-from-env" {
		t.Errorf("from the environment: system tools %q, workspace %q", cfg.SystemTools, cfg.Workspace)
	}
	if err := fs.Parse([]string{"--system-tools", "on", "--workspace", "w"}); err != nil || cfg.SystemTools != "on" || cfg.Workspace != "w" {
		t.Errorf("flags: %v, %q, %q", err, cfg.SystemTools, cfg.Workspace)
	}
	t.Setenv("SOVEREIGN_SYSTEM_TOOLS", "")
	fs = flag.NewFlagSet("gateway", flag.ContinueOnError)
	if cfg = gateway.RegisterFlags(fs, &errs); cfg.SystemTools != "off" || cfg.Workspace == "" {
		t.Errorf("defaults: system tools %q, workspace %q; want off and ./workspace", cfg.SystemTools, cfg.Workspace)
	}

	valid := func(mod func(*gateway.Config)) error {
		c := gateway.Config{
			Listen: "127.0.0.1:8080", ToolTimeout: time.Minute, SessionTTL: time.Hour, MaxBody: 1 << 20,
			AllowedHosts: gateway.DefaultAllowed, AllowedOrigins: gateway.DefaultAllowed, Bucket: "sov_sessions",
		}
		mod(&c)
		return c.Validate()
	}
	for _, c := range []struct {
		mod  func(*gateway.Config)
		want string
	}{
		{func(c *gateway.Config) { c.SystemTools = "yes" }, `--system-tools: "yes" must be off, agent or on`},
		{func(c *gateway.Config) { c.SystemTools, c.Workspace = "on", "  " }, `--workspace: "  " is blank`},
	} {
		if err := valid(c.mod); err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("Validate = %v, want only %q", err, c.want)
		}
	}
	for _, mode := range []string{"", "off", "agent", "on", "ON"} {
		if err := valid(func(c *gateway.Config) { c.SystemTools = mode }); err != nil {
			t.Errorf("Validate with system tools %q = %v", mode, err)
		}
	}
	// An operator can monitor the system tools with approvals.
	if err := valid(func(c *gateway.Config) {
		c.SystemTools, c.ApproveTools = "on", []string{"shell_exec", "fs_write", "fs_delete"}
	}); err != nil {
		t.Errorf("Validate with --approve-tools shell_exec,fs_write,fs_delete = %v", err)
	}
	// A workspace that cannot be a directory fails at start, saying so.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startNATS(t, "")
	if _, err := gateway.New(context.Background(), gateway.Config{SystemConfig: gateway.SystemConfig{SystemTools: "on", Workspace: file}}, connect(t, srv)); err == nil || !strings.Contains(err.Error(), "--workspace") {
		t.Errorf("New with a file as workspace = %v, want a --workspace error", err)
	}
}

// TestSystemToolsApproval: an operator monitors shell_exec with the
// existing approval config; a denied command does not run.
func TestSystemToolsApproval(t *testing.T) {
	t.Parallel()
	workspace, _ := systemSetup(t)
	srv := startNATS(t, "")
	url := startGateway(t, srv, gateway.Config{SystemConfig: gateway.SystemConfig{SystemTools: "on", Workspace: workspace}, ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"shell_exec"}}})
	q := console(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := elicitingClient(t, url, true, nil) // no elicitation: the console decides

	call := toolCall(t, c, "shell_exec", map[string]any{"command": "touch ran.txt"})
	p := pendingOf(t, watch)
	if p.Tool != "shell_exec" || !strings.Contains(p.Arguments, "touch ran.txt") {
		t.Errorf("the console sees %+v", p)
	}
	if _, err := q.Decide(ctx, p.ID, false, "", "console:admin", "no"); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); !res.IsError || !strings.Contains(text(res), "shell_exec was denied by console:admin") {
		t.Fatalf("denied shell_exec = %v %q", res.IsError, text(res))
	}
	if _, err := os.Stat(filepath.Join(workspace, "ran.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the denied command ran: %v", err)
	}

	call = toolCall(t, c, "shell_exec", map[string]any{"command": "touch ran.txt && echo done"})
	p = pendingOf(t, watch)
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); res.IsError || !strings.Contains(text(res), "done") {
		t.Fatalf("approved shell_exec = %v %q", res.IsError, text(res))
	}
	if _, err := os.Stat(filepath.Join(workspace, "ran.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}
