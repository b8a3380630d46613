package console

// The agent's JSON API under /api/agent/: what the chat page's script
// uses, and what an operator's script may use with the Bearer token.
// Errors are {"error": "…"} with 400 (bad input), 404 (unknown chat or
// run, or no agent configured), 503 (the agent or history is not
// reachable), 504 (it did not answer in time) or 502 (another failure).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// readJSON decodes a request's JSON body into v, refusing unknown fields
// and trailing data; it answers the request itself on failure.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, example string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit))
			return false
		}
		apiError(w, http.StatusBadRequest, "the body must be JSON like "+example+": "+err.Error())
		return false
	}
	return true
}

func (c *Console) noAgent(w http.ResponseWriter) bool {
	if c.src.Agent == nil {
		apiError(w, http.StatusNotFound, errNoAgent.Error())
		return true
	}
	return false
}

type startBody struct {
	ChatID        string `json:"chat_id"`
	Message       string `json:"message"`
	MaxIterations int32  `json:"max_iterations"`
}

// apiStartRun: POST /api/agent/runs {"chat_id": "…" (empty: a new chat),
// "message": "…", "max_iterations": 0} → 202 and the run.
func (c *Console) apiStartRun(w http.ResponseWriter, r *http.Request) {
	var body startBody
	if !readJSON(w, r, messageBodyLimit, &body, `{"chat_id":"… (empty for a new chat)","message":"…"}`) {
		return
	}
	c.answerStart(w, r, body)
}

// apiSendMessage: POST /api/agent/chats/{id}/messages {"message": "…"}
// continues the chat with a new run → 202 and the run.
func (c *Console) apiSendMessage(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Message       string `json:"message"`
		MaxIterations int32  `json:"max_iterations"`
	}
	if !readJSON(w, r, messageBodyLimit, &body, `{"message":"…"}`) {
		return
	}
	c.answerStart(w, r, startBody{ChatID: r.PathValue("id"), Message: body.Message, MaxIterations: body.MaxIterations})
}

func (c *Console) answerStart(w http.ResponseWriter, r *http.Request, b startBody) {
	run, status, err := c.startRun(r, b.ChatID, b.Message, b.MaxIterations)
	if err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, newRunStatus(run))
}

// apiGetRun: GET /api/agent/runs/{id} → the run's status.
func (c *Console) apiGetRun(w http.ResponseWriter, r *http.Request) {
	if c.noAgent(w) {
		return
	}
	id := r.PathValue("id")
	if !validID(id) {
		apiError(w, http.StatusBadRequest, badID("run", id).Error())
		return
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	run, err := c.src.Agent.GetRun(ctx, id)
	if err != nil {
		apiError(w, agentStatus(err), errText("read the run", err))
		return
	}
	writeJSON(w, http.StatusOK, newRunStatus(run))
}

// apiCancelRun: POST /api/agent/runs/{id}/cancel → the run, with
// cancel_requested set (it stops before its next model or tool call).
func (c *Console) apiCancelRun(w http.ResponseWriter, r *http.Request) {
	run, status, err := c.cancelRun(r, r.PathValue("id"))
	if err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, newRunStatus(run))
}

