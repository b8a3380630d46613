package gateway

import (
	"flag"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/catalog"
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
