package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"google.golang.org/protobuf/proto"
)

// fakeAgent is an in-memory Agent source: runs do not progress by
// themselves; the test moves them with step. It validates settings the way
// the agent does, so the console's handling of its refusals is real.
type fakeAgent struct {
	mu        sync.Mutex
	n         int
	chats     map[string]*historyv1.ChatSession
	msgs      map[string][]*historyv1.ChatMessage
	runs      map[string]*agentv1.Run
	order     []string // run ids, oldest first
	starts    []*agentv1.StartRunRequest
	cancels   []string // "<run> by <who>"
	settings  *agentv1.Settings
	key       string
	down      bool // every call answers UNAVAILABLE
	leaksKeys bool // Settings returns the key too (a broken source)
}

func newFakeAgent() *fakeAgent {
	return &fakeAgent{chats: map[string]*historyv1.ChatSession{}, msgs: map[string][]*historyv1.ChatMessage{},
		runs: map[string]*agentv1.Run{}, settings: &agentv1.Settings{Source: "environment", MaxIterations: 100}}
}

var errDown = bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "no service answers on sov.agent.run.start")

func (a *fakeAgent) StartRun(_ context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	chat := req.GetChatId()
	if chat == "" {
		a.n++
		chat = fmt.Sprintf("chat-%d", a.n)
		a.chats[chat] = &historyv1.ChatSession{Id: chat, Title: clipRunes(req.GetMessage(), 40),
			CreatedUnixMilli: time.Now().UnixMilli(), UpdatedUnixMilli: time.Now().UnixMilli()}
	} else if a.chats[chat] == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat %s", chat)
	}
	a.starts = append(a.starts, req)
	a.appendLocked(chat, &historyv1.ChatMessage{Role: "user", Content: req.GetMessage()})
	a.n++
	run := &agentv1.Run{Id: fmt.Sprintf("r_%d", a.n), ChatId: chat, State: agentv1.RunState_RUN_STATE_THINKING,
		Iteration: 1, MaxIterations: 100, CallerName: req.GetCaller().GetName(), Task: req.GetMessage(),
		CreatedUnixMilli: time.Now().UnixMilli(), UpdatedUnixMilli: time.Now().UnixMilli()}
	a.runs[run.Id] = run
	a.order = append(a.order, run.Id)
	return clone(run), nil
}

func clone(r *agentv1.Run) *agentv1.Run {
	return proto.Clone(r).(*agentv1.Run)
}

func (a *fakeAgent) appendLocked(chat string, m *historyv1.ChatMessage) {
	a.n++
	m.Id, m.SessionId, m.CreatedUnixMilli = int64(a.n), chat, time.Now().UnixMilli()
	a.msgs[chat] = append(a.msgs[chat], m)
}

// step changes a run and appends messages to its chat, as the agent would
// while it works.
func (a *fakeAgent) step(id string, change func(*agentv1.Run), msgs ...*historyv1.ChatMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.runs[id]
	change(run)
	run.UpdatedUnixMilli++
	for _, m := range msgs {
		a.appendLocked(run.ChatId, m)
	}
}

func (a *fakeAgent) GetRun(_ context.Context, id string) (*agentv1.Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	run := a.runs[id]
	if run == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no run %s", id)
	}
	return clone(run), nil
}

func (a *fakeAgent) CancelRun(_ context.Context, id, by string) (*agentv1.Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.runs[id]
	if run == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no run %s", id)
	}
	a.cancels = append(a.cancels, id+" by "+by)
	run.CancelRequested = true
	return clone(run), nil
}

func (a *fakeAgent) ListRuns(_ context.Context, req *agentv1.ListRunsRequest) ([]*agentv1.Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	var out []*agentv1.Run
	for i := len(a.order) - 1; i >= 0; i-- {
		run := a.runs[a.order[i]]
		if req.GetChatId() != "" && run.ChatId != req.GetChatId() {
			continue
		}
		if req.GetActiveOnly() && run.State >= agentv1.RunState_RUN_STATE_COMPLETE {
			continue
		}
		out = append(out, clone(run))
		if req.GetLimit() > 0 && len(out) == int(req.GetLimit()) {
			break
		}
	}
	return out, nil
}

func (a *fakeAgent) Settings(context.Context) (*agentv1.Settings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	s := proto.Clone(a.settings).(*agentv1.Settings)
	if a.key != "" {
		s.ApiKeySet, s.ApiKeyHint = true, a.key[:3]+"…"+a.key[len(a.key)-4:]
		if a.leaksKeys {
			s.ApiKey = a.key
		}
	}
	return s, nil
}