// apiListRuns: GET /api/agent/runs?chat_id=…&active=1&limit=50 → {"runs":
// […]}, newest first.
func (c *Console) apiListRuns(w http.ResponseWriter, r *http.Request) {
	if c.noAgent(w) {
		return
	}
	q := r.URL.Query()
	req := &agentv1.ListRunsRequest{ChatId: q.Get("chat_id")}
	if req.ChatId != "" && !validID(req.ChatId) {
		apiError(w, http.StatusBadRequest, badID("chat", req.ChatId).Error())
		return
	}
	if a := q.Get("active"); a != "" {
		v, err := strconv.ParseBool(a)
		if err != nil {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("active=%q: want true or false", a))
			return
		}
		req.ActiveOnly = v
	}
	limit, ok := queryLimit(w, q.Get("limit"), 500)
	if !ok {
		return
	}
	req.Limit = limit
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	runs, err := c.src.Agent.ListRuns(ctx, req)
	if err != nil {
		apiError(w, agentStatus(err), errText("list the runs", err))
		return
	}
	out := make([]*runStatus, 0, len(runs))
	for _, run := range runs {
		out = append(out, newRunStatus(run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

// queryLimit reads an optional limit=N of 1 to maxN (0 when absent).
func queryLimit(w http.ResponseWriter, s string, maxN int) (int32, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxN {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: want a whole number from 1 to %d", s, maxN))
		return 0, false
	}
	return int32(n), true
}

// chatJSON is a chat session in the API.
type chatJSON struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
}

func newChatJSON(s *historyv1.ChatSession) chatJSON {
	return chatJSON{ID: s.GetId(), Title: s.GetTitle(), Created: msTime(s.GetCreatedUnixMilli()).UTC(),
		Updated: msTime(s.GetUpdatedUnixMilli()).UTC()}
}

// messageJSON is a chat message in the API, in the OpenAI shape.
type messageJSON struct {
	ID         int64           `json:"id"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Created    time.Time       `json:"created,omitzero"`
}

// apiListChats: GET /api/agent/chats?limit=50&cursor=… → {"chats": […],
// "next_cursor": "…"}, by last update, newest first.
func (c *Console) apiListChats(w http.ResponseWriter, r *http.Request) {
	if c.noAgent(w) {
		return
	}
	limit, ok := queryLimit(w, r.URL.Query().Get("limit"), 500)
	if !ok {
		return
	}
	if limit == 0 {
		limit = chatPageSize
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	res, err := c.src.Agent.ListChats(ctx, &historyv1.ListChatSessionsRequest{Limit: limit, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		apiError(w, agentStatus(err), errText("list the chats", err))
		return
	}
	out := make([]chatJSON, 0, len(res.GetSessions()))
	for _, s := range res.GetSessions() {
		out = append(out, newChatJSON(s))
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": out, "next_cursor": res.GetNextCursor()})
}

// apiGetChat: GET /api/agent/chats/{id} → {"chat": {…}, "messages": […]},
// oldest first.
func (c *Console) apiGetChat(w http.ResponseWriter, r *http.Request) {
	if c.noAgent(w) {
		return
	}
	id := r.PathValue("id")
	if !validID(id) {
		apiError(w, http.StatusBadRequest, badID("chat", id).Error())
		return
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	res, err := c.src.Agent.GetChat(ctx, id)
	if err != nil {
		apiError(w, agentStatus(err), errText("read the chat", err))
		return
	}
	msgs := make([]messageJSON, 0, len(res.GetMessages()))
	for _, m := range res.GetMessages() {
		mj := messageJSON{ID: m.GetId(), Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId(),
			Created: msTime(m.GetCreatedUnixMilli()).UTC()}
		if tc := m.GetToolCallsJson(); tc != "" {
			if json.Valid([]byte(tc)) {
				mj.ToolCalls = json.RawMessage(tc)
			} else {
				mj.ToolCalls, _ = json.Marshal(tc)
			}
		}
		msgs = append(msgs, mj)
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat": newChatJSON(res.GetSession()), "messages": msgs})
}

// apiDeleteChat: DELETE /api/agent/chats/{id} (or POST …/delete).
func (c *Console) apiDeleteChat(w http.ResponseWriter, r *http.Request) {
	if status, err := c.deleteChat(r, r.PathValue("id")); err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("id")})
}

// settingsJSON is the provider settings in the API: never the key, only
// whether one is set and its masked hint.
type settingsJSON struct {
	BaseURL       string    `json:"base_url"`
	Model         string    `json:"model"`
	SystemPrompt  string    `json:"system_prompt"`
	MaxIterations int32     `json:"max_iterations"`
	Temperature   *float64  `json:"temperature"` // null: the provider's default
	APIKeySet     bool      `json:"api_key_set"`
	APIKeyHint    string    `json:"api_key_hint,omitempty"`
	Source        string    `json:"source"`
	Updated       time.Time `json:"updated,omitzero"`
}

func newSettingsJSON(s *agentv1.Settings) settingsJSON {
	out := settingsJSON{BaseURL: s.GetBaseUrl(), Model: s.GetModel(), SystemPrompt: s.GetSystemPrompt(),
		MaxIterations: s.GetMaxIterations(), APIKeySet: s.GetApiKeySet(), APIKeyHint: s.GetApiKeyHint(),
		Source: s.GetSource(), Updated: msTime(s.GetUpdatedUnixMilli()).UTC()}
	if s.GetHasTemperature() {
		t := s.GetTemperature()
		out.Temperature = &t
	}
	return out
}

// apiGetSettings: GET /api/agent/settings.
func (c *Console) apiGetSettings(w http.ResponseWriter, r *http.Request) {
	if c.noAgent(w) {
		return
	}
	ctx, cancel := c.agentCtx(r)
	defer cancel()
	s, err := c.src.Agent.Settings(ctx)
	if err != nil {
		apiError(w, agentStatus(err), errText("read the settings", err))
		return
	}
	writeJSON(w, http.StatusOK, newSettingsJSON(s))
}

// apiPutSettings: PUT /api/agent/settings with every field (settingsInput)
// → the settings saved.
func (c *Console) apiPutSettings(w http.ResponseWriter, r *http.Request) {
	var in settingsInput
	if !readJSON(w, r, messageBodyLimit, &in,
		`{"base_url":"http://127.0.0.1:11434/v1","model":"llama3.1","system_prompt":"","max_iterations":100,"temperature":null,"api_key":"","clear_api_key":false}`) {
		return
	}
	s, status, err := c.putSettings(r, in)
	if err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, newSettingsJSON(s))
}
