package page

import (
	"context"
	"fmt"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// callState is what Do keeps about the running tool. Only the holder of
// Tab.sem uses it.
type callState struct {
	// settle is the settle budget of the call (settle.go); 0 skips the
	// quiet wait.
	settle time.Duration
	// netMark is the number of requests the tab had started before the
	// tool ran.
	netMark int64
	// settled is what settling saw, when the tool settled.
	settled *settleResult
	// maxChars caps the text of the result (limits.go).
	maxChars int
	// files are the paths of upload_file's files; choosers the notes on
	// the file choosers the page opened (files.go).
	files    []string
	choosers []string
	// did says what the tool did, for the result of a tool that a
	// dialog interrupted (dialog.go).
	did string
	// inputAt is when the action sent its input to the page (zero for a
	// navigation): a DOM change after it is the page's own reaction.
	inputAt time.Time
	// slowReaction says that the page reacts to the action after work off
	// its main thread (it reads the files it was given): settling waits
	// for the quiet window even when nothing happened at once, as after a
	// route change.
	slowReaction bool
	// secretInput says that the text the tool types holds an operator
	// secret (WithSecretInput): the fields it types into draw discs.
	secretInput bool
}

// pageSeen is the address and title of the page as the last tool saw
// them, to say when an action changed them.
type pageSeen struct {
	url, title string
}

// Changes is what an action changed, as the structured result carries it
// (under "changes"); the text of the result says the same in a few short
// lines, only when something changed.
type Changes struct {
	URL         string   `json:"url,omitempty"`
	PreviousURL string   `json:"previous_url,omitempty"`
	Title       *string  `json:"title,omitempty"`
	OpenedTabs  []string `json:"opened_tabs,omitempty"`
	// FileChoosers names the file inputs whose chooser the page opened.
	FileChoosers []string `json:"file_choosers,omitempty"`
	Dialogs      []string `json:"dialogs,omitempty"`
	// OpenDialog is the dialog that waits for handle_dialog.
	OpenDialog *DialogInfo `json:"open_dialog,omitempty"`
	// ConsoleErrors counts the console errors and uncaught exceptions
	// while the tool ran; FirstConsoleError is the first one.
	ConsoleErrors     int    `json:"console_errors,omitempty"`
	FirstConsoleError string `json:"first_console_error,omitempty"`
	// Settled is false when the settle budget ran out; Pending says what
	// was still going on. SettleMS is how long the tool waited.
	Settled  bool   `json:"settled"`
	Pending  string `json:"pending,omitempty"`
	SettleMS int64  `json:"settle_ms"`
}

// beginCall resets what the tab records per tool and prepares t.call.
func (t *Tab) beginCall(req *browserv1.ToolRequest) {
	budget := DefaultSettle
	if req.SettleMs != nil {
		budget = time.Duration(max(req.GetSettleMs(), 0)) * time.Millisecond
	}
	t.mu.Lock()
	t.act.errors, t.act.firstErr, t.act.opened = 0, "", nil
	started := t.act.started
	t.mu.Unlock()
	t.dialogs.beginCall()
	t.call = callState{settle: budget, netMark: started, maxChars: int(req.GetMaxChars())}
}

// report adds to res what the action changed: text lines after the first
// text part and "changes" in the structured result. An action that
// navigated by itself has said where the tab is already.
func (t *Tab) report(navigated bool, res *browserv1.ToolResult, dialogs []string) {
	var c Changes
	var lines []string
	t.mu.Lock()
	c.ConsoleErrors, c.FirstConsoleError = t.act.errors, t.act.firstErr
	c.OpenedTabs = append([]string(nil), t.act.opened...)
	before := t.seen
	t.mu.Unlock()
	c.Dialogs = dialogs
	if d := t.dialogs.open(); d != nil {
		c.OpenDialog = &DialogInfo{Type: string(d.typ), Message: d.msg}
	}
	if r := t.call.settled; r != nil {
		c.Settled, c.Pending, c.SettleMS = !r.Timeout, r.Pending, r.Waited.Milliseconds()
		if r.URL != "" {
			if before.url != "" && r.URL != before.url && !navigated {
				c.URL, c.PreviousURL = clipTo(r.URL, maxURL), clipTo(before.url, maxURL)
				lines = append(lines, fmt.Sprintf("- URL: %s (was %s)", c.URL, c.PreviousURL))
			}
			if before.url != "" && r.Title != before.title && !navigated {
				title := clipTo(r.Title, maxTitle)
				c.Title = &title
				lines = append(lines, fmt.Sprintf("- title: %q", title))
			}
			t.mu.Lock()
			t.seen = pageSeen{url: r.URL, title: r.Title}
			t.mu.Unlock()
		}
		if r.Timeout {
			lines = append(lines, fmt.Sprintf("- not settled after %d ms: %s", r.Waited.Milliseconds(), r.Pending))
		}
	} else {
		c.Settled = true
	}
	for _, u := range c.OpenedTabs {
		lines = append(lines, "- the page opened a new tab: "+u)
	}
	for _, d := range dialogs {
		lines = append(lines, "- "+d)
	}
	c.FileChoosers = t.call.choosers
	for _, n := range c.FileChoosers {
		lines = append(lines, "- "+n)
	}
	switch {
	case c.ConsoleErrors == 1:
		lines = append(lines, "- 1 new console error: "+c.FirstConsoleError)
	case c.ConsoleErrors > 1:
		lines = append(lines, fmt.Sprintf("- %d new console errors; the first: %s", c.ConsoleErrors, c.FirstConsoleError))
	}
	if len(lines) > 0 {
		appendText(res, strings.Join(lines, "\n"))
	}
	SetStructured(res, "changes", c)
}

// Opened returns the URLs of the windows that the page opened during the
// last tool (window.open, target=_blank links).
func (t *Tab) Opened() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.act.opened...)
}

// ClipTab cuts the address and title of a tab, which the page controls,
// for tab lists.
func ClipTab(url, title string) (string, string) {
	return clipTo(url, maxURL), clipTo(title, maxTabTitle)
}

// AppendText adds lines to the first text part of res (or a new one).
func AppendText(res *browserv1.ToolResult, lines string) { appendText(res, lines) }

// appendText adds lines to the first text part of res (or a new one).
func appendText(res *browserv1.ToolResult, lines string) {
	for _, c := range res.Content {
		if tc, ok := c.Part.(*browserv1.Content_Text); ok {
			tc.Text += "\n" + lines
			return
		}
	}
	res.Content = append(res.Content, textContent(lines))
}

// SetStructured sets key in the structured content of res to v (any value
// encoding/json writes). A value that cannot be encoded is left out: the
// text says the same.
func SetStructured(res *browserv1.ToolResult, key string, v any) {
	res.Structured, _ = structured.Set(res.Structured, key, v)
}

// snapshotAfter adds the snapshot of the settled page to res, whole or
// only its changed lines, as asked.
func (t *Tab) snapshotAfter(ctx context.Context, how browserv1.SnapshotAfter, res *browserv1.ToolResult) error {
	if how == browserv1.SnapshotAfter_SNAPSHOT_AFTER_NONE {
		return nil
	}
	prev := t.lastSnap
	snap, err := t.snapshot(ctx, &browserv1.Snapshot{Interactive: true, Compact: true})
	if err != nil {
		return err
	}
	text := snap.GetContent()[0].GetText()
	if how == browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF {
		// The diff is bounded as the snapshot is.
		text, _ = cutLines(strings.Split(diffSnapshots(prev, t.lastSnap), "\n"), t.capChars(DefaultSnapshotChars))
	}
	res.Content = append(res.Content, textContent(text))
	return nil
}
