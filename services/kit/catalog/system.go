package catalog

import (
	"fmt"
	"strings"
	"time"
)

// System tool names.
const (
	FSRead    = "fs_read"
	FSWrite   = "fs_write"
	FSList    = "fs_list"
	FSMkdir   = "fs_mkdir"
	FSDelete  = "fs_delete"
	ShellExec = "shell_exec"
)

// Limits the system tools' parameters state (those of gateway/internal/systools).
const (
	maxReadBytes     = 1 << 20
	defaultTimeoutMs = 30000
	maxTimeoutMs     = 600000
)

// SystemCall is a checked call of a system tool: the fields its tool
// takes are set.
type SystemCall struct {
	Path    string
	Offset  int64 // fs_read
	Limit   int64 // fs_read
	Content string
	Append  bool // fs_write
	// Recursive deletes a directory with its contents (fs_delete).
	Recursive bool
	Command   string
	Timeout   time.Duration // shell_exec
}

// ParseSystem checks the arguments of a system tool.
func (t Tool) ParseSystem(raw any) (SystemCall, error) {
	if !t.System {
		return SystemCall{}, fmt.Errorf("%s is not a system tool", t.Name)
	}
	a, err := check(t.Params(), raw)
	if err != nil {
		return SystemCall{}, err
	}
	c := SystemCall{
		Path: a.str("path"), Content: a.str("content"), Command: a.str("command"),
		Append: a.boolean("append"), Recursive: a.boolean("recursive"),
	}
	c.Offset, _ = a.integer("offset")
	c.Limit, _ = a.integer("limit")
	if ms, ok := a.integer("timeout_ms"); ok {
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch {
	case t.Name != FSList && t.Name != ShellExec && strings.TrimSpace(c.Path) == "":
		return SystemCall{}, argErr("path", "must not be empty (a path relative to the workspace, e.g. notes/a.txt)")
	case t.Name == ShellExec && strings.TrimSpace(c.Command) == "":
		return SystemCall{}, argErr("command", "must not be empty")
	}
	return c, nil
}

// SystemToolsDoc is what docs/tools.md says about the system tools as a
// whole.
const SystemToolsDoc = `**System tools.** ` + "`fs_read`, `fs_write`, `fs_list`, `fs_mkdir`, `fs_delete` and `shell_exec`" + ` exist
only when the gateway's ` + "`SOVEREIGN_SYSTEM_TOOLS`" + ` (` + "`--system-tools`" + `) allows them: ` + "`off`" + ` (the
default: they are not there at all), ` + "`agent`" + ` (only agent runs get them, through the dispatcher on the
bus; MCP clients neither see nor can call them) or ` + "`on`" + ` (MCP clients too). They act on the gateway's
host in a workspace directory (` + "`SOVEREIGN_WORKSPACE`" + `, ` + "`--workspace`" + `, default ` + "`./workspace`" + `;
` + "`sovereign up`" + ` uses ` + "`<data dir>/workspace`" + `). The ` + "`fs_*`" + ` tools cannot leave it: paths are relative
to it, and absolute paths, ` + "`..`" + ` that leads out and symbolic links that lead out are refused.
` + "`shell_exec`" + ` is NOT confined: it runs any command as the gateway's user, starting in the workspace.
Turn them on only for agents and clients you trust with that user's account; an operator can make
every call wait for approval (` + "`--approve-tools shell_exec,fs_write,fs_delete`" + `).
`

// systemNote is the line each system tool's section starts with.
const systemNote = "System tool: present only when `SOVEREIGN_SYSTEM_TOOLS` is `agent` (agent runs only) or `on`.\n\n"

var pathParam = Param{
	Name: "path", Type: String, Required: true,
	Description: "Path relative to the workspace, with / as separator, e.g. notes/links.txt. Absolute paths, .. out of " +
		"the workspace and symbolic links that lead out of it are refused",
}

var systemTools = []Tool{
	{
		Name: FSRead, Title: "Read file", ReadOnly: true, Local: true, System: true,
		Description: "Read a UTF-8 text file of the workspace (the directory on the gateway's host the file tools are " +
			"confined to). Returns at most 1 MiB from offset: a longer file is clipped, and the result says the offset " +
			"to read on from. Binary (non-UTF-8) files are refused.",
		params: []Param{
			pathParam,
			{Name: "offset", Type: Integer, Default: 0, Min: bound(0), Description: "Byte offset to start at (from a clipped read's next offset)"},
			{Name: "limit", Type: Integer, Default: maxReadBytes, Min: bound(1), Max: bound(maxReadBytes), Description: "Most bytes to return"},
		},
	},
	{
		Name: FSWrite, Title: "Write file", Local: true, System: true,
		Description: "Write text to a file of the workspace, replacing its content, or appending with append: true. " +
			"Missing parent directories are created. At most 10 MiB per call.",
		params: []Param{
			pathParam,
			{Name: "content", Type: String, Required: true, Description: "Text to write (empty makes an empty file)"},
			{Name: "append", Type: Boolean, Default: false, Description: "Add to the end of the file instead of replacing it"},
		},
	},
	{
		Name: FSList, Title: "List directory", ReadOnly: true, Local: true, System: true,
		Description: "List a directory of the workspace: name, type (file, dir, symlink or other), size and modification " +
			"time of each entry, sorted by name. At most 1000 entries; the result says how many there are.",
		params: []Param{{Name: "path", Type: String, Default: ".",
			Description: "Directory relative to the workspace (default: the workspace itself)"}},
	},
	{
		Name: FSMkdir, Title: "Make directory", Local: true, System: true,
		Description: "Create a directory in the workspace with its missing parents. An existing directory is not an error.",
		params:      []Param{pathParam},
	},
	{
		Name: FSDelete, Title: "Delete", Local: true, System: true,
		Description: "Delete a file, symbolic link or empty directory of the workspace; a directory with contents only " +
			"with recursive: true. A symbolic link is removed itself, never what it points to. The workspace itself " +
			"cannot be deleted.",
		params: []Param{
			pathParam,
			{Name: "recursive", Type: Boolean, Default: false, Description: "Delete a directory with everything in it"},
		},
	},
	{
		Name: ShellExec, Title: "Run shell command", Local: true, System: true,
		Description: "Run a shell command (sh -c) in the workspace directory and return its exit code, stdout and " +
			"stderr (at most 64 KiB of each; the result says when output was cut). It runs as the gateway's user with " +
			"a minimal environment (PATH, LANG, and HOME set to the workspace) and no stdin, and is not confined to " +
			"the workspace. It runs in its own process group: everything it started is killed when it ends, when " +
			"timeout_ms passes and when the call is cancelled. A non-zero exit code is reported, not an error.",
		params: []Param{
			{Name: "command", Type: String, Required: true, Description: "Shell command line, e.g. ls -la or python3 script.py"},
			{Name: "timeout_ms", Type: Integer, Default: defaultTimeoutMs, Min: bound(1), Max: bound(maxTimeoutMs),
				Description: "Milliseconds before the command is killed (at most 10 minutes)"},
		},
	},
}
