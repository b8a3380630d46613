package gateway

import (
	"flag"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Dialogs, files and downloads (issue 19): the gateway's part is the
// default dialog mode; the browser workers do the rest.

// DefaultDialogs is the dialog mode of a browser session that was not
// given one (open's and tab_new's dialogs argument).
const DefaultDialogs = "ask"

// FilesConfig is dialogs' and files' (files.go). Dialogs is the default
// dialog mode: ask, accept or dismiss ("" is DefaultDialogs).
type FilesConfig struct {
	Dialogs string
}

// registerFilesFlags adds --dialogs.
func registerFilesFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Dialogs, "dialogs", config.Env("SOVEREIGN_DIALOGS", DefaultDialogs),
		"how browser sessions answer the pages' dialogs unless a call's dialogs argument says otherwise: ask (accept alerts; "+
			"leave confirm, prompt and beforeunload dialogs open for handle_dialog), accept or dismiss [SOVEREIGN_DIALOGS]")
}

// dialogMode is the configured default dialog mode.
func (c FilesConfig) dialogMode() browserv1.DialogMode {
	m := strings.ToLower(strings.TrimSpace(c.Dialogs))
	if m == "" {
		m = DefaultDialogs
	}
	return catalog.DialogModes[m]
}

// validateFiles checks --dialogs.
func (c FilesConfig) validateFiles(bad func(flag, format string, a ...any)) {
	if c.dialogMode() == browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
		bad("dialogs", "%q must be ask, accept or dismiss", c.Dialogs)
	}
}

// resolveUploadPaths reads the files that upload_file or drop names by path from
// the workspace into the request, where the caller may use the system
// tools (--system-tools on; agent runs with agent). The request then
// carries at most catalog.MaxInlineUpload bytes.
func (g *Gateway) resolveUploadPaths(c *dispatch.Call, req *browserv1.ToolRequest) error {
	files, tool := req.GetUploadFile().GetFiles(), "upload_file"
	if d := req.GetDrop(); d != nil {
		files, tool = d.GetFiles(), "drop"
	}
	total := 0
	for _, f := range files {
		total += len(f.GetContent())
	}
	for i, f := range files {
		if f.GetPath() == "" {
			continue
		}
		mode := g.cfg.systemMode()
		if g.workspace == nil || mode == SystemToolsOff || mode == SystemToolsAgent && c.Transport != dispatch.Bus {
			return dispatch.ToolErrorf("%s: file %d names a path, but this gateway's system tools are off for this caller "+
				"(--system-tools on, or agent for agent runs); give the file as content_base64 or url", tool, i)
		}
		data, err := g.workspace.ReadBytes(f.GetPath(), int64(catalog.MaxInlineUpload-total))
		if err != nil {
			return dispatch.ToolErrorf("%s: file %d: %v (a call carries at most %d bytes of files from content_base64 and path; give big files by url)",
				tool, i, err, catalog.MaxInlineUpload)
		}
		total += len(data)
		f.Content, f.Path = data, ""
	}
	return nil
}
