package page

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Dialogs: alert, confirm, prompt and beforeunload.
//
// While a dialog is open the page is frozen: its JavaScript waits inside
// alert() or confirm(), every Runtime call on it waits too, and so does
// Input.dispatchMouseEvent for the click that raised it. So a dialog must
// never be left open by accident, and a tool must never wait on one:
//
//   - In accept and dismiss mode every dialog is answered at once, from a
//     goroutine (the event loop must not call the browser).
//   - In ask mode (the default) alerts are accepted and the other kinds
//     stay open: the running tool's context is cancelled at once
//     (watchDialogs), so the click or navigation that raised the dialog
//     returns saying so, and later tools that need the page fail with
//     DIALOG_OPEN naming it until handle_dialog answers it. Navigations
//     (open, back, forward, reload) answer it first themselves.
//   - A page that raises dialog after dialog (an alert in a loop) gets
//     maxDialogsInARow answers per tool call; the next one is left open,
//     so the page stops (and the worker's CPU with it). Such a page cannot
//     be navigated away from (its script would run on): open fails naming
//     it, and the session opens the address in a new tab in its place.
//   - A tab that is being attached (a popup the session adopts) answers a
//     dialog at once whatever the mode: attaching evaluates in the page and
//     would wait for the dialog forever. Confirms and the like are then
//     dismissed, the safe answer, and the tab's next result says so.

// maxDialogsInARow is how many dialogs the tab answers by itself during
// one tool call (or between two) before it leaves the next one open.
const maxDialogsInARow = 20

// maxDialogNotes is how many dialog notes one result lists; the others are
// counted.
const maxDialogNotes = 10

// openDialog is a dialog that waits for handle_dialog.
type openDialog struct {
	typ page.DialogType
	// msg is the dialog's message, cut to maxPageText characters.
	msg string
	// defaultPrompt is a prompt's default text.
	defaultPrompt string
	// loop says that the page opened more than maxDialogsInARow dialogs
	// in a row and this one was left open to stop it.
	loop bool
}

// waiting is how results and errors name the open dialog.
func (d *openDialog) waiting() string {
	how := "accept true or false"
	switch d.typ {
	case page.DialogTypePrompt:
		how = "accept true with prompt_text, or accept false"
	case page.DialogTypeBeforeunload:
		how = "accept true leaves the page, accept false stays"
	}
	return fmt.Sprintf("%s %s dialog is open: %q; answer it with handle_dialog (%s)", strings.ToLower(article(d.typ)), d.typ, d.msg, how)
}

// DialogInfo is the open dialog in the change report.
type DialogInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errDialogOpened is the cause of a tool context cancelled because a
// dialog opened that waits for an answer.
var errDialogOpened = errors.New("a dialog opened")

// dialogMode returns the mode the tab answers dialogs in now.
func (t *Tab) dialogMode() browserv1.DialogMode {
	if t.modeOf != nil {
		if m := t.modeOf(); m != browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
			return m
		}
	}
	return browserv1.DialogMode_DIALOG_MODE_ASK
}

// onDialog handles Page.javascriptDialogOpening in the tab's event loop:
// it answers the dialog (from a goroutine) or keeps it open for
// handle_dialog and interrupts the running tool.
func (t *Tab) onDialog(ev *page.EventJavascriptDialogOpening) {
	d := &openDialog{typ: ev.Type, msg: clipText(ev.Message), defaultPrompt: ev.DefaultPrompt}
	mode := t.dialogMode()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answered++
	if t.answered > maxDialogsInARow {
		d.loop = true
		t.keepDialogLocked(d, fmt.Sprintf("(The page opened more than %d dialogs in a row; this one is left open so that it stops.)", maxDialogsInARow))
		return
	}
	ready := t.ready.Load()
	accept := mode != browserv1.DialogMode_DIALOG_MODE_DISMISS && ready
	switch {
	case d.typ == page.DialogTypeAlert:
		accept = true // it has no other answer
	case d.typ == page.DialogTypeBeforeunload && t.leaving:
		accept = true // open, back, forward and reload leave as asked
	case mode == browserv1.DialogMode_DIALOG_MODE_ASK && ready:
		t.keepDialogLocked(d, "")
		return
	}
	verb := "accepted"
	if !accept {
		verb = "dismissed"
	}
	if len(t.dialogs) < maxDialogNotes {
		t.dialogs = append(t.dialogs, fmt.Sprintf("(%s %s dialog said %q; it was %s.)", article(d.typ), d.typ, d.msg, verb))
	} else {
		t.moreDialogs++
	}
	go t.answerDialog(accept, ev.DefaultPrompt)
}

// keepDialogLocked leaves d open for handle_dialog, notes it (after note,
// when not "") and interrupts the running tool. t.mu is held.
func (t *Tab) keepDialogLocked(d *openDialog, note string) {
	t.pending = d
	if note != "" {
		t.dialogs = append(t.dialogs, note)
	}
	t.dialogs = append(t.dialogs, d.waiting())
	if t.interrupt != nil {
		t.interrupt()
	}
}

// article is "An" for an alert, else "A" (waiting lowers it).
func article(typ page.DialogType) string {
	if typ == page.DialogTypeAlert {
		return "An"
	}
	return "A"
}

// answerDialog answers the open dialog. It runs on its own goroutine with
// the tab's context (the event loop cannot wait for the reply), for a few
// seconds at most.
func (t *Tab) answerDialog(accept bool, prompt string) {
	ctx, cancel := context.WithTimeout(t.ctx, answerTimeout)
	defer cancel()
	_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept, PromptText: prompt})
}

