package console

// The chat pages: the agent's conversations, their runs live, and the
// model provider's settings. The conversation renders on the server (one
// escaping path for everything a model or a web page wrote); the page's
// script (static/chat.js) sends messages and follows a run through the
// JSON API in chatapi.go, polling the run every 500 ms and fetching the
// conversation's HTML again whenever the run changed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

const (
	// MaxMessageChars is the longest user message (in characters) the
	// console sends to the agent; a longer one is refused with 400.
	MaxMessageChars = 32000
	// MaxIDLen is the longest chat or run id the console accepts.
	MaxIDLen = 128
	// resultShown is how many characters of a tool result the
	// conversation shows; the rest is cut with a note saying so.
	resultShown = 20000
	// previewChars bounds the one-line preview of a tool call's arguments.
	previewChars = 90
	// chatPageSize is how many chats the list shows per page.
	chatPageSize = 50
	// messageBodyLimit bounds the body of a request that carries a message
	// (room for MaxMessageChars characters of any kind, form-encoded).
	messageBodyLimit = 512 << 10
)

// consoleCaller is who runs started from the console act as.
func consoleCaller() *toolsv1.Caller {
	return &toolsv1.Caller{Kind: "console", Id: "console", Name: "console"}
}

// errNoAgent is the answer of every chat route when Sources.Agent is nil.
var errNoAgent = errors.New("the agent is not configured on this gateway")

// agentStatus is the HTTP status of an Agent source's failure.
func agentStatus(err error) int {
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_INVALID_ARGUMENT:
		return http.StatusBadRequest
	case commonv1.ErrorCode_NOT_FOUND, commonv1.ErrorCode_SESSION_NOT_FOUND:
		return http.StatusNotFound
	case commonv1.ErrorCode_FORBIDDEN:
		return http.StatusForbidden
	case commonv1.ErrorCode_TOO_LARGE:
		return http.StatusRequestEntityTooLarge
	case commonv1.ErrorCode_UNAVAILABLE:
		return http.StatusServiceUnavailable
	case commonv1.ErrorCode_TIMEOUT:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// validID reports whether s can be a chat or run id: 1 to MaxIDLen
// letters, digits and . _ : -.
func validID(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}

func badID(what, id string) error {
	return fmt.Errorf("%s id %q is not valid: ids are 1 to %d letters, digits and . _ : -", what, clipRunes(id, 40), MaxIDLen)
}

// checkMessage trims a user message and checks it is one the agent can
// take.
func checkMessage(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("the message is not valid UTF-8")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("the message is empty: write what the agent should do")
	}
	if n := utf8.RuneCountInString(s); n > MaxMessageChars {
		return "", fmt.Errorf("the message has %d characters; the agent takes at most %d", n, MaxMessageChars)
	}
	return s, nil
}

func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func (c *Console) agentCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), sourceTimeout)
}

// --- runs ---

// runStatus is a run as the chat pages and /api/agent/runs show it.
// Label, Detail and Notice are for display: the page's script shows them
// as they are.
type runStatus struct {
	ID     string `json:"id"`
	ChatID string `json:"chat_id"`
	// State is idle, thinking, tool_call, complete, error or cancelled.
	State string `json:"state"`
	// Active is true until the run ended (complete, error, cancelled).
	Active          bool      `json:"active"`
	Iteration       int32     `json:"iteration"`
	MaxIterations   int32     `json:"max_iterations"`
	CurrentTool     string    `json:"current_tool,omitempty"`
	ToolCalls       int32     `json:"tool_calls"`
	CancelRequested bool      `json:"cancel_requested"`
	LastMessage     string    `json:"last_message,omitempty"`
	FinalAnswer     string    `json:"final_answer,omitempty"`
	Error           string    `json:"error,omitempty"`
	Task            string    `json:"task,omitempty"`
	Caller          string    `json:"caller,omitempty"`
	Replica         string    `json:"replica,omitempty"`
	Created         time.Time `json:"created,omitzero"`
	Updated         time.Time `json:"updated,omitzero"`
	Label           string    `json:"label"`
	Detail          string    `json:"detail"`
	Notice          string    `json:"notice,omitempty"`
}

