package page

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/runtime"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// The console: every tab keeps its last console messages (console.*
// calls, uncaught exceptions and unhandled promise rejections) in a ring,
// fed by the same events that settling counts errors from, so that
// console_messages can show them after the fact.
const (
	// DefaultConsoleBuffer is how many console messages a tab keeps when
	// Options.ConsoleBuffer is 0.
	DefaultConsoleBuffer = 500
	// defaultConsoleLimit is how many messages console_messages returns
	// when the call does not say.
	defaultConsoleLimit = 100
	// maxConsoleText caps the text of one message: a page can log
	// megabytes in one call.
	maxConsoleText = 2000
)

// Severities, least first: a level asks for its own and the more severe.
var severities = []string{"debug", "info", "warning", "error"}

// consoleEntry is one console message.
type consoleEntry struct {
	Seq   int64  `json:"seq"`
	Level string `json:"level"`
	// Kind is the console call (log, warn, table, …) or "exception".
	Kind string `json:"kind"`
	Text string `json:"text"`
	URL  string `json:"url,omitempty"`
	Line int64  `json:"line,omitempty"`
	Time int64  `json:"time_ms"`
}

// consoleRing holds the last messages of a tab, oldest first. Guarded by
// Tab.mu.
type consoleRing struct {
	size    int
	entries []consoleEntry
	next    int64 // the number of the next message
	dropped int64 // messages that fell out of the ring
}

func (r *consoleRing) add(e consoleEntry) {
	r.next++
	e.Seq = r.next
	e.Text = clipTo(e.Text, maxConsoleText)
	e.URL = clipTo(e.URL, maxURL)
	if len(r.entries) >= r.size {
		n := len(r.entries) - r.size + 1
		r.entries = append(r.entries[:0], r.entries[n:]...)
		r.dropped += int64(n)
	}
	r.entries = append(r.entries, e)
}

// consoleLevel maps a console call to its severity.
func consoleLevel(t runtime.ConsoleAPICalledType) string {
	switch t {
	case runtime.ConsoleAPICalledTypeError, runtime.ConsoleAPICalledTypeAssert:
		return "error"
	case runtime.ConsoleAPICalledTypeWarning:
		return "warning"
	case runtime.ConsoleAPICalledTypeDebug, runtime.ConsoleAPICalledTypeTrace, runtime.ConsoleAPICalledTypeProfile, runtime.ConsoleAPICalledTypeProfileEnd, runtime.ConsoleAPICalledTypeCount, runtime.ConsoleAPICalledTypeTimeEnd:
		return "debug"
	}
	return "info"
}

// devtools are the developer tools' records of the tab: the last console
// messages and requests, which the event listener writes, and the requests
// the session's URL policy refused. Tab.mu guards them, as it guards the
// rest of what the listener writes: one lock for one event.
type devtools struct {
	// tab is the tab they record: its lock, options and call state.
	tab     *Tab
	console consoleRing
	network netRing
	// blocked returns the requests the session's URL policy refused
	// (Tab.SetBlocked), or nil.
	blocked func() []*browserv1.BlockedRequest
}

// onConsole records a console event (from onEvent, with Tab.mu held).
func (d *devtools) onConsole(ev any) {
	now := time.Now().UnixMilli()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		e := consoleEntry{Level: consoleLevel(ev.Type), Kind: string(ev.Type), Text: consoleText(ev.Args), Time: now}
		if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
			e.URL, e.Line = st.CallFrames[0].URL, st.CallFrames[0].LineNumber+1
		}
		d.console.add(e)
	case *runtime.EventExceptionThrown:
		x := ev.ExceptionDetails
		if x == nil {
			return
		}
		text := exceptionText(x)
		if strings.HasPrefix(x.Text, "Uncaught") && !strings.HasPrefix(text, "Uncaught") {
			// "Uncaught" or "Uncaught (in promise)": an unhandled rejection.
			text = x.Text + " " + text
		}
		e := consoleEntry{Level: "error", Kind: "exception", Text: text, URL: x.URL, Line: x.LineNumber + 1, Time: now}
		if st := x.StackTrace; e.URL == "" && st != nil && len(st.CallFrames) > 0 {
			e.URL, e.Line = st.CallFrames[0].URL, st.CallFrames[0].LineNumber+1
		}
		d.console.add(e)
	}
}

