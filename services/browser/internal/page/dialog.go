package page

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
//     (dialogs.watch), so the click or navigation that raised the dialog
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

// dialogs are the tab's JavaScript dialogs: the one that waits for
// handle_dialog, the notes for the running tool's result, and what the
// running tool asked of them. The event listener writes them (onOpening,
// onClosed) while a tool runs, so mu guards them. It is never held with
// Tab.mu, in either order.
type dialogs struct {
	// ctx is the tab context, in which a dialog is answered.
	ctx context.Context
	// modeOf is Options.Dialogs.
	modeOf func() browserv1.DialogMode

	mu sync.Mutex
	// pending is the dialog that waits for handle_dialog (nil for none).
	pending *openDialog
	// notes are the lines about dialogs for the running tool's result,
	// and more how many were left out of them.
	notes []string
	more  int
	// answered is how many dialogs the tab answered by itself since the
	// tool call began.
	answered int
	// interrupt cancels the running tool (nil between calls), and leaving
	// says that it navigates (see watch).
	interrupt func()
	leaving   bool
}

// errDialogOpened is the cause of a tool context cancelled because a
// dialog opened that waits for an answer.
var errDialogOpened = errors.New("a dialog opened")

// mode returns the mode the tab answers dialogs in now.
func (d *dialogs) mode() browserv1.DialogMode {
	if d.modeOf != nil {
		if m := d.modeOf(); m != browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
			return m
		}
	}
	return browserv1.DialogMode_DIALOG_MODE_ASK
}

// onOpening handles Page.javascriptDialogOpening in the tab's event loop:
// it answers the dialog (from a goroutine) or keeps it open for
// handle_dialog and interrupts the running tool. ready says that the tab
// finished its init (see Tab.ready).
func (d *dialogs) onOpening(ev *page.EventJavascriptDialogOpening, ready bool) {
	o := &openDialog{typ: ev.Type, msg: clipText(ev.Message), defaultPrompt: ev.DefaultPrompt}
	mode := d.mode()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answered++
	if d.answered > maxDialogsInARow {
		o.loop = true
		d.keepLocked(o, fmt.Sprintf("(The page opened more than %d dialogs in a row; this one is left open so that it stops.)", maxDialogsInARow))
		return
	}
	accept := mode != browserv1.DialogMode_DIALOG_MODE_DISMISS && ready
	switch {
	case o.typ == page.DialogTypeAlert:
		accept = true // it has no other answer
	case o.typ == page.DialogTypeBeforeunload && d.leaving:
		accept = true // open, back, forward and reload leave as asked
	case mode == browserv1.DialogMode_DIALOG_MODE_ASK && ready:
		d.keepLocked(o, "")
		return
	}
	verb := "accepted"
	if !accept {
		verb = "dismissed"
	}
	if len(d.notes) < maxDialogNotes {
		d.notes = append(d.notes, fmt.Sprintf("(%s %s dialog said %q; it was %s.)", article(o.typ), o.typ, o.msg, verb))
	} else {
		d.more++
	}
	go d.answer(accept, ev.DefaultPrompt)
}

// keepLocked leaves o open for handle_dialog, notes it (after note, when
// not "") and interrupts the running tool. d.mu is held.
func (d *dialogs) keepLocked(o *openDialog, note string) {
	d.pending = o
	if note != "" {
		d.notes = append(d.notes, note)
	}
	d.notes = append(d.notes, o.waiting())
	if d.interrupt != nil {
		d.interrupt()
	}
}

// article is "An" for an alert, else "A" (waiting lowers it).
func article(typ page.DialogType) string {
	if typ == page.DialogTypeAlert {
		return "An"
	}
	return "A"
}

// answer answers the open dialog. It runs on its own goroutine with the
// tab's context (the event loop cannot wait for the reply), for a few
// seconds at most.
func (d *dialogs) answer(accept bool, prompt string) {
	ctx, cancel := context.WithTimeout(d.ctx, answerTimeout)
	defer cancel()
	_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept, PromptText: prompt})
}

// answerTimeout bounds the answer to a dialog.
const answerTimeout = 10 * time.Second

// onClosed forgets the open dialog: someone answered it, or a navigation
// closed it.
func (d *dialogs) onClosed() {
	d.mu.Lock()
	d.pending = nil
	d.mu.Unlock()
}

// open returns the dialog that waits for an answer, or nil.
func (d *dialogs) open() *openDialog {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending
}

// beginCall starts counting the dialogs of a new tool call.
func (d *dialogs) beginCall() {
	d.mu.Lock()
	d.answered = 0
	d.mu.Unlock()
}

// take returns the notes about the dialogs of the tool (answered or
// waiting), as lines for its result.
func (d *dialogs) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	notes := d.notes
	if d.more > 0 {
		notes = append(notes, fmt.Sprintf("(… and %d more dialogs.)", d.more))
	}
	d.notes, d.more = nil, 0
	return notes
}

// dialogError is the error of a tool that needs the page while d is open.
func dialogError(tool string, d *openDialog) error {
	return bus.Errorf(commonv1.ErrorCode_DIALOG_OPEN, "%s cannot run: %s", tool, d.waiting())
}

// watch returns ctx cancelled with errDialogOpened as soon as a
// dialog opens that waits for an answer, so that the tool that
// raised it returns at once instead of waiting on the frozen page. While a
// navigating tool runs, beforeunload dialogs are accepted.
func (d *dialogs) watch(ctx context.Context, navigates bool) (context.Context, func()) {
	dctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	d.interrupt = func() { cancel(errDialogOpened) }
	d.leaving = navigates
	d.mu.Unlock()
	return dctx, func() {
		d.mu.Lock()
		d.interrupt, d.leaving = nil, false
		d.mu.Unlock()
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

// leave answers the open dialog before a navigation. It dismisses it: a
// beforeunload dialog that the navigation raises again is accepted then
// (see watch), and accepting an old one would let the
// navigation that raised it go on and abort this one. A page that keeps
// raising dialogs cannot be left (its script never yields to the
// navigation): that fails at once, naming tab_close.
func (d *dialogs) leave(ctx context.Context, tool string) error {
	o := d.open()
	if o == nil {
		return nil
	}
	if o.loop {
		return bus.Errorf(commonv1.ErrorCode_DIALOG_OPEN,
			"%s cannot leave this page: it keeps opening dialogs (more than %d in a row, the last %s); close the tab with close or tab_close and open the page you want in a new tab",
			tool, maxDialogsInARow, o.waiting())
	}
	if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}); err != nil {
		return fmt.Errorf("answer the open %s dialog: %w", o.typ, err)
	}
	d.clear(o)
	d.mu.Lock()
	d.notes = append(d.notes, fmt.Sprintf("(The open %s dialog %q was dismissed first.)", o.typ, o.msg))
	d.mu.Unlock()
	return nil
}

// clear forgets o when it is still the open dialog (a new one may have
// opened since).
func (d *dialogs) clear(o *openDialog) {
	d.mu.Lock()
	if d.pending == o {
		d.pending = nil
	}
	d.mu.Unlock()
}

// dialogHandlers answer dialogs.
var dialogHandlers = map[string]handler{
	"handle_dialog": on((*browserv1.ToolRequest).GetHandleDialog, (*Tab).handleDialog),
}

// handleDialog answers the open dialog (handle_dialog) and reports what the
// page did next, as an action does.
func (t *Tab) handleDialog(ctx context.Context, h *browserv1.HandleDialog) (*browserv1.ToolResult, error) {
	d := t.dialogs.open()
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
	t.dialogs.clear(d)
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
	d := t.dialogs.open()
	return d != nil && d.loop
}
