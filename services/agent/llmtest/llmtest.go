// Package llmtest is a scripted OpenAI-compatible chat-completions server
// for tests: it speaks the real protocol over HTTP (httptest), streaming
// (server-sent events) and not, and answers each request with the next
// step of a script — a reply, tool calls, an HTTP error, a block until the
// test releases it — or with a step computed from the conversation.
//
// It serves POST <URL>/chat/completions, where URL ends in /v1 (the path
// without /v1 works too), records every request (model, messages, tools,
// stream flag, Authorization header) and never calls out.
//
//	llm := llmtest.New(t,
//		llmtest.Call(llmtest.ToolCall{Name: "echo", Arguments: `{"text":"hi"}`}),
//		llmtest.Reply("done"),
//	)
//	// point the client at llm.URL; afterwards inspect llm.Requests()
//
// When the script runs out, the server answers with its default step (see
// [Server.SetDefault]); without one it answers 500 with a body that says
// the script ran out, so a test that makes more model calls than it
// planned fails clearly.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Step is how the server answers one request. Exactly one of its forms is
// used, checked in this order: Func, Block (then the rest of the step),
// Status, and otherwise a reply of Text and ToolCalls.
type Step struct {
	// Func computes the step from the request (e.g. from the last tool
	// result); the step it returns must not itself have a Func.
	Func func(Request) Step
	// Block waits until the gate is released or the client gives up (the
	// request is then recorded as Cancelled and nothing is answered);
	// after a release the rest of the step answers.
	Block *Gate
	// Status, when not 0, answers with this HTTP status and Body (an
	// OpenAI error object when Body is empty), and Retry-After when set.
	Status     int
	Body       string
	RetryAfter string
	// Text is the assistant's content; ToolCalls its tool calls (IDs are
	// assigned when empty: call_<request>_<index>).
	Text      string
	ToolCalls []ToolCall
}

// ToolCall is one tool call of the assistant.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is sent verbatim: a JSON object, or anything else to test
	// how the client copes with malformed calls.
	Arguments string
}

// Reply is a step that answers text without tool calls.
func Reply(text string) Step { return Step{Text: text} }

// Call is a step that answers with tool calls (and no text).
func Call(calls ...ToolCall) Step { return Step{ToolCalls: calls} }

// Fail is a step that answers HTTP status with an OpenAI error object
// carrying message.
func Fail(status int, message string) Step {
	return Step{Status: status, Body: errorBody(status, message)}
}

// FailRetryAfter is Fail with a Retry-After header (seconds, e.g. "0" or
// "0.05").
func FailRetryAfter(status int, message, retryAfter string) Step {
	s := Fail(status, message)
	s.RetryAfter = retryAfter
	return s
}

// Func is a step computed from the request.
func Func(fn func(Request) Step) Step { return Step{Func: fn} }

// Repeat returns n copies of step, for a script that answers several
// attempts (retries) the same way.
func Repeat(n int, step Step) []Step {
	out := make([]Step, n)
	for i := range out {
		out[i] = step
	}
	return out
}