func (a *fakeAgent) PutSettings(ctx context.Context, req *agentv1.PutSettingsRequest) (*agentv1.Settings, error) {
	s := req.GetSettings()
	if n := s.GetMaxIterations(); n < 0 || n > 1000 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "max_iterations: %d is not between 1 and 1000", n)
	}
	if u := s.GetBaseUrl(); u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "base_url: %q is not an http(s) URL", u)
	}
	a.mu.Lock()
	if req.GetClearApiKey() {
		a.key = ""
	} else if s.GetApiKey() != "" {
		a.key = s.GetApiKey()
	}
	a.settings = &agentv1.Settings{BaseUrl: s.GetBaseUrl(), Model: s.GetModel(), SystemPrompt: s.GetSystemPrompt(),
		MaxIterations: s.GetMaxIterations(), Temperature: s.GetTemperature(), HasTemperature: s.GetHasTemperature(),
		Source: "console", UpdatedUnixMilli: time.Now().UnixMilli()}
	a.mu.Unlock()
	return a.Settings(ctx)
}

func (a *fakeAgent) ListChats(_ context.Context, req *historyv1.ListChatSessionsRequest) (*historyv1.ListChatSessionsResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	res := &historyv1.ListChatSessionsResponse{}
	for _, c := range a.chats {
		res.Sessions = append(res.Sessions, c)
	}
	return res, nil
}

func (a *fakeAgent) GetChat(_ context.Context, id string) (*historyv1.GetChatSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errDown
	}
	c := a.chats[id]
	if c == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat %s", id)
	}
	return &historyv1.GetChatSessionResponse{Session: c, Messages: append([]*historyv1.ChatMessage(nil), a.msgs[id]...)}, nil
}

func (a *fakeAgent) DeleteChat(_ context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chats[id] == nil {
		return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat %s", id)
	}
	delete(a.chats, id)
	delete(a.msgs, id)
	return nil
}

var bearer = map[string]string{"Authorization": "Bearer " + testToken}

func jsonHeader(h map[string]string) map[string]string {
	out := map[string]string{"Content-Type": "application/json"}
	for k, v := range h {
		out[k] = v
	}
	return out
}

func decode[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("decode %d %s: %v", r.status, r.body, err)
	}
	return v
}

func (f *fixture) form(c *http.Client, path string, v url.Values) resp {
	f.t.Helper()
	return f.do(c, http.MethodPost, path, strings.NewReader(v.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL})
}

func TestChatNeedsAuth(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	for _, path := range []string{"/chat", "/chat/new", "/chat/chat-1", "/chat/settings", "/chat/chat-1?part=messages"} {
		r := f.do(c, http.MethodGet, path, nil, nil)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without login: %d %q, want 303 to /login", path, r.status, r.header.Get("Location"))
		}
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", "/api/agent/runs"}, {"POST", "/api/agent/runs"}, {"GET", "/api/agent/runs/r_1"},
		{"POST", "/api/agent/runs/r_1/cancel"}, {"GET", "/api/agent/chats"}, {"GET", "/api/agent/chats/chat-1"},
		{"POST", "/api/agent/chats/chat-1/messages"}, {"DELETE", "/api/agent/chats/chat-1"},
		{"GET", "/api/agent/settings"}, {"PUT", "/api/agent/settings"},
	} {
		r := f.do(c, rt.method, rt.path, strings.NewReader(`{"message":"hi"}`), jsonHeader(nil))
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s %s without token: %d, want 401", rt.method, rt.path, r.status)
		}
	}
	if r := f.form(c, "/chat/new/messages", url.Values{"message": {"hi"}}); r.status != http.StatusSeeOther ||
		!strings.HasPrefix(r.header.Get("Location"), "/login") {
		t.Errorf("POST a message without login: %d %q, want 303 to /login", r.status, r.header.Get("Location"))
	}

	// Logged in, a cross-site page cannot start a run on the cookie.
	f.login(c, testToken)
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}, {}} {
		r := f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"hi"}`), jsonHeader(h))
		if r.status != http.StatusForbidden {
			t.Errorf("cross-site POST /api/agent/runs (%v): %d, want 403", h, r.status)
		}
		r = f.do(c, http.MethodPost, "/chat/new/messages", strings.NewReader("message=hi"),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": h["Origin"]})
		if r.status != http.StatusForbidden {
			t.Errorf("cross-site POST /chat/new/messages (%v): %d, want 403", h, r.status)
		}
		r = f.do(c, http.MethodPut, "/api/agent/settings", strings.NewReader(`{"model":"evil"}`), jsonHeader(h))
		if r.status != http.StatusForbidden {
			t.Errorf("cross-site PUT /api/agent/settings (%v): %d, want 403", h, r.status)
		}
	}
	if len(ag.starts) != 0 || ag.settings.Model == "evil" {
		t.Fatalf("a cross-site request reached the agent: starts %v, settings %v", ag.starts, ag.settings)
	}
	// The same requests from the console's own pages go through.
	r := f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"hi"}`), jsonHeader(map[string]string{"Origin": f.srv.URL}))
	if r.status != http.StatusAccepted {
		t.Fatalf("same-origin POST /api/agent/runs: %d %s", r.status, r.body)
	}
	if r := f.do(c, http.MethodGet, "/chat", nil, nil); r.status != 200 || !strings.Contains(r.body, `href="/chat" class="active"`) {
		t.Errorf("GET /chat logged in: %d, want the page with Chat active in the nav", r.status)
	}
}

func TestChatNotConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{})
	c := f.client()
	f.login(c, testToken)
	for _, path := range []string{"/chat", "/chat/new", "/chat/chat-1", "/chat/settings"} {
		if r := f.do(c, http.MethodGet, path, nil, nil); r.status != 200 || !strings.Contains(r.body, "The agent is not configured on this gateway.") {
			t.Errorf("GET %s without an agent: %d, want a page saying it is not configured", path, r.status)
		}
	}
	r := f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"hi"}`), jsonHeader(bearer))
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "the agent is not configured") {
		t.Errorf("POST /api/agent/runs without an agent: %d %s", r.status, r.body)
	}
	if r := f.do(c, http.MethodGet, "/api/agent/settings", nil, bearer); r.status != http.StatusNotFound {
		t.Errorf("GET /api/agent/settings without an agent: %d, want 404", r.status)
	}
}

// TestChatRun sends a message, follows the run's status through a tool
// call to its answer, and reads the conversation as the page shows it.
func TestChatRun(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()

	r := f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"  save the links of this page\nto links.txt  "}`), jsonHeader(bearer))
	if r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	run := decode[runStatus](t, r)
	if run.ID == "" || run.ChatID == "" || run.State != "thinking" || !run.Active || run.Label != "Thinking" {
		t.Fatalf("started run = %+v", run)
	}
	start := ag.starts[0]
	if start.GetMessage() != "save the links of this page\nto links.txt" || start.GetChatId() != "" {
		t.Errorf("the agent was asked %v", start)
	}
	if cl := start.GetCaller(); cl.GetKind() != "console" || cl.GetId() != "console" || cl.GetName() != "console" {
		t.Errorf("the run's caller is %v, want console/console/console", cl)
	}

	// The model calls a tool: the status says which, the page shows the
	// call on one line, expandable to its arguments.
	calls := `[{"id":"call_1","type":"function","function":{"name":"open","arguments":"{\"url\":\"https://example.com/links\",\"new_tab\":false}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"snapshot","arguments":"{}"}}]`
	ag.step(run.ID, func(r *agentv1.Run) {
		r.State, r.CurrentTool, r.ToolCalls = agentv1.RunState_RUN_STATE_TOOL_CALL, "open", 1
	}, &historyv1.ChatMessage{Role: "assistant", Content: "Opening the page.", ToolCallsJson: calls})
	r = f.do(c, http.MethodGet, "/api/agent/runs/"+run.ID, nil, bearer)
	st := decode[runStatus](t, r)
	if st.State != "tool_call" || st.CurrentTool != "open" || st.Iteration != 1 || st.MaxIterations != 100 || !st.Active ||
		!strings.Contains(st.Detail, "iteration 1 / 100 · open") {
		t.Fatalf("status while running a tool: %d %+v", r.status, st)
	}
	f.login(c, testToken)
	page := f.do(c, http.MethodGet, "/chat/"+run.ChatID, nil, nil)
	for _, want := range []string{
		`data-run="` + run.ID + `" data-active="1"`,
		`<span class="name">open</span>(<span class="args">url=&#34;https://example.com/links&#34;, new_tab=false</span>)`,
		`<span class="name">snapshot</span>(<span class="args"></span>)`,
		`running…`,
		"&#34;url&#34;: &#34;https://example.com/links&#34;",
		`id="stop-form"`,
		"save the links of this page\nto links.txt",
		`<script src="/static/chat.js" defer></script>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the chat page lacks %q", want)
		}
	}
	if strings.Contains(page.body, `id="stop-form" method="post" action="/chat/`+run.ChatID+`/stop" hidden`) {
		t.Error("the Stop button is hidden while the run works")
	}

	// Results arrive, then the answer: the run ends, the page shows the
	// results under their calls and the answer.
	ag.step(run.ID, func(r *agentv1.Run) { r.ToolCalls = 2 },
		&historyv1.ChatMessage{Role: "tool", ToolCallId: "call_1", Content: "Opened https://example.com/links"},
		&historyv1.ChatMessage{Role: "tool", ToolCallId: "call_2", Content: "- link \"One\" [ref=e1]\n- link \"Two\" [ref=e2]"})
	ag.step(run.ID, func(r *agentv1.Run) {
		r.State, r.CurrentTool, r.Iteration, r.FinalAnswer = agentv1.RunState_RUN_STATE_COMPLETE, "", 2, "Saved 2 links to links.txt."
	}, &historyv1.ChatMessage{Role: "assistant", Content: "Saved 2 links to links.txt."})
	st = decode[runStatus](t, f.do(c, http.MethodGet, "/api/agent/runs/"+run.ID, nil, bearer))
	if st.State != "complete" || st.Active || st.FinalAnswer != "Saved 2 links to links.txt." || st.Label != "Done" {
		t.Fatalf("status at the end: %+v", st)
	}
	part := f.do(c, http.MethodGet, "/chat/"+run.ChatID+"?part=messages&run="+run.ID, nil, nil)
	if part.status != 200 || strings.Contains(part.body, "<html") {
		t.Fatalf("the messages part: %d, want the part alone\n%s", part.status, part.body)
	}
	for _, want := range []string{
		`<details class="call done" data-call="call_1">`,
		"Opened https://example.com/links",
		"- link &#34;One&#34; [ref=e1]\n- link &#34;Two&#34; [ref=e2]",
		`<div class="bubble text">Saved 2 links to links.txt.</div>`,
	} {
		if !strings.Contains(part.body, want) {
			t.Errorf("the messages part lacks %q\n%s", want, part.body)
		}
	}
	if strings.Contains(part.body, "running…") || strings.Contains(part.body, `class="msg assistant final"`) {
		t.Errorf("the finished conversation still shows a running call or repeats the answer\n%s", part.body)
	}
	page = f.do(c, http.MethodGet, "/chat/"+run.ChatID, nil, nil)
	if !strings.Contains(page.body, `data-active=""`) || !strings.Contains(page.body, `class="run-status state-complete"`) ||
		!strings.Contains(page.body, `/stop" hidden>`) {
		t.Errorf("the page of a finished run still shows it working")
	}

	// A follow-up continues the chat; the form works without the script.
	r = f.do(c, http.MethodPost, "/api/agent/chats/"+run.ChatID+"/messages", strings.NewReader(`{"message":"and the images?"}`), jsonHeader(bearer))
	if r.status != http.StatusAccepted || ag.starts[1].GetChatId() != run.ChatID {
		t.Fatalf("follow-up: %d %s, asked %v", r.status, r.body, ag.starts[1])
	}
	r = f.form(c, "/chat/"+run.ChatID+"/messages", url.Values{"message": {"one more"}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/chat/"+run.ChatID+"?run=r_") {
		t.Fatalf("form send: %d %q", r.status, r.header.Get("Location"))
	}
	r = f.form(c, "/chat/new/messages", url.Values{"message": {"a new task"}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/chat/chat-") || len(ag.starts) != 4 || ag.starts[3].GetChatId() != "" {
		t.Fatalf("form send of a new chat: %d %q", r.status, r.header.Get("Location"))
	}

	// The list shows the chats, the running ones marked.
	list := f.do(c, http.MethodGet, "/chat", nil, nil)
	if !strings.Contains(list.body, `href="/chat/`+run.ChatID+`">save the links of this page`) || !strings.Contains(list.body, `class="pill run">running`) {
		t.Errorf("the chat list lacks the chat or the running mark\n%s", list.body)
	}
	runs := decode[struct{ Runs []runStatus }](t, f.do(c, http.MethodGet, "/api/agent/runs?chat_id="+run.ChatID+"&active=true", nil, bearer))
	if len(runs.Runs) != 2 {
		t.Errorf("active runs of the chat: %+v, want the 2 follow-ups", runs.Runs)
	}
	chat := decode[struct {
		Chat     chatJSON
		Messages []messageJSON
	}](t, f.do(c, http.MethodGet, "/api/agent/chats/"+run.ChatID, nil, bearer))
	if chat.Chat.ID != run.ChatID || len(chat.Messages) < 5 || chat.Messages[1].Role != "assistant" ||
		!strings.Contains(string(chat.Messages[1].ToolCalls), `"call_1"`) || chat.Messages[2].ToolCallID != "call_1" {
		t.Errorf("GET /api/agent/chats/%s = %+v", run.ChatID, chat)
	}
	if r := f.do(c, http.MethodGet, "/api/agent/chats", nil, bearer); !strings.Contains(r.body, run.ChatID) {
		t.Errorf("GET /api/agent/chats: %s", r.body)
	}
}

// TestChatFinalAnswerShown: when the conversation does not (yet) have the
// run's answer, the page shows it from the run.
func TestChatFinalAnswerShown(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	f.login(c, testToken)
	run := decode[runStatus](t, f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"count"}`), jsonHeader(bearer)))
	ag.step(run.ID, func(r *agentv1.Run) {
		r.State, r.FinalAnswer = agentv1.RunState_RUN_STATE_COMPLETE, "Stopped after 100 iterations: the cap was reached."
	})
	part := f.do(c, http.MethodGet, "/chat/"+run.ChatID+"?part=messages", nil, nil)
	if !strings.Contains(part.body, `<div class="msg assistant final"><div class="who">Agent</div><div class="bubble text">Stopped after 100 iterations`) {
		t.Errorf("the run's answer is not shown\n%s", part.body)
	}
}

func TestChatCancel(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	run := decode[runStatus](t, f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"a long task"}`), jsonHeader(bearer)))
	r := f.do(c, http.MethodPost, "/api/agent/runs/"+run.ID+"/cancel", nil, bearer)
	st := decode[runStatus](t, r)
	if r.status != 200 || !st.CancelRequested || !st.Active || !strings.Contains(st.Detail, "stopping") {
		t.Fatalf("cancel: %d %+v", r.status, st)
	}
	if r := f.do(c, http.MethodGet, "/api/agent/runs/"+run.ID+"/cancel", nil, bearer); r.status == 200 {
		t.Errorf("GET of the cancel route: %d, want it refused", r.status)
	}
	ag.step(run.ID, func(r *agentv1.Run) {
		r.State, r.Error = agentv1.RunState_RUN_STATE_CANCELLED, "cancelled by console:api"
	})
	st = decode[runStatus](t, f.do(c, http.MethodGet, "/api/agent/runs/"+run.ID, nil, bearer))
	if st.State != "cancelled" || st.Active || st.Notice != "The run was stopped: cancelled by console:api" {
		t.Errorf("after the cancel: %+v", st)
	}

	// The Stop button of the page (the form, without the script).
	run2 := decode[runStatus](t, f.do(c, http.MethodPost, "/api/agent/chats/"+run.ChatID+"/messages", strings.NewReader(`{"message":"again"}`), jsonHeader(bearer)))
	f.login(c, testToken)
	r = f.form(c, "/chat/"+run.ChatID+"/stop", url.Values{"run": {run2.ID}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/chat/"+run.ChatID {
		t.Fatalf("Stop form: %d %q", r.status, r.header.Get("Location"))
	}
	want := []string{run.ID + " by console:api", run2.ID + " by console:Ada_Lovelace"}
	if fmt.Sprint(ag.cancels) != fmt.Sprint(want) {
		t.Errorf("cancels = %v, want %v", ag.cancels, want)
	}
	if r := f.do(c, http.MethodPost, "/api/agent/runs/r_404/cancel", nil, bearer); r.status != http.StatusNotFound || !strings.Contains(r.body, "no run r_404") {
		t.Errorf("cancel of an unknown run: %d %s, want 404 naming it", r.status, r.body)
	}
	if r := f.form(c, "/chat/"+run.ChatID+"/stop", url.Values{"run": {"r_404"}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "no run r_404") {
		t.Errorf("Stop form of an unknown run: %d, want 404 with the reason", r.status)
	}
}

func TestChatErrors(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	post := func(path, body string) resp {
		return f.do(c, http.MethodPost, path, strings.NewReader(body), jsonHeader(bearer))
	}
	long := strings.Repeat("é", MaxMessageChars)
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"empty", "/api/agent/runs", `{"message":"  \n "}`, 400, "the message is empty"},
		{"too long", "/api/agent/runs", `{"message":"` + long + `x"}`, 400, fmt.Sprintf("the message has %d characters; the agent takes at most %d", MaxMessageChars+1, MaxMessageChars)},
		{"not JSON", "/api/agent/runs", `message=hi`, 400, "the body must be JSON"},
		{"unknown field", "/api/agent/runs", `{"mesage":"hi"}`, 400, `unknown field \"mesage\"`},
		{"two values", "/api/agent/runs", `{"message":"hi"}{}`, 400, "more than one JSON value"},
		{"cap too high", "/api/agent/runs", `{"message":"hi","max_iterations":1001}`, 400, "max_iterations is 1001"},
		{"bad chat id", "/api/agent/runs", `{"chat_id":"a b","message":"hi"}`, 400, `chat id \"a b\" is not valid`},
		{"unknown chat", "/api/agent/chats/nope/messages", `{"message":"hi"}`, 404, "no chat nope"},
		{"huge body", "/api/agent/runs", `{"message":"` + strings.Repeat("a", messageBodyLimit) + `"}`, 413, "larger than"},
	} {
		r := post(tc.path, tc.body)
		if r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %.300s, want %d with %q", tc.name, r.status, r.body, tc.status, tc.want)
		}
	}
	if n := len(ag.starts); n != 0 {
		t.Fatalf("%d bad requests reached the agent", n)
	}
	if r := post("/api/agent/runs", `{"message":"`+long+`"}`); r.status != http.StatusAccepted {
		t.Errorf("a message of exactly %d characters: %d, want 202", MaxMessageChars, r.status)
	}
	for path, want := range map[string]int{
		"/api/agent/runs/r_404":      404,
		"/api/agent/runs/a%20b":      400,
		"/api/agent/chats/nope":      404,
		"/api/agent/runs?limit=0":    400,
		"/api/agent/runs?limit=501":  400,
		"/api/agent/runs?active=yes": 400,
		"/api/agent/chats?limit=x":   400,
	} {
		if r := f.do(c, http.MethodGet, path, nil, bearer); r.status != want || !strings.Contains(r.body, `"error"`) {
			t.Errorf("GET %s: %d %s, want %d with an error", path, r.status, r.body, want)
		}
	}

	// Deleting: DELETE and POST …/delete, then 404.
	run := decode[runStatus](t, post("/api/agent/runs", `{"message":"to delete"}`))
	if r := f.do(c, http.MethodDelete, "/api/agent/chats/"+run.ChatID, nil, bearer); r.status != 200 {
		t.Errorf("DELETE chat: %d %s", r.status, r.body)
	}
	if r := post("/api/agent/chats/"+run.ChatID+"/delete", ``); r.status != 404 {
		t.Errorf("deleting it again: %d, want 404", r.status)
	}
	f.login(c, testToken)
	run = decode[runStatus](t, post("/api/agent/runs", `{"message":"to delete by form"}`))
	if r := f.form(c, "/chat/"+run.ChatID+"/delete", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/chat?done=deleted" {
		t.Errorf("delete form: %d %q", r.status, r.header.Get("Location"))
	}
	if r := f.do(c, http.MethodGet, "/chat/"+run.ChatID, nil, nil); r.status != 404 || !strings.Contains(r.body, "no chat "+run.ChatID) {
		t.Errorf("page of a deleted chat: %d, want 404 saying so", r.status)
	}

	// A failed send keeps the message in the box and says why.
	r := f.form(c, "/chat/new/messages", url.Values{"message": {"   "}})
	if r.status != 400 || !strings.Contains(r.body, "the message is empty") {
		t.Errorf("form send of an empty message: %d", r.status)
	}

	// The agent down: 503 with the reason, and the page says it.
	ag.mu.Lock()
	ag.down = true
	ag.mu.Unlock()
	r = post("/api/agent/runs", `{"message":"hi"}`)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "no service answers") {
		t.Errorf("start with the agent down: %d %s, want 503", r.status, r.body)
	}
	r = f.form(c, "/chat/new/messages", url.Values{"message": {"keep <this> text"}})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "start the run: no service answers") ||
		!strings.Contains(r.body, "keep &lt;this&gt; text</textarea>") {
		t.Errorf("form send with the agent down: %d, want 503, the reason and the message kept\n%s", r.status, r.body)
	}
	if r := f.do(c, http.MethodGet, "/chat/new", nil, nil); !strings.Contains(r.body, "the agent is not reachable: no service answers") {
		t.Errorf("the new chat page does not say the agent is down")
	}
	if r := f.do(c, http.MethodGet, "/chat", nil, nil); !strings.Contains(r.body, "list the chats: no service answers") {
		t.Errorf("the chat list does not say the source is down")
	}
}

