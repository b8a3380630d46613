// Package dispatch is the gateway's one tool-call path: a Call goes in, a
// Result comes out, whichever way the call arrived (an MCP tools/call, a
// sov.tools.call request on the bus, a script tool's inner call).
//
// A Registry maps each tool name to its Entry: its kind, its MCP tool
// (name, description, schema) and its Handler. Cross-cutting work (recover,
// audit, approval) is Middleware wrapped around every handler in one Chain,
// so each call meets the same policy in the same order. Facts flow down in
// the Call (the caller, the browser session it names, a URL a person let
// it load) and results flow up in the Result (its parts, the session
// handle, what the audit record must know); nothing is written into the
// context for a caller to read back.
//
// Transports are thin adapters: they build a Call from their request and
// render the Result in their own form. Only the MCP adapter writes a new
// session handle into the result's text; images stay bytes until a
// transport needs them otherwise.
package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// Kind is what serves a tool; behaviour differs by kind where a switch on
// it says so.
type Kind int

// The kinds of tools.
const (
	Browser  Kind = iota // runs on the browser worker of the call's session
	Identity             // login, logout, login_status, switch_identity: the signer and the worker
	Local                // answered by the gateway itself (secrets_list, sovereign__reload)
	System               // files and shell in the workspace (agent runs)
	Run                  // starts an agent run (run_browser_task)
	Script               // a deployed JavaScript tool
	HTTP                 // a deployed custom HTTP tool, sent by a worker
)

var kindNames = [...]string{"browser", "identity", "local", "system", "run", "script", "http"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// InSession reports whether tools of kind k act in a browser session (and
// so take the session argument and the call's binding).
func (k Kind) InSession() bool {
	switch k {
	case Browser, Identity, Run, Script:
		return true
	}
	return false
}

// Caller is who a call acts for, as authentication (or a bus request)
// established it.
type Caller struct {
	// Kind is "anonymous", "token", "oauth" or "console".
	Kind string
	// ID owns MCP sessions and session handles: "token:<token id>",
	// "oauth:<digest of issuer and subject>" or "anonymous".
	ID string
	// Name names the caller in the audit trail and approval requests.
	Name string
	// URLAllow, URLBlock and Approve are an API token's own policy.
	URLAllow, URLBlock, Approve []string
	// MaxSessions is an API token's own limit of browser sessions (0: the
	// gateway's --sessions-per-caller).
	MaxSessions int
}

// Transport is how a call arrived.
type Transport int

// The transports.
const (
	MCP       Transport = iota // tools/call on a 2025 protocol session
	MCPModern                  // tools/call of a 2026-07-28 client (no protocol session)
	Bus                        // sov.tools.call (agent runs, other services)
)

// Call is one tool call, parsed once at the edge. A script tool's inner
// calls are Calls of the script call's transport, caller and run.
type Call struct {
	Tool string
	// Args are the call's arguments (never nil). Handlers read them; the
	// audit middleware records them redacted.
	Args   map[string]any
	Caller Caller

	Transport Transport
	// Handle is the session handle the call names (the session argument,
	// or the bus request's session), "" for none.
	Handle string
	// MCPSession is the MCP session whose browser session the call acts
	// in: the protocol session of a 2025 client, or the "mcp:<id>" a bus
	// call names. "" for none.
	MCPSession string
	// RunID is the agent run a bus call belongs to.
	RunID string
	// Client is the MCP client's "name version", or "agent" for a run's
	// calls, for the audit trail and approval requests.
	Client string

	// Progress reaches the caller while the call runs (person.go); never
	// nil in a handler.
	Progress Progress
	// Ask puts a form to the person behind the caller during the call;
	// nil when the transport cannot.
	Ask Asker
	// Rounds is set when the caller can be answered with an InputRequest
	// and retries with the reply; nil when it cannot.
	Rounds *Rounds

	// URLOnce is a host a person let this one call load (set by the
	// approval middleware for the handler below it).
	URLOnce string
}

// Part is one piece of a result's content.
type Part struct {
	Text string
	// Data and MIME make an image part (Data nil for text), or with Name
	// a file (an MCP embedded resource: a PDF).
	Data []byte
	MIME string
	Name string
}

// Result is what a call produced, and what its audit record must know.
type Result struct {
	Parts []Part
	// Structured is the result's structured content (a JSON object), nil
	// for none. It stays a message until the edge writes it.
	Structured *structpb.Struct
	IsError    bool

	// Session is the handle of the browser session a handle-bound call
	// acted in ("" for MCP sessions and tools without a session); New
	// says the call minted it, so the client must be told.
	Session    string
	NewSession bool

	// Input, when set, asks the caller for a person's reply before the
	// call can run (a call with Rounds): the rest of the result is unused
	// and nothing is recorded (the retry is the call recorded).
	Input *InputRequest

	// Audit facts.
	BrowserSession string            // the worker's session id the call ran in
	Hide           []string          // arguments never to record
	Outcome        historyv1.Outcome // when more than ok/error (denied, timeout)
	Approval       *historyv1.Approval
}

// ToolError is a failure whose message is already what the model should
// read: a handler returns it as the error result, as is.
type ToolError struct{ msg string }

func (e *ToolError) Error() string { return e.msg }

// ToolErrorf is a ToolError.
func ToolErrorf(format string, a ...any) error { return &ToolError{msg: fmt.Sprintf(format, a...)} }

// Text is a successful text result.
func Text(s string) *Result { return &Result{Parts: []Part{{Text: s}}} }

// Errorf is an error result whose text is what the model should read.
func Errorf(format string, a ...any) *Result {
	return &Result{Parts: []Part{{Text: fmt.Sprintf(format, a...)}}, IsError: true}
}

// ErrorText is an error result with text s.
func ErrorText(s string) *Result { return &Result{Parts: []Part{{Text: s}}, IsError: true} }

// Denied is an error result recorded as denied.
func Denied(s string) *Result {
	r := ErrorText(s)
	r.Outcome = historyv1.Outcome_OUTCOME_DENIED
	return r
}

// Structured is a text result with the same facts as structured content
// (v: a struct or map encoding/json writes as an object).
func Structured(text string, v any) *Result {
	r := Text(text)
	r.Structured, _ = structured.Object(v)
	return r
}

// TextContent is the text of r's text parts, one per line.
func (r *Result) TextContent() string {
	var out []byte
	for _, p := range r.Parts {
		if p.Data != nil {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, p.Text...)
	}
	return string(out)
}

// Handler runs one call. It never returns nil.
type Handler func(ctx context.Context, c *Call) *Result

// Middleware wraps a handler with cross-cutting work.
type Middleware func(Handler) Handler

// Chain applies mw around h, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for _, m := range slices.Backward(mw) {
		h = m(h)
	}
	return h
}

