package catalog

import (
	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// Dialogs, files and downloads (issue 19). The worker does the work:
// internal/page/dialog.go and files.go.

// DialogModes are the values of open's and tab_new's dialogs argument and
// of the gateway's --dialogs flag.
var DialogModes = map[string]browserv1.DialogMode{
	"accept":  browserv1.DialogMode_DIALOG_MODE_ACCEPT,
	"dismiss": browserv1.DialogMode_DIALOG_MODE_DISMISS,
	"ask":     browserv1.DialogMode_DIALOG_MODE_ASK,
}

var dialogsParam = Param{
	Name: "dialogs", Type: String, Enum: []string{"ask", "accept", "dismiss"},
	Description: "How the browser session answers the pages' dialogs from now on: ask (the operator's default unless " +
		"set otherwise) accepts alerts and leaves confirm, prompt and beforeunload dialogs open, naming them in the " +
		"result, until handle_dialog answers; accept and dismiss answer every dialog at once.",
}

// withDialogs sets the request's dialog mode from the dialogs argument.
func withDialogs(build func(Args) (*browserv1.ToolRequest, error)) func(Args) (*browserv1.ToolRequest, error) {
	return func(a Args) (*browserv1.ToolRequest, error) {
		req, err := build(a)
		if err != nil {
			return nil, err
		}
		req.Dialogs = DialogModes[a.str("dialogs")]
		return req, nil
	}
}

var filesTools = withSettle([]Tool{
	{
		Name: "handle_dialog", Title: "Answer dialog",
		Description: "Answer the dialog (confirm, prompt or beforeunload) that is open in the active tab. In the " +
			"session's ask mode such a dialog stays open: the call that raised it says so, and tools that need the " +
			"page fail naming it until it is answered. Accepting a beforeunload dialog leaves the page.",
		params: []Param{
			{Name: "accept", Type: Boolean, Required: true, Description: "true to accept (OK, leave the page), false to dismiss (Cancel, stay)"},
			{Name: "prompt_text", Type: String, Description: "The text a prompt dialog returns when accepted (default: the prompt's own default text)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			h := &browserv1.HandleDialog{Accept: a.boolean("accept")}
			if v, ok := a["prompt_text"].(string); ok {
				h.PromptText = &v
			}
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: h}}, nil
		},
	},
})