func TestChatNoProviderWarning(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	f.login(c, testToken)
	if r := f.do(c, http.MethodGet, "/chat/new", nil, nil); !strings.Contains(r.body, `id="provider-warning"`) ||
		!strings.Contains(r.body, "No model provider is set") {
		t.Errorf("no warning without a provider")
	}
	ag.settings.BaseUrl, ag.settings.Model = "http://127.0.0.1:11434/v1", "llama3.1"
	if r := f.do(c, http.MethodGet, "/chat/new", nil, nil); strings.Contains(r.body, `id="provider-warning"`) {
		t.Errorf("a warning with a provider set")
	}
	// A run that failed says why on its chat's page.
	run := decode[runStatus](t, f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(`{"message":"hi"}`), jsonHeader(bearer)))
	ag.step(run.ID, func(r *agentv1.Run) {
		r.State, r.Error = agentv1.RunState_RUN_STATE_ERROR, "the model provider answered 401: invalid API key"
	})
	r := f.do(c, http.MethodGet, "/chat/"+run.ChatID, nil, nil)
	if !strings.Contains(r.body, `<div id="run-error" class="notice err" role="alert">The run failed: the model provider answered 401: invalid API key</div>`) ||
		!strings.Contains(r.body, "state-error") {
		t.Errorf("the failed run's error is not shown\n%s", r.body)
	}
}