// answerTimeout bounds the answer to a dialog.
const answerTimeout = 10 * time.Second

// onDialogClosed forgets the open dialog: someone answered it, or a
// navigation closed it.
func (t *Tab) onDialogClosed() {
	t.mu.Lock()
	t.pending = nil
	t.mu.Unlock()
}

// openDialogNow returns the dialog that waits for an answer, or nil.
func (t *Tab) openDialogNow() *openDialog {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

// dialogError is the error of a tool that needs the page while d is open.
func dialogError(tool string, d *openDialog) error {
	return bus.Errorf(commonv1.ErrorCode_DIALOG_OPEN, "%s cannot run: %s", tool, d.waiting())
}

// watchDialogs returns ctx cancelled with errDialogOpened as soon as a
// dialog opens that waits for an answer, so that the tool that
// raised it returns at once instead of waiting on the frozen page. While a
// navigating tool runs, beforeunload dialogs are accepted.
func (t *Tab) watchDialogs(ctx context.Context, navigates bool) (context.Context, func()) {
	dctx, cancel := context.WithCancelCause(ctx)
	t.mu.Lock()
	t.interrupt = func() { cancel(errDialogOpened) }
	t.leaving = navigates
	t.mu.Unlock()
	return dctx, func() {
		t.mu.Lock()
		t.interrupt, t.leaving = nil, false
		t.mu.Unlock()
		cancel(nil)
	}
}

// interrupted is the result of a tool that a dialog interrupted: what the
// tool did before it (t.call.did), and the change report says which dialog
// waits.
func (t *Tab) interrupted(tool string) *browserv1.ToolResult {
	did := t.call.did
	if did == "" {
		did = tool + " was interrupted"
	}
	return textResult("%s; the page opened a dialog that waits for an answer (handle_dialog)", did)
}

// leaveDialog answers the open dialog before a navigation. It dismisses
// it: a beforeunload dialog that the navigation raises again is accepted
// then (see watchDialogs), and accepting an old one would let the
// navigation that raised it go on and abort this one. A page that keeps
// raising dialogs cannot be left (its script never yields to the
// navigation): that fails at once, naming tab_close.
func (t *Tab) leaveDialog(ctx context.Context, tool string) error {
	d := t.openDialogNow()
	if d == nil {
		return nil
	}
	if d.loop {
		return bus.Errorf(commonv1.ErrorCode_DIALOG_OPEN,
			"%s cannot leave this page: it keeps opening dialogs (more than %d in a row, the last %s); close the tab with close or tab_close and open the page you want in a new tab",
			tool, maxDialogsInARow, d.waiting())
	}
	if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}); err != nil {
		return fmt.Errorf("answer the open %s dialog: %w", d.typ, err)
	}
	t.clearDialog(d)
	t.mu.Lock()
	t.dialogs = append(t.dialogs, fmt.Sprintf("(The open %s dialog %q was dismissed first.)", d.typ, d.msg))
	t.mu.Unlock()
	return nil
}

// clearDialog forgets d when it is still the open dialog (a new one may
// have opened since).
func (t *Tab) clearDialog(d *openDialog) {
	t.mu.Lock()
	if t.pending == d {
		t.pending = nil
	}
	t.mu.Unlock()
}

// dialogHandlers answer dialogs.
var dialogHandlers = map[string]handler{
	"handle_dialog": on((*browserv1.ToolRequest).GetHandleDialog, (*Tab).handleDialog),
}

// handleDialog answers the open dialog (handle_dialog) and reports what the
// page did next, as an action does.
func (t *Tab) handleDialog(ctx context.Context, h *browserv1.HandleDialog) (*browserv1.ToolResult, error) {
	d := t.openDialogNow()
	if d == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND,
			"no dialog is open in this tab (dialogs in accept or dismiss mode, and alerts, are answered at once; the last result says how)")
	}
	if h.PromptText != nil && d.typ != page.DialogTypePrompt {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "prompt_text is only for a prompt dialog; the open dialog is a %s", d.typ)
	}
	if len(h.GetPromptText()) > maxPromptText {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "prompt_text has %d bytes; the limit is %d", len(h.GetPromptText()), maxPromptText)
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	text := d.defaultPrompt
	if h.PromptText != nil {
		text = h.GetPromptText()
	}
	t.call.inputAt = time.Now()
	if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: h.GetAccept(), PromptText: text}); err != nil {
		return nil, fmt.Errorf("answer the %s dialog: %w", d.typ, err)
	}
	t.clearDialog(d)
	var msg string
	switch {
	case !h.GetAccept():
		msg = fmt.Sprintf("Dismissed the %s dialog %q", d.typ, d.msg)
	case d.typ == page.DialogTypePrompt:
		msg = fmt.Sprintf("Accepted the prompt dialog %q with %q", d.msg, clipText(text))
	default:
		msg = fmt.Sprintf("Accepted the %s dialog %q", d.typ, d.msg)
	}
	t.call.did = msg
	return t.acted(ctx, w, msg)
}

// maxPromptText is the longest prompt_text handle_dialog takes, in bytes.
const maxPromptText = 64 << 10

// DialogLoop reports whether the tab stopped a page that kept opening
// dialogs (the last one is left open): such a page cannot be navigated
// away from, and the session replaces its tab instead.
func (t *Tab) DialogLoop() bool {
	d := t.openDialogNow()
	return d != nil && d.loop
}