// stateName is a run state's short name ("thinking", "tool_call", …).
func stateName(s agentv1.RunState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "RUN_STATE_"))
}

var stateLabels = map[string]string{
	"idle": "Starting", "thinking": "Thinking", "tool_call": "Running a tool",
	"complete": "Done", "error": "Failed", "cancelled": "Stopped",
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(int(n)) + " " + many
}

func newRunStatus(r *agentv1.Run) *runStatus {
	if r == nil {
		return nil
	}
	s := &runStatus{
		ID: r.GetId(), ChatID: r.GetChatId(), State: stateName(r.GetState()),
		Iteration: r.GetIteration(), MaxIterations: r.GetMaxIterations(), CurrentTool: r.GetCurrentTool(),
		ToolCalls: r.GetToolCalls(), CancelRequested: r.GetCancelRequested(), LastMessage: r.GetLastMessage(),
		FinalAnswer: r.GetFinalAnswer(), Error: r.GetError(), Task: r.GetTask(), Caller: r.GetCallerName(),
		Replica: r.GetReplica(),
	}
	if ms := r.GetCreatedUnixMilli(); ms > 0 {
		s.Created = time.UnixMilli(ms).UTC()
	}
	if ms := r.GetUpdatedUnixMilli(); ms > 0 {
		s.Updated = time.UnixMilli(ms).UTC()
	}
	switch r.GetState() {
	case agentv1.RunState_RUN_STATE_COMPLETE, agentv1.RunState_RUN_STATE_ERROR, agentv1.RunState_RUN_STATE_CANCELLED:
	default:
		s.Active = true
	}
	s.Label = stateLabels[s.State]
	if s.Label == "" {
		s.Label = s.State
	}
	it := fmt.Sprintf("iteration %d / %d", s.Iteration, s.MaxIterations)
	if s.MaxIterations <= 0 {
		it = fmt.Sprintf("iteration %d", s.Iteration)
	}
	calls := plural(s.ToolCalls, "tool call", "tool calls")
	switch s.State {
	case "idle":
		s.Detail = "waiting for an agent to take the run"
	case "thinking":
		s.Detail = it + " · waiting for the model · " + calls
	case "tool_call":
		s.Detail = it + " · " + s.CurrentTool + " · " + calls
	case "complete":
		s.Detail = "finished after " + plural(s.Iteration, "iteration", "iterations") + " and " + calls
	case "error":
		s.Detail = "at " + it + " · " + calls
		s.Notice = "The run failed: " + s.Error
	case "cancelled":
		s.Detail = "at " + it + " · " + calls
		s.Notice = "The run was stopped"
		if s.Error != "" {
			s.Notice += ": " + s.Error
		}
	default:
		s.Detail = it
	}
	if s.Active && s.CancelRequested {
		s.Detail += " · stopping before the next step…"
	}
	return s
}

// --- the conversation ---

// chatItem is one block of the conversation.
type chatItem struct {
	// Role is user, assistant, system or tool (a result whose call is not
	// in the conversation).
	Role  string
	Text  string
	Calls []toolCallView
	Time  time.Time
}

// toolCallView is one tool call: a line with its name and an arguments
// preview, expandable to the arguments and the result.
type toolCallView struct {
	ID, Name string
	// Preview is the arguments on one line: key=value, clipped.
	Preview string
	// Args is the arguments JSON, indented.
	Args       string
	Done       bool // a result arrived
	Result     string
	ResultNote string // says when the result is cut
}

// messagesView is the conversation part of a chat page.
type messagesView struct {
	Title string
	Items []chatItem
	// Active: the chat's run still works (calls without a result are
	// running, not lost).
	Active bool
	// Final is the answer of the chat's finished run when the
	// conversation does not show it (yet).
	Final string
}