// devtoolsHandlers are the developer tools (network.go, pdf.go).
var devtoolsHandlers = map[string]handler{
	"console_messages": on((*browserv1.ToolRequest).GetConsoleMessages, func(t *Tab, ctx context.Context, r *browserv1.ConsoleMessages) (*browserv1.ToolResult, error) {
		return t.devtools.consoleMessages(ctx, r)
	}),
	"network_requests": on((*browserv1.ToolRequest).GetNetworkRequests, func(t *Tab, ctx context.Context, r *browserv1.NetworkRequests) (*browserv1.ToolResult, error) {
		return t.devtools.networkRequests(ctx, r)
	}),
	"network_request": on((*browserv1.ToolRequest).GetNetworkRequest, func(t *Tab, ctx context.Context, r *browserv1.NetworkRequestBody) (*browserv1.ToolResult, error) {
		return t.devtools.networkRequest(ctx, r)
	}),
	"pdf": on((*browserv1.ToolRequest).GetPdf, (*Tab).pdf),
}

// consoleMessages is the console_messages tool.
func (d *devtools) consoleMessages(_ context.Context, req *browserv1.ConsoleMessages) (*browserv1.ToolResult, error) {
	level := strings.ToLower(strings.TrimSpace(req.GetLevel()))
	switch level {
	case "":
		level = "info"
	case "log":
		level = "info"
	case "warn":
		level = "warning"
	}
	least := -1
	for i, s := range severities {
		if s == level {
			least = i
		}
	}
	if least < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "console level %q is not one of %s", req.GetLevel(), strings.Join(severities, ", "))
	}
	if req.GetSince() < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "since must be 0 or the next number of an earlier console_messages, not %d", req.GetSince())
	}
	limit, err := listLimit(req.GetLimit(), defaultConsoleLimit, d.tab.opts.consoleBuffer(), "console_messages")
	if err != nil {
		return nil, err
	}
	d.tab.mu.Lock()
	var picked []consoleEntry
	for _, e := range d.console.entries {
		if e.Seq > req.GetSince() && severityOf(e.Level) >= least {
			picked = append(picked, e)
		}
	}
	next, dropped := d.console.next, d.console.dropped
	d.tab.mu.Unlock()
	picked, lines, left := newest(picked, limit, d.tab.capChars(DefaultTextChars))
	head := fmt.Sprintf("%d console messages (level %s and above)", len(picked), level)
	switch {
	case len(picked) == 0:
		head = fmt.Sprintf("no console messages (level %s and above)", level)
	case len(picked) == 1:
		head = fmt.Sprintf("1 console message (level %s and above)", level)
	}
	if req.GetSince() > 0 {
		head += fmt.Sprintf(" after #%d", req.GetSince())
	}
	head += fmt.Sprintf("; next: %d (pass it as since to see only newer ones)", next)
	if left > 0 {
		head += fmt.Sprintf("; %d older matching messages not shown (limit %d, max_chars)", left, limit)
	}
	if dropped > 0 {
		head += fmt.Sprintf("; the tab keeps the last %d messages (%d older ones were dropped)", d.tab.opts.consoleBuffer(), dropped)
	}
	res := textResult("%s", strings.Join(append([]string{head}, lines...), "\n"))
	SetStructured(res, "messages", picked)
	SetStructured(res, "next", next)
	return res, nil
}

func severityOf(level string) int {
	for i, s := range severities {
		if s == level {
			return i
		}
	}
	return 0
}

// line is how a message reads in the text of the result.
func (e consoleEntry) line() string {
	s := fmt.Sprintf("#%d [%s] %s", e.Seq, e.Level, e.Text)
	if e.URL != "" {
		s += fmt.Sprintf(" (%s:%d)", e.URL, e.Line)
	}
	return s
}

// listLimit checks the limit of a listing tool: 0 is def, at most max.
func listLimit(n int32, def, max int, tool string) (int, error) {
	switch {
	case n == 0:
		return min(def, max), nil
	case n < 0 || int(n) > max:
		return 0, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: limit must be 1-%d (the tab keeps no more), not %d", tool, max, n)
	}
	return int(n), nil
}

// newest keeps the newest limit entries whose lines fit in max
// characters; it returns them, their lines and how many were left out.
func newest[E interface{ line() string }](picked []E, limit, max int) ([]E, []string, int) {
	more := 0
	if len(picked) > limit {
		more, picked = len(picked)-limit, picked[len(picked)-limit:]
	}
	lines := make([]string, len(picked))
	for i, e := range picked {
		lines[i] = e.line()
	}
	shown, cut := keepLast(lines, max)
	return picked[len(picked)-shown:], lines[len(lines)-shown:], more + cut
}

// keepLast returns how many of the last lines fit in max characters
// (at least one, cut by the caller's clipping) and how many were left out.
func keepLast(lines []string, max int) (kept, cut int) {
	total := 0
	for i := len(lines) - 1; i >= 0; i-- {
		total += len(lines[i]) + 1
		if total > max && kept > 0 {
			return kept, len(lines) - kept
		}
		kept++
	}
	return kept, 0
}