func TestChatSettings(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	ag.leaksKeys = true // the console must not pass a key on, whatever its source answers
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	const key = "sk-test-0123456789a1b2"

	r := f.do(c, http.MethodPut, "/api/agent/settings", strings.NewReader(
		`{"base_url":"http://127.0.0.1:11434/v1","model":"llama3.1","system_prompt":"Be brief.","max_iterations":40,"temperature":0.2,"api_key":"`+key+`"}`),
		jsonHeader(bearer))
	s := decode[settingsJSON](t, r)
	if r.status != 200 || s.Model != "llama3.1" || s.MaxIterations != 40 || s.Temperature == nil || *s.Temperature != 0.2 ||
		!s.APIKeySet || s.APIKeyHint != "sk-…a1b2" || s.Source != "console" {
		t.Fatalf("PUT settings: %d %s", r.status, r.body)
	}
	if ag.key != key {
		t.Fatalf("the agent got key %q", ag.key)
	}
	for _, path := range []string{"/api/agent/settings"} {
		if r := f.do(c, http.MethodGet, path, nil, bearer); strings.Contains(r.body, key) || !strings.Contains(r.body, `"api_key_hint": "sk-…a1b2"`) {
			t.Errorf("GET %s shows the key or lacks its hint: %s", path, r.body)
		}
	}
	for body, want := range map[string]string{
		`{"max_iterations":5000}`:                   "max_iterations: 5000 is not between 1 and 1000",
		`{"base_url":"ftp://x"}`:                    `base_url: \"ftp://x\" is not an http(s) URL`,
		`{"api_key":"sk-new","clear_api_key":true}`: "not both",
		`{"temperature":"hot"}`:                     "the body must be JSON",
		`{"api_key":" sk-x"}`:                       "white space",
	} {
		r := f.do(c, http.MethodPut, "/api/agent/settings", strings.NewReader(body), jsonHeader(bearer))
		if r.status != 400 || !strings.Contains(r.body, want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", body, r.status, r.body, want)
		}
	}

	// The page: the key is a password input with no value, and a hint.
	f.login(c, testToken)
	page := f.do(c, http.MethodGet, "/chat/settings", nil, nil)
	if strings.Contains(page.body, key) || !strings.Contains(page.body, `<input type="password" name="api_key" autocomplete="new-password"`) ||
		!strings.Contains(page.body, "set (sk-…a1b2)") || !strings.Contains(page.body, `value="llama3.1"`) ||
		!strings.Contains(page.body, `name="clear_api_key"`) || !strings.Contains(page.body, ">console</strong>") {
		t.Errorf("the settings page:\n%s", page.body)
	}
	form := url.Values{"base_url": {"http://127.0.0.1:1234/v1"}, "model": {"qwen"}, "system_prompt": {"Line 1\nLine <2>"},
		"max_iterations": {""}, "temperature": {""}, "api_key": {""}}
	// Refused by the agent: its reason next to the form, what was typed kept
	// (never the key).
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("max_iterations", "5000")
	bad.Set("api_key", "sk-typed-but-refused")
	r = f.form(c, "/chat/settings", bad)
	if r.status != 400 || !strings.Contains(r.body, `<div class="notice err" role="alert" id="settings-error">max_iterations: 5000 is not between 1 and 1000</div>`) ||
		!strings.Contains(r.body, `value="5000"`) || !strings.Contains(r.body, "Line 1\nLine &lt;2&gt;</textarea>") || strings.Contains(r.body, "sk-typed") {
		t.Errorf("a refused form: %d\n%s", r.status, r.body)
	}
	// Refused by the console before the agent.
	bad.Set("max_iterations", "many")
	if r := f.form(c, "/chat/settings", bad); r.status != 400 || !strings.Contains(r.body, `max iterations: &#34;many&#34; is not a whole number`) {
		t.Errorf("max_iterations=many: %d", r.status)
	}
	bad.Set("max_iterations", "")
	bad.Set("temperature", "warm")
	if r := f.form(c, "/chat/settings", bad); r.status != 400 || !strings.Contains(r.body, `temperature: &#34;warm&#34; is not a number`) {
		t.Errorf("temperature=warm: %d", r.status)
	}
	if ag.key != key || ag.settings.Model != "llama3.1" {
		t.Fatalf("a refused form changed the settings: %v key %q", ag.settings, ag.key)
	}
	// Saved: an empty key keeps the stored one, empty numbers are defaults.
	r = f.form(c, "/chat/settings", form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/chat/settings?done=saved" {
		t.Fatalf("save: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	if ag.key != key || ag.settings.Model != "qwen" || ag.settings.MaxIterations != 0 || ag.settings.HasTemperature ||
		ag.settings.SystemPrompt != "Line 1\nLine <2>" {
		t.Errorf("after the save: %v key %q", ag.settings, ag.key)
	}
	if r := f.do(c, http.MethodGet, "/chat/settings?done=saved", nil, nil); !strings.Contains(r.body, "Settings saved.") {
		t.Errorf("no notice after the save")
	}
	// Clear the key.
	form.Set("clear_api_key", "1")
	if r := f.form(c, "/chat/settings", form); r.status != http.StatusSeeOther || ag.key != "" {
		t.Errorf("clear the key: %d, key %q", r.status, ag.key)
	}
	if r := f.do(c, http.MethodGet, "/chat/settings", nil, nil); !strings.Contains(r.body, `<span class="hint" id="key-state">not set`) {
		t.Errorf("the page does not say the key is not set")
	}
}

// TestChatEscaping: what a user, a model or a web page wrote is text,
// never markup, in the page, the messages part and the JSON.
func TestChatEscaping(t *testing.T) {
	t.Parallel()
	ag := newFakeAgent()
	f := newFixture(t, Sources{Agent: ag})
	c := f.client()
	evil := "<script>alert(1)</script>\nsecond line & <b>bold</b>"
	body, _ := json.Marshal(map[string]string{"message": evil})
	r := f.do(c, http.MethodPost, "/api/agent/runs", strings.NewReader(string(body)), jsonHeader(bearer))
	run := decode[runStatus](t, r)
	if strings.Contains(r.body, "<script>") {
		t.Errorf("the JSON answer carries raw markup: %s", r.body)
	}
	ag.step(run.ID, func(r *agentv1.Run) { r.State, r.CurrentTool = agentv1.RunState_RUN_STATE_TOOL_CALL, "type" },
		&historyv1.ChatMessage{Role: "assistant", Content: "<img src=x onerror=alert(2)>",
			ToolCallsJson: `[{"id":"c1","type":"function","function":{"name":"type<i>","arguments":"{\"text\":\"<script>alert(3)</script>\"}"}}]`},
		&historyv1.ChatMessage{Role: "tool", ToolCallId: "c1", Content: "</pre><script>alert(4)</script>"})
	f.login(c, testToken)
	for _, path := range []string{"/chat/" + run.ChatID, "/chat/" + run.ChatID + "?part=messages", "/chat"} {
		page := f.do(c, http.MethodGet, path, nil, nil)
		for _, raw := range []string{"<script>alert", "<img src=x", "<b>bold", "type<i>", "</pre><script>"} {
			if strings.Contains(page.body, raw) {
				t.Errorf("%s shows %q unescaped", path, raw)
			}
		}
	}
	page := f.do(c, http.MethodGet, "/chat/"+run.ChatID, nil, nil)
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;\nsecond line &amp; &lt;b&gt;bold&lt;/b&gt;", // line break kept
		"&lt;img src=x onerror=alert(2)&gt;",
		`<span class="name">type&lt;i&gt;</span>(<span class="args">text=&#34;&lt;script&gt;alert(3)&lt;/script&gt;&#34;</span>)`,
		"&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;",
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the page lacks the escaped %q", want)
		}
	}
	if r := f.do(c, http.MethodGet, "/api/agent/chats/"+run.ChatID, nil, bearer); strings.Contains(r.body, "<script>") {
		t.Errorf("the chat JSON carries raw markup: %s", r.body)
	}
}