// toolCallJSON reads the OpenAI shape of a tool call (and a flat
// {id, name, arguments} one).
type toolCallJSON struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// parseToolCalls reads an assistant message's tool calls.
func parseToolCalls(js string) []toolCallView {
	if strings.TrimSpace(js) == "" {
		return nil
	}
	var raw []toolCallJSON
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		return []toolCallView{{Name: "(unreadable tool calls)", Args: js, Preview: clipRunes(js, previewChars)}}
	}
	out := make([]toolCallView, 0, len(raw))
	for _, tc := range raw {
		name, args := tc.Function.Name, tc.Function.Arguments
		if name == "" {
			name, args = tc.Name, tc.Arguments
		}
		text := string(args)
		var s string
		if json.Unmarshal(args, &s) == nil { // the OpenAI shape: arguments as a JSON string
			text = s
		}
		if name == "" {
			name = "(unnamed)"
		}
		out = append(out, toolCallView{ID: tc.ID, Name: name, Args: prettyJSON(text), Preview: argsPreview(text)})
	}
	return out
}

// argsPreview renders a tool call's arguments on one line, in their
// order: url="https://…", ref=e12, full=true. Long values and the whole
// line are clipped.
func argsPreview(args string) string {
	args = strings.TrimSpace(args)
	if args == "" || args == "{}" || args == "null" {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(args))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return clipRunes(unescapeHTML(args), previewChars)
	}
	var parts []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		key, _ := k.(string)
		parts = append(parts, key+"="+valuePreview(v))
	}
	return clipRunes(strings.Join(parts, ", "), previewChars)
}

func valuePreview(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return strconv.Quote(clipRunes(s, 48))
	}
	switch strings.TrimSpace(string(v))[0] {
	case '{':
		return "{…}"
	case '[':
		return "[…]"
	}
	return string(v)
}

// clipResult cuts a tool result to resultShown characters.
func clipResult(s string) (string, string) {
	n := utf8.RuneCountInString(s)
	if n <= resultShown {
		return s, ""
	}
	return string([]rune(s)[:resultShown]),
		fmt.Sprintf("(showing the first %d of %d characters)", resultShown, n)
}

// buildMessages turns a chat's messages into the conversation's blocks:
// each tool result goes under the call it answers.
func buildMessages(msgs []*historyv1.ChatMessage) []chatItem {
	var items []chatItem
	where := map[string][2]int{} // tool call id → item, call
	for _, m := range msgs {
		at := time.UnixMilli(m.GetCreatedUnixMilli())
		switch m.GetRole() {
		case "assistant":
			it := chatItem{Role: "assistant", Text: strings.TrimSpace(m.GetContent()), Calls: parseToolCalls(m.GetToolCallsJson()), Time: at}
			if it.Text == "" && len(it.Calls) == 0 {
				continue
			}
			for j, tc := range it.Calls {
				if tc.ID != "" {
					where[tc.ID] = [2]int{len(items), j}
				}
			}
			items = append(items, it)
		case "tool":
			res, note := clipResult(m.GetContent())
			if pos, ok := where[m.GetToolCallId()]; ok && m.GetToolCallId() != "" {
				tc := &items[pos[0]].Calls[pos[1]]
				tc.Done, tc.Result, tc.ResultNote = true, res, note
				continue
			}
			items = append(items, chatItem{Role: "tool", Time: at, Calls: []toolCallView{{
				ID: m.GetToolCallId(), Name: "(result)", Done: true, Result: res, ResultNote: note}}})
		default: // user, system
			items = append(items, chatItem{Role: m.GetRole(), Text: m.GetContent(), Time: at})
		}
	}
	return items
}

// conversation builds the messages part from a chat and its newest run.
func conversation(chat *historyv1.GetChatSessionResponse, run *runStatus) messagesView {
	v := messagesView{Title: chat.GetSession().GetTitle(), Items: buildMessages(chat.GetMessages())}
	if run == nil {
		return v
	}
	v.Active = run.Active
	if run.State == "complete" && strings.TrimSpace(run.FinalAnswer) != "" {
		last := ""
		for i := len(v.Items) - 1; i >= 0; i-- {
			if v.Items[i].Role == "assistant" && v.Items[i].Text != "" {
				last = v.Items[i].Text
				break
			}
		}
		if last != strings.TrimSpace(run.FinalAnswer) {
			v.Final = run.FinalAnswer
		}
	}
	return v
}

// --- pages ---

type chatRow struct {
	ID, Title        string
	Created, Updated time.Time
	Running          bool
}

