package catalog

import (
	"fmt"
	"slices"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// What a tool is to the worker, declared in its entry (Tool's trait
// fields) so that the gateway, the worker and docs/tools.md all read the
// same answer: which tools settle, navigate, take secrets, need the
// session, and so on.

// A Trait is a property of a tool call. Most hold for every call of a
// tool (Always) or for none (nil); a few depend on the call's arguments
// (fill navigates only with submit), and the tool's entry declares them
// as a func of its request.
type Trait func(req *browserv1.ToolRequest) bool

// Always is the trait that holds for every call.
func Always(*browserv1.ToolRequest) bool { return true }

// Of reports whether the trait holds for req; a nil trait never does.
func (t Trait) Of(req *browserv1.ToolRequest) bool { return t != nil && t(req) }

// Level is the layer of the browser worker that handles a tool: each
// level's handlers are registered in a table of their own, which a worker
// test holds to this field.
type Level int

const (
	// OnTab tools run in the session's active tab (internal/page). It is
	// the zero value: most tools are tab tools.
	OnTab Level = iota
	// OnSession tools need the browser session around the tab: its tabs,
	// its emulation, its files and downloads, its identity, its URL
	// policy (services/browser).
	OnSession
	// OnWorker tools need the worker's stores beyond one session (saved
	// storage).
	OnWorker
)

// Secrets says which fields of a tool's request may hold
// {{secrets.NAME}} placeholders: the worker puts the operator's values in
// there at the last moment (services/browser/secrets.go).
type Secrets struct {
	// In returns the fields of req that may hold placeholders, as
	// pointers into req (nil for a field left out), in an order that does
	// not change between a request and its clone. nil: the tool takes no
	// secrets.
	In func(req *browserv1.ToolRequest) []*string
	// URL says the fields are URLs: a placeholder may stand in the path,
	// query or user info, not in the scheme or host.
	URL bool
	// Item names one of several fields in an error, numbered from 1
	// ("fill_form field 2: …"); "" for a tool with one field.
	Item string
}

// The default caps of the text tools (max_chars). The worker's page
// layer cuts with the same values (internal/page/limits.go).
const (
	// SnapshotChars caps a snapshot.
	SnapshotChars = 40000
	// TextChars caps the other text tools (get_text, get_html, eval, …).
	TextChars = 20000
	// MaxChars is the largest max_chars a call may ask for.
	MaxChars = 5000000
)

// toolOneof is the oneof of ToolRequest whose field names the tool.
var toolOneof = (&browserv1.ToolRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("tool")

// requestOnly are requests the worker serves that no caller may make as a
// tool: the gateway sends them itself.
var requestOnly = []Tool{
	// set_identity follows a login, logout or switch_identity in the
	// session (services/gateway/login.go).
	{Name: "set_identity", Level: OnSession},
}

// byRequest indexes the tools that build a worker request, and
// requestOnly, by their ToolRequest oneof field: its name is the tool's.
var byRequest = func() map[string]Tool {
	m := make(map[string]Tool)
	for _, t := range slices.Concat(tools, requestOnly) {
		if t.ForWorker() {
			m[t.Name] = t
		}
	}
	return m
}()

// ForRequest returns the descriptor of the tool that req calls; false when
// req names no tool.
func ForRequest(req *browserv1.ToolRequest) (Tool, bool) {
	fd := req.ProtoReflect().WhichOneof(toolOneof)
	if fd == nil {
		return Tool{}, false
	}
	t, ok := byRequest[string(fd.Name())]
	return t, ok
}

// Join merges the handler tables of a worker's domains into one, for
// dispatch. A name in two tables is a programming error: it panics, at
// start.
func Join[H any](tables ...map[string]H) map[string]H {
	out := make(map[string]H)
	for _, table := range tables {
		for name, h := range table {
			if _, dup := out[name]; dup {
				panic(fmt.Sprintf("catalog.Join: tool %s has two handlers", name))
			}
			out[name] = h
		}
	}
	return out
}

// ForWorker reports whether a browser worker handles t: it builds a
// ToolRequest (not a Local, Identity or agent tool).
func (t Tool) ForWorker() bool { return !t.Local && !t.Identity && !t.StartsRuns() }

// CanNavigate reports whether a call of t may take the tab to another page,
// by itself (Navigates) or through the page (MayNavigate): a navigation the
// URL policy blocked during the call is then the call's error.
func (t Tool) CanNavigate(req *browserv1.ToolRequest) bool {
	return t.Navigates.Of(req) || t.MayNavigate.Of(req)
}

// derive gives each tool what its traits imply: the acting tools settle_ms
// and snapshot (and a line in their description), the capped tools
// max_chars.
func derive(ts []Tool) []Tool {
	for i := range ts {
		t := &ts[i]
		if t.Acts != nil {
			t.params = append(slices.Clip(t.params), settleParams...)
			t.Description += settleDoc
			t.build = settling(t.build)
		}
		if t.MaxChars > 0 {
			t.params = append(slices.Clip(t.params), maxCharsParam(t.MaxChars))
			t.build = capping(t.build)
		}
	}
	return ts
}

// The request fields that may hold secrets (Secrets.In).
var (
	openURL    = field((*browserv1.ToolRequest).GetOpen, func(o *browserv1.Open) *string { return &o.Url })
	tabNewURL  = field((*browserv1.ToolRequest).GetTabNew, func(t *browserv1.TabNew) *string { return &t.Url })
	fillValue  = field((*browserv1.ToolRequest).GetFill, func(f *browserv1.Fill) *string { return &f.Value })
	typeValue  = field((*browserv1.ToolRequest).GetType, func(f *browserv1.Fill) *string { return &f.Value })
	promptText = field((*browserv1.ToolRequest).GetHandleDialog, func(h *browserv1.HandleDialog) *string { return h.PromptText })
)

// field returns the Secrets.In of one string field of a request's
// message: none when the request lacks the message, or the message an
// optional field.
func field[M any](msg func(*browserv1.ToolRequest) *M, pick func(*M) *string) func(*browserv1.ToolRequest) []*string {
	return func(r *browserv1.ToolRequest) []*string {
		if m := msg(r); m != nil {
			if f := pick(m); f != nil {
				return []*string{f}
			}
		}
		return nil
	}
}

// formValues are the values of fill_form's fields, one per field in
// order (errors number them); a field without one (a checkbox) has nil.
func formValues(r *browserv1.ToolRequest) []*string {
	fields := r.GetFillForm().GetFields()
	out := make([]*string, len(fields))
	for i, f := range fields {
		out[i] = f.Value
	}
	return out
}