func TestBuildMessages(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", resultShown+5)
	items := buildMessages([]*historyv1.ChatMessage{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCallsJson: `[{"id":"a","function":{"name":"open","arguments":"{\"url\":\"` + strings.Repeat("u", 80) + `\",\"n\":3,\"o\":{\"k\":1},\"l\":[1]}"}},{"id":"b","name":"snapshot","arguments":{}}]`},
		{Role: "tool", ToolCallId: "b", Content: big},
		{Role: "tool", ToolCallId: "a", Content: "ok"},
		{Role: "tool", ToolCallId: "zz", Content: "orphan"},
		{Role: "assistant", ToolCallsJson: `not json`},
		{Role: "assistant", Content: "  "},
		{Role: "assistant", Content: "done"},
	})
	if len(items) != 5 {
		t.Fatalf("%d items, want 5: %+v", len(items), items)
	}
	calls := items[1].Calls
	if len(calls) != 2 || calls[0].Result != "ok" || !calls[0].Done || !calls[1].Done {
		t.Fatalf("calls = %+v", calls)
	}
	if want := `url="` + strings.Repeat("u", 48) + `…", n=3, o={…}, l=[…]`; calls[0].Preview != want {
		t.Errorf("preview = %q, want %q", calls[0].Preview, want)
	}
	if calls[1].Name != "snapshot" || calls[1].Preview != "" || len(calls[1].Result) != resultShown ||
		calls[1].ResultNote != fmt.Sprintf("(showing the first %d of %d characters)", resultShown, resultShown+5) {
		t.Errorf("the flat call or its clipped result: %+v", calls[1].Name)
	}
	if items[2].Role != "tool" || items[2].Calls[0].Result != "orphan" {
		t.Errorf("the orphan result: %+v", items[2])
	}
	if items[3].Calls[0].Name != "(unreadable tool calls)" || items[3].Calls[0].Args != "not json" {
		t.Errorf("unreadable tool calls: %+v", items[3])
	}
	if items[4].Text != "done" {
		t.Errorf("last item: %+v", items[4])
	}
	if p := argsPreview(`{"a":"` + strings.Repeat("a", 40) + `","b":"` + strings.Repeat("b", 40) + `","c":1}`); len([]rune(p)) != previewChars+1 || !strings.HasSuffix(p, "…") {
		t.Errorf("a long preview is not clipped to %d characters: %q", previewChars, p)
	}
}