type chatsView struct {
	Configured bool
	Chats      []chatRow
	Older      string // URL of the next page
	First      bool
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (c *Console) chatsPage(w http.ResponseWriter, r *http.Request) {
	cursor := r.URL.Query().Get("cursor")
	v := chatsView{Configured: c.src.Agent != nil, First: cursor == ""}
	p := page{Title: "Chat", Data: &v}
	switch r.URL.Query().Get("done") {
	case "deleted":
		p.Notice = "Chat deleted."
	case "gone":
		p.Error = "That chat was already deleted."
	}
	if c.src.Agent != nil {
		ctx, cancel := c.agentCtx(r)
		defer cancel()
		res, err := c.src.Agent.ListChats(ctx, &historyv1.ListChatSessionsRequest{Limit: chatPageSize, Cursor: cursor})
		if err != nil {
			p.Error = errText("list the chats", err)
		}
		running := map[string]bool{}
		if runs, err := c.src.Agent.ListRuns(ctx, &agentv1.ListRunsRequest{ActiveOnly: true, Limit: 500}); err == nil {
			for _, run := range runs {
				running[run.GetChatId()] = true
			}
		}
		for _, s := range res.GetSessions() {
			v.Chats = append(v.Chats, chatRow{ID: s.GetId(), Title: s.GetTitle(), Created: msTime(s.GetCreatedUnixMilli()),
				Updated: msTime(s.GetUpdatedUnixMilli()), Running: running[s.GetId()]})
		}
		if next := res.GetNextCursor(); next != "" {
			v.Older = "/chat?" + url.Values{"cursor": {next}}.Encode()
		}
	}
	c.render(w, r, http.StatusOK, "chats", p)
}

// chatView is a conversation page's data.
type chatView struct {
	Configured bool
	ID         string // "" for a new chat
	Title      string
	Messages   messagesView
	// Run is the chat's newest run (the one of ?run= when given), nil when
	// it has none.
	Run *runStatus
	// Provider warns that no model provider is set.
	Provider string
	Draft    string // the message of a failed send, to try again
	MaxChars int
	// Missing: the chat could not be read (the page's error says why).
	Missing bool
}

// loadChat gathers a conversation page: the chat (unless new), its run and
// the provider warning. status is the page's HTTP status.
func (c *Console) loadChat(r *http.Request, id, runID string) (v chatView, status int, err error) {
	v = chatView{Configured: true, ID: id, MaxChars: MaxMessageChars}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	switch {
	case runID != "" && validID(runID):
		run, err := c.src.Agent.GetRun(ctx, runID)
		if err == nil && (id == "" || run.GetChatId() == id) {
			v.Run = newRunStatus(run)
		}
	case id != "":
		runs, err := c.src.Agent.ListRuns(ctx, &agentv1.ListRunsRequest{ChatId: id, Limit: 1})
		if err == nil && len(runs) > 0 {
			v.Run = newRunStatus(runs[0])
		}
	}
	if id != "" {
		chat, err := c.src.Agent.GetChat(ctx, id)
		if err != nil {
			return v, agentStatus(err), fmt.Errorf("%s", errText("read the chat", err))
		}
		v.Title = chat.GetSession().GetTitle()
		v.Messages = conversation(chat, v.Run)
	}
	return v, http.StatusOK, nil
}

// providerWarning is "" when the provider's base URL and model are set.
func (c *Console) providerWarning(r *http.Request) (string, error) {
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	s, err := c.src.Agent.Settings(ctx)
	if err != nil {
		return "", err
	}
	if s.GetBaseUrl() == "" || s.GetModel() == "" {
		return "No model provider is set: the agent needs a base URL and a model.", nil
	}
	return "", nil
}

func (c *Console) chatPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	title := "New chat"
	if c.src.Agent == nil {
		c.render(w, r, http.StatusOK, "chat", page{Title: title, Data: chatView{ID: id}})
		return
	}
	if id != "" && !validID(id) {
		c.render(w, r, http.StatusNotFound, "chat", page{Title: "Chat", Error: badID("chat", id).Error(),
			Data: chatView{Configured: true, Missing: true}})
		return
	}
	v, status, err := c.loadChat(r, id, r.URL.Query().Get("run"))
	if r.URL.Query().Get("part") == "messages" {
		// The conversation alone, fetched by the page's script.
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		c.exec(w, http.StatusOK, "chat_messages", "chat_messages", v.Messages)
		return
	}
	p := page{Title: title, Data: &v}
	if err != nil {
		p.Data, p.Error, p.Title = chatView{Configured: true, Missing: true}, err.Error(), "Chat"
		c.render(w, r, status, "chat", p)
		return
	}
	if id != "" {
		p.Title = v.Title
		if p.Title == "" {
			p.Title = "Chat"
		}
	}
	if v.Provider, err = c.providerWarning(r); err != nil {
		p.Error = errText("the agent is not reachable", err)
	}
	c.render(w, r, http.StatusOK, "chat", p)
}