// Gate blocks the requests of the steps that name it until Release.
type Gate struct {
	release  chan struct{}
	entered  chan struct{}
	relOnce  sync.Once
	entOnce  sync.Once
	canceled chan struct{}
	canOnce  sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate {
	return &Gate{release: make(chan struct{}), entered: make(chan struct{}), canceled: make(chan struct{})}
}

// Release lets every request waiting at the gate (and every later one)
// through. It may be called more than once.
func (g *Gate) Release() { g.relOnce.Do(func() { close(g.release) }) }

// Entered is closed once a request reaches the gate.
func (g *Gate) Entered() <-chan struct{} { return g.entered }

// Cancelled is closed once a request waiting at the gate was given up by
// its client (the connection closed or the request's context ended).
func (g *Gate) Cancelled() <-chan struct{} { return g.canceled }

// Request is a chat-completions request as the server received it.
type Request struct {
	// N is the request's number, from 1.
	N             int
	Path          string
	Authorization string
	Model         string
	Stream        bool
	// Temperature is nil when the request had none.
	Temperature *float64
	Messages    []Message
	Tools       []Tool
	// Raw is the request body.
	Raw []byte
	// Cancelled is set when the client gave up while the request was
	// blocked at a gate.
	Cancelled bool
}

// LastMessage returns the request's last message (zero when it has none).
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolResults returns the tool messages at the end of the conversation (the
// results of the assistant's last tool calls), in order.
func (r Request) ToolResults() []Message {
	i := len(r.Messages)
	for i > 0 && r.Messages[i-1].Role == "tool" {
		i--
	}
	return r.Messages[i:]
}

// Message is one message of a request, flattened: Content is the text (the
// text parts joined when the content was an array).
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// Tool is one function tool of a request.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema as sent.
	Parameters map[string]any
}

// Server is a scripted chat-completions server.
type Server struct {
	// URL is the OpenAI-style base URL, ending in /v1.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	steps    []Step
	def      *Step
	requests []Request
}

// New starts a server answering with steps, closed when the test ends.
func New(tb testing.TB, steps ...Step) *Server {
	tb.Helper()
	s := &Server{steps: append([]Step(nil), steps...)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	tb.Cleanup(s.srv.Close)
	return s
}

// Script appends steps to the script.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// SetDefault sets the step that answers once the script has run out (e.g.
// always a tool call, or always 429).
func (s *Server) SetDefault(step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = &step
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Pending returns how many scripted steps are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Close stops the server (also done when the test ends).
func (s *Server) Close() { s.srv.Close() }

// wire types of the request.
type wireRequest struct {
	Model       string        `json:"model"`
	Stream      bool          `json:"stream"`
	Temperature *float64      `json:"temperature"`
	Messages    []wireMessage `json:"messages"`
	Tools       []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// text flattens a message content: a string, or an array of parts whose
// text parts are joined.
func text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions") {
		http.Error(w, `{"error":{"message":"llmtest serves POST /v1/chat/completions only","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, errorBody(http.StatusBadRequest, "llmtest: request body is not JSON: "+err.Error()))
		return
	}
	req := Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Model: wr.Model, Stream: wr.Stream,
		Temperature: wr.Temperature, Raw: body}
	for _, m := range wr.Messages {
		msg := Message{Role: m.Role, Content: text(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}

	s.mu.Lock()
	req.N = len(s.requests) + 1
	s.requests = append(s.requests, req)
	var step Step
	switch {
	case len(s.steps) > 0:
		step, s.steps = s.steps[0], s.steps[1:]
	case s.def != nil:
		step = *s.def
	default:
		step = Fail(http.StatusInternalServerError, fmt.Sprintf("llmtest: no scripted step left for request %d", req.N))
	}
	s.mu.Unlock()

	if step.Func != nil {
		step = step.Func(req)
	}
	if g := step.Block; g != nil {
		g.entOnce.Do(func() { close(g.entered) })
		select {
		case <-g.release:
		case <-r.Context().Done():
			s.mu.Lock()
			s.requests[req.N-1].Cancelled = true
			s.mu.Unlock()
			g.canOnce.Do(func() { close(g.canceled) })
			return
		}
	}
	if step.Status != 0 {
		b := step.Body
		if b == "" {
			b = errorBody(step.Status, http.StatusText(step.Status))
		}
		if step.RetryAfter != "" {
			w.Header().Set("Retry-After", step.RetryAfter)
		}
		if strings.HasPrefix(strings.TrimSpace(b), "{") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(step.Status)
		_, _ = io.WriteString(w, b)
		return
	}
	calls := make([]wireToolCall, len(step.ToolCalls))
	for i, tc := range step.ToolCalls {
		calls[i].ID = tc.ID
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%d_%d", req.N, i)
		}
		calls[i].Type = "function"
		calls[i].Function.Name = tc.Name
		calls[i].Function.Arguments = tc.Arguments
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	model := wr.Model
	if model == "" {
		model = "llmtest"
	}
	id := "chatcmpl-llmtest-" + strconv.Itoa(req.N)
	created := time.Now().Unix()
	if !wr.Stream {
		msg := map[string]any{"role": "assistant", "content": step.Text}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
			if step.Text == "" {
				msg["content"] = nil
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": len(step.Text) / 4, "total_tokens": (len(body) + len(step.Text)) / 4},
		})
		return
	}
	streamReply(w, id, model, created, step.Text, calls, finish)
}

// streamReply writes the reply as server-sent events the way OpenAI does:
// a role chunk, content deltas, each tool call as a first chunk (id, name)
// and argument pieces, a finish chunk and [DONE].
func streamReply(w http.ResponseWriter, id, model string, created int64, content string, calls []wireToolCall, finish string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(delta map[string]any, finishReason any) {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}},
		})
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range pieces(content, 7) {
		send(map[string]any{"content": piece}, nil)
	}
	for i, tc := range calls {
		idx := i
		first := wireToolCall{Index: &idx, ID: tc.ID, Type: "function"}
		first.Function.Name = tc.Function.Name
		send(map[string]any{"tool_calls": []wireToolCall{first}}, nil)
		for _, piece := range pieces(tc.Function.Arguments, 5) {
			d := wireToolCall{Index: &idx}
			d.Function.Arguments = piece
			send(map[string]any{"tool_calls": []wireToolCall{d}}, nil)
		}
	}
	send(map[string]any{}, finish)
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// pieces splits s into pieces of n runes (none for "").
func pieces(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// errorBody is an OpenAI error object.
func errorBody(status int, message string) string {
	typ := "server_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status == http.StatusUnauthorized:
		typ = "invalid_api_key"
	case status < 500:
		typ = "invalid_request_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": nil}})
	return string(b)
}