// Tool is how a tool presents itself in a listing (MCP tools/list,
// sov.tools.list).
type Tool struct {
	Name string
	// Title is the tool's display title ("" for none); Annotations.Title
	// is the one its hints carry.
	Title       string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema json.RawMessage
	Annotations Annotations
}

// Annotations are hints about what a tool does (MCP tool annotations);
// a nil hint is unset.
type Annotations struct {
	Title                                        string
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// Hint is a set hint.
func Hint(b bool) *bool { return &b }

// Entry is one tool of the registry.
type Entry struct {
	Kind Kind
	Tool Tool
	// Handler runs the tool (without the registry's middleware).
	Handler Handler
	// AgentSchema is the tool's input schema for agent runs (without the
	// session argument: a run's browser session is its request's), nil
	// when it is Tool's.
	AgentSchema json.RawMessage
	// Hidden keeps the tool from MCP clients' tools/list: the bus lists
	// and calls it (system tools in "agent" mode).
	Hidden bool
}

// Registry maps tool names to their entries, in the order they were added,
// and runs calls through the middleware.
type Registry struct {
	mw []Middleware

	runMu   sync.Mutex
	running int           // calls in Dispatch now
	idle    chan struct{} // closed when running drops to 0; nil while it is 0

	mu      sync.RWMutex
	entries map[string]*Entry
	order   []string
	chained map[string]Handler
}

// NewRegistry returns an empty registry whose calls run through mw (the
// first outermost).
func NewRegistry(mw ...Middleware) *Registry {
	return &Registry{mw: mw, entries: map[string]*Entry{}, chained: map[string]Handler{}}
}

// Add registers e under its tool's name, replacing an entry of that name.
func (r *Registry) Add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := e.Tool.Name
	if _, ok := r.entries[name]; !ok {
		r.order = append(r.order, name)
	}
	r.entries[name] = &e
	r.chained[name] = Chain(e.Handler, r.mw...)
}

// Remove forgets the tools named.
func (r *Registry) Remove(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if _, ok := r.entries[n]; !ok {
			continue
		}
		delete(r.entries, n)
		delete(r.chained, n)
		r.order = slices.DeleteFunc(r.order, func(s string) bool { return s == n })
	}
}

// Lookup returns the entry of name.
func (r *Registry) Lookup(name string) (Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[name]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Entries lists the registered tools in the order they were added.
func (r *Registry) Entries() []Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Entry, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, *r.entries[n])
	}
	return out
}

// Dispatch runs c through the middleware to its tool's handler. An unknown
// tool is an error result.
func (r *Registry) Dispatch(ctx context.Context, c *Call) *Result {
	r.enter()
	defer r.leave()
	r.mu.RLock()
	h, ok := r.chained[c.Tool]
	r.mu.RUnlock()
	if !ok {
		return ErrorText(fmt.Sprintf("unknown tool %q: list the tools again (tools/list)", c.Tool))
	}
	if c.Args == nil {
		c.Args = map[string]any{}
	}
	if c.Progress == nil {
		c.Progress = NoProgress
	}
	return h(ctx, c)
}

// Known reports whether name is registered.
func (r *Registry) Known(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.entries[name]
	return ok
}

func (r *Registry) enter() {
	r.runMu.Lock()
	r.running++
	r.runMu.Unlock()
}

func (r *Registry) leave() {
	r.runMu.Lock()
	r.running--
	if r.running == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	r.runMu.Unlock()
}

// Running is how many calls are in Dispatch now.
func (r *Registry) Running() int {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	return r.running
}

// Drain waits until no call is running, or ctx ends: a stopping gateway
// stops taking calls, drains, and only then flushes its audit records, so
// that the calls it finished are all recorded.
func (r *Registry) Drain(ctx context.Context) error {
	r.runMu.Lock()
	if r.running == 0 {
		r.runMu.Unlock()
		return nil
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	n := r.running
	r.runMu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d tool calls still running when the gateway stopped: %w", n, ctx.Err())
	}
}