// startRun starts a run on a chat ("" for a new one) for this request's
// operator.
func (c *Console) startRun(r *http.Request, chatID, message string, maxIter int32) (*agentv1.Run, int, error) {
	if c.src.Agent == nil {
		return nil, http.StatusNotFound, errNoAgent
	}
	if chatID != "" && !validID(chatID) {
		return nil, http.StatusBadRequest, badID("chat", chatID)
	}
	msg, err := checkMessage(message)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if maxIter < 0 || maxIter > 1000 {
		return nil, http.StatusBadRequest, fmt.Errorf("max_iterations is %d; it must be 0 (the configured cap) to 1000", maxIter)
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	run, err := c.src.Agent.StartRun(ctx, &agentv1.StartRunRequest{ChatId: chatID, Message: msg, Caller: consoleCaller(), MaxIterations: maxIter})
	if err != nil {
		return nil, agentStatus(err), errors.New(errText("start the run", err))
	}
	c.log.Info("agent run started from the console", "run", run.GetId(), "chat", run.GetChatId(), "by", by(r))
	return run, 0, nil
}

func (c *Console) sendForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "new" {
		id = ""
	}
	r.Body = http.MaxBytesReader(w, r.Body, messageBodyLimit)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	msg := r.PostForm.Get("message")
	run, status, err := c.startRun(r, id, msg, 0)
	if err != nil {
		v := chatView{Configured: c.src.Agent != nil, ID: id, MaxChars: MaxMessageChars}
		if c.src.Agent != nil && validID(id) {
			v, _, _ = c.loadChat(r, id, "")
		}
		v.Draft = msg
		c.render(w, r, status, "chat", page{Title: "Chat", Data: &v, Error: err.Error()})
		return
	}
	to := "/chat/new?run=" + url.QueryEscape(run.GetId())
	if run.GetChatId() != "" {
		to = "/chat/" + url.PathEscape(run.GetChatId()) + "?run=" + url.QueryEscape(run.GetId())
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// cancelRun asks a run to stop for this request's operator.
func (c *Console) cancelRun(r *http.Request, id string) (*agentv1.Run, int, error) {
	if c.src.Agent == nil {
		return nil, http.StatusNotFound, errNoAgent
	}
	if !validID(id) {
		return nil, http.StatusBadRequest, badID("run", id)
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	run, err := c.src.Agent.CancelRun(ctx, id, by(r))
	if err != nil {
		return nil, agentStatus(err), errors.New(errText("stop the run", err))
	}
	c.log.Info("agent run stopped from the console", "run", id, "by", by(r))
	return run, 0, nil
}

func (c *Console) stopForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.PathValue("id")
	if _, status, err := c.cancelRun(r, r.PostForm.Get("run")); err != nil {
		v := chatView{Configured: c.src.Agent != nil, MaxChars: MaxMessageChars}
		if c.src.Agent != nil && validID(id) {
			v, _, _ = c.loadChat(r, id, "")
		}
		c.render(w, r, status, "chat", page{Title: "Chat", Data: &v, Error: err.Error()})
		return
	}
	http.Redirect(w, r, "/chat/"+url.PathEscape(id), http.StatusSeeOther)
}

// deleteChat deletes a chat; status is the HTTP status of its failure.
func (c *Console) deleteChat(r *http.Request, id string) (int, error) {
	if c.src.Agent == nil {
		return http.StatusNotFound, errNoAgent
	}
	if !validID(id) {
		return http.StatusBadRequest, badID("chat", id)
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	if err := c.src.Agent.DeleteChat(ctx, id); err != nil {
		return agentStatus(err), errors.New(errText("delete the chat", err))
	}
	c.log.Info("chat deleted in the console", "chat", id, "by", by(r))
	return 0, nil
}

func (c *Console) deleteChatForm(w http.ResponseWriter, r *http.Request) {
	status, err := c.deleteChat(r, r.PathValue("id"))
	switch {
	case status == http.StatusNotFound && c.src.Agent != nil:
		http.Redirect(w, r, "/chat?done=gone", http.StatusSeeOther)
	case err != nil:
		c.render(w, r, status, "chats", page{Title: "Chat", Data: &chatsView{Configured: c.src.Agent != nil, First: true},
			Error: err.Error()})
	default:
		http.Redirect(w, r, "/chat?done=deleted", http.StatusSeeOther)
	}
}

// --- settings ---

// settingsView is the settings page's data: the form's values as text.
type settingsView struct {
	Configured, Loaded bool
	BaseURL, Model     string
	SystemPrompt       string
	MaxIterations      string
	Temperature        string
	KeySet             bool
	KeyHint            string
	Source             string
	Updated            time.Time
	// Invalid is why the agent (or the console) refused the form.
	Invalid string
}

func newSettingsView(s *agentv1.Settings) settingsView {
	v := settingsView{Configured: true, Loaded: true, BaseURL: s.GetBaseUrl(), Model: s.GetModel(),
		SystemPrompt: s.GetSystemPrompt(), KeySet: s.GetApiKeySet(), KeyHint: s.GetApiKeyHint(),
		Source: s.GetSource(), Updated: msTime(s.GetUpdatedUnixMilli())}
	if n := s.GetMaxIterations(); n != 0 {
		v.MaxIterations = strconv.Itoa(int(n))
	}
	if s.GetHasTemperature() {
		v.Temperature = strconv.FormatFloat(s.GetTemperature(), 'g', -1, 64)
	}
	if v.Source == "" {
		v.Source = "environment"
	}
	return v
}

// settingsInput is a settings change: the PUT body of /api/agent/settings
// and what the settings form reads into. It replaces every field; an empty
// APIKey keeps the stored key (unless ClearAPIKey).
type settingsInput struct {
	BaseURL      string `json:"base_url"`
	Model        string `json:"model"`
	SystemPrompt string `json:"system_prompt"`
	// MaxIterations 0 means the agent's default.
	MaxIterations int32 `json:"max_iterations"`
	// Temperature nil means the provider's default.
	Temperature *float64 `json:"temperature"`
	APIKey      string   `json:"api_key"`
	ClearAPIKey bool     `json:"clear_api_key"`
}

// request checks the input's form and makes the agent's request (the
// agent checks the values).
func (in settingsInput) request() (*agentv1.PutSettingsRequest, error) {
	if in.APIKey != "" && in.ClearAPIKey {
		return nil, errors.New("API key: enter a new key or clear the stored one, not both")
	}
	if strings.TrimSpace(in.APIKey) != in.APIKey {
		return nil, errors.New("API key: it starts or ends with white space; remove it")
	}
	if in.Temperature != nil && (math.IsNaN(*in.Temperature) || math.IsInf(*in.Temperature, 0)) {
		return nil, errors.New("temperature: not a number")
	}
	s := &agentv1.Settings{BaseUrl: strings.TrimSpace(in.BaseURL), Model: strings.TrimSpace(in.Model),
		SystemPrompt: in.SystemPrompt, MaxIterations: in.MaxIterations, ApiKey: in.APIKey}
	if in.Temperature != nil {
		s.Temperature, s.HasTemperature = *in.Temperature, true
	}
	return &agentv1.PutSettingsRequest{Settings: s, ClearApiKey: in.ClearAPIKey}, nil
}

// readSettingsForm reads the settings form; the view keeps what was typed
// (never the key) to show again with an error.
func readSettingsForm(f url.Values) (settingsInput, settingsView, error) {
	v := settingsView{Configured: true, Loaded: true, BaseURL: f.Get("base_url"), Model: f.Get("model"),
		SystemPrompt: f.Get("system_prompt"), MaxIterations: strings.TrimSpace(f.Get("max_iterations")),
		Temperature: strings.TrimSpace(f.Get("temperature"))}
	in := settingsInput{BaseURL: v.BaseURL, Model: v.Model, SystemPrompt: v.SystemPrompt, APIKey: f.Get("api_key"),
		ClearAPIKey: f.Get("clear_api_key") != ""}
	if v.MaxIterations != "" {
		n, err := strconv.ParseInt(v.MaxIterations, 10, 32)
		if err != nil {
			return in, v, fmt.Errorf("max iterations: %q is not a whole number", clipRunes(v.MaxIterations, 20))
		}
		in.MaxIterations = int32(n)
	}
	if v.Temperature != "" {
		t, err := strconv.ParseFloat(v.Temperature, 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) {
			return in, v, fmt.Errorf("temperature: %q is not a number (like 0.2), or leave it empty for the provider's default", clipRunes(v.Temperature, 20))
		}
		in.Temperature = &t
	}
	return in, v, nil
}

// putSettings saves a settings change; status is the HTTP status of its
// failure.
func (c *Console) putSettings(r *http.Request, in settingsInput) (*agentv1.Settings, int, error) {
	if c.src.Agent == nil {
		return nil, http.StatusNotFound, errNoAgent
	}
	req, err := in.request()
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	s, err := c.src.Agent.PutSettings(ctx, req)
	if err != nil {
		status := agentStatus(err)
		if status == http.StatusBadRequest {
			var be *bus.Error
			if errors.As(err, &be) {
				return nil, status, errors.New(be.Message)
			}
		}
		return nil, status, errors.New(errText("save the settings", err))
	}
	// Never the key, whatever the source answers.
	s.ApiKey = ""
	c.log.Info("agent settings changed in the console", "base_url", logURL(s.GetBaseUrl()), "model", s.GetModel(),
		"key_changed", in.APIKey != "" || in.ClearAPIKey, "by", by(r))
	return s, 0, nil
}

// logURL is a base URL fit for the log: scheme, host and path, without
// user info or query (where some providers put a key).
func logURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func (c *Console) settingsPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Agent settings"}
	if c.src.Agent == nil {
		p.Data = settingsView{}
		c.render(w, r, http.StatusOK, "chat_settings", p)
		return
	}
	if r.URL.Query().Get("done") == "saved" {
		p.Notice = "Settings saved. New runs use them."
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	s, err := c.src.Agent.Settings(ctx)
	if err != nil {
		p.Data = settingsView{Configured: true}
		p.Error = errText("read the settings", err)
		c.render(w, r, http.StatusOK, "chat_settings", p)
		return
	}
	p.Data = newSettingsView(s)
	c.render(w, r, http.StatusOK, "chat_settings", p)
}

func (c *Console) settingsForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, messageBodyLimit)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	in, v, err := readSettingsForm(r.PostForm)
	status := http.StatusBadRequest
	if err == nil {
		_, status, err = c.putSettings(r, in)
	}
	if err == nil {
		http.Redirect(w, r, "/chat/settings?done=saved", http.StatusSeeOther)
		return
	}
	v.Configured = c.src.Agent != nil
	if c.src.Agent != nil {
		// The key's state and the source as stored, beside what was typed.
		ctx, cancel := c.agentCtx(r)
		if s, gerr := c.src.Agent.Settings(ctx); gerr == nil {
			cur := newSettingsView(s)
			v.KeySet, v.KeyHint, v.Source, v.Updated = cur.KeySet, cur.KeyHint, cur.Source, cur.Updated
		}
		cancel()
	}
	p := page{Title: "Agent settings", Data: v}
	if status == http.StatusBadRequest {
		v.Invalid = err.Error()
		p.Data = v
	} else {
		p.Error = err.Error()
	}
	c.render(w, r, status, "chat_settings", p)
}
