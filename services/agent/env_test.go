package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// The services around the agent are stand-ins registered on a real NATS
// server: the gateway's dispatcher (sov.tools.*), which runs a few tools
// for real, and the history's chat store (sov.history.chat.*), in memory.
// services/history is a module of its own and services do not import each
// other; the full stack (real gateway, worker, history) is tested in
// services/sovereign and e2e.

// env is a NATS server with the stand-ins, a scripted model and a client.
type env struct {
	t     *testing.T
	srv   *natsrv.Server
	c     *bus.Conn
	llm   *llmtest.Server
	tools *fakeTools
	hist  *memHistory
}

func newEnv(t *testing.T, steps ...llmtest.Step) *env {
	t.Helper()
	srv := natstest.Server(t)
	e := &env{t: t, srv: srv, c: natstest.Bus(t, srv), llm: llmtest.New(t, steps...)}
	e.tools = startTools(t, natstest.Bus(t, srv))
	e.hist = startHistory(t, natstest.Bus(t, srv))
	return e
}

// testCaller is who the test's runs act for.
var testCaller = &toolsv1.Caller{Kind: "token", Id: "token:t1", Name: "test token"}

// config is the agent configuration of a test: the scripted model.
func (e *env) config() Config {
	return Config{Name: "test", BaseURL: e.llm.URL, Model: "test-model", SystemPrompt: "You are a test agent.",
		Logger:            slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		HeartbeatInterval: 200 * time.Millisecond, ScanInterval: time.Hour}
}

// agent starts an agent on a connection of its own, closed at the end.
func (e *env) agent(cfg Config) *Agent {
	e.t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(e.srv))
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := bus.New(nc, "")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { // after the agent's Close
		_ = c.Close()
		nc.Close()
	})
	a, err := New(e.t.Context(), cfg, c)
	if err != nil {
		e.t.Fatal(err)
	}
	kittest.RunService(e.t, a)
	return a
}

func (e *env) start(req *agentv1.StartRunRequest) *agentv1.Run {
	e.t.Helper()
	if req.Caller == nil {
		req.Caller = testCaller
	}
	var run agentv1.Run
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "start"), req, &run); err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return &run
}

func (e *env) startErr(req *agentv1.StartRunRequest) error {
	var run agentv1.Run
	return e.c.Request(context.Background(), e.c.Subject("agent", "run", "start"), req, &run)
}

func (e *env) get(id string) *agentv1.Run {
	e.t.Helper()
	var run agentv1.Run
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "get"), &agentv1.GetRunRequest{Id: id}, &run); err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return &run
}

func (e *env) cancel(id, by string) *agentv1.Run {
	e.t.Helper()
	var run agentv1.Run
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "cancel"), &agentv1.CancelRunRequest{Id: id, By: by}, &run); err != nil {
		e.t.Fatalf("cancel %s: %v", id, err)
	}
	return &run
}

// record reads the run's record from the KV bucket (no agent needed).
func (e *env) record(id string) *agentv1.Run {
	e.t.Helper()
	js, err := jetstream.New(e.c.NATS())
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), Bucket(""))
	if err != nil {
		e.t.Fatal(err)
	}
	ent, err := kv.Get(context.Background(), keyRunPrefix+id)
	if err != nil {
		e.t.Fatalf("read run %s: %v", id, err)
	}
	r, err := decodeRun(ent.Value())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// wait polls the run until it has ended (the test fails after a minute).
func (e *env) wait(id string) *agentv1.Run {
	e.t.Helper()
	return e.waitFor(id, func(r *agentv1.Run) bool { return terminal(r.GetState()) })
}

func (e *env) waitFor(id string, ok func(*agentv1.Run) bool) *agentv1.Run {
	e.t.Helper()
	return kittest.EventuallyValue(e.t, time.Minute, func() (*agentv1.Run, error) {
		r := e.get(id)
		return r, kittest.Check(ok(r), "run %s: still %s at iteration %d (tool %q)", id, r.GetState(), r.GetIteration(), r.GetCurrentTool())
	})
}

// events subscribes to a run's events before it starts.
func (e *env) events(id string) func() []*agentv1.Run {
	e.t.Helper()
	var mu sync.Mutex
	var got []*agentv1.Run
	sub, err := e.c.NATS().Subscribe(e.c.Subject("agent", "run", "event", id), func(m *nats.Msg) {
		var r agentv1.Run
		if err := protoUnmarshal(m.Data, &r); err == nil {
			mu.Lock()
			got = append(got, &r)
			mu.Unlock()
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.NATS().Flush(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []*agentv1.Run {
		_ = e.c.NATS().Flush()
		mu.Lock()
		defer mu.Unlock()
		return append([]*agentv1.Run(nil), got...)
	}
}

// fakeTools is the gateway's dispatcher for tests, with real tools:
//
//	echo  {text}   returns text; opens browser session "sov_test" when none is given
//	sleep {ms}     sleeps, stopping early when the call is cancelled
//	wait  {}       returns once release is closed
//	shot  {}       returns an image and a caption
//	fail  {}       fails (is_error)
type fakeTools struct {
	mu          sync.Mutex
	calls       []*toolsv1.CallToolRequest
	release     chan struct{}
	waiting     chan struct{} // closed when a wait call arrives
	waitOnce    sync.Once
	interrupted chan struct{} // closed when a sleep was cancelled
	intOnce     sync.Once
}

const echoSchema = `{"type":"object","properties":{"text":{"type":"string","description":"what to echo"},"session":{"type":"string","description":"browser session handle"}},"required":["text","session"]}`

func startTools(t *testing.T, c *bus.Conn) *fakeTools {
	f := &fakeTools{release: make(chan struct{}), waiting: make(chan struct{}), interrupted: make(chan struct{})}
	svc, err := c.AddService("fake-gateway", "0.0.1", "tools for agent tests", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	g := svc.AddGroup(c.Subject("tools"))
	list := func(_ context.Context, r *toolsv1.ListToolsRequest) (*toolsv1.ListToolsResponse, error) {
		if !r.GetForAgent() {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "test: want for_agent")
		}
		return &toolsv1.ListToolsResponse{Tools: []*toolsv1.Tool{
			{Name: "echo", Description: "Echo the text back.", InputSchemaJson: echoSchema},
			{Name: "sleep", Description: "Sleep ms milliseconds.", InputSchemaJson: `{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`},
			{Name: "wait", Description: "Wait until the test says so.", InputSchemaJson: `{"type":"object","properties":{}}`},
			{Name: "shot", Title: "Screenshot", InputSchemaJson: `{"type":"object"}`},
			{Name: "fail", Description: "Always fails.", InputSchemaJson: ""},
		}}, nil
	}
	call := func(ctx context.Context, r *toolsv1.CallToolRequest) (*toolsv1.CallToolResponse, error) {
		f.mu.Lock()
		f.calls = append(f.calls, r)
		f.mu.Unlock()
		if r.GetCaller().GetId() == "" {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "no caller")
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(r.GetArgumentsJson()), &args); err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "arguments: %v", err)
		}
		text := func(s string) *toolsv1.CallToolResponse {
			return &toolsv1.CallToolResponse{Content: []*toolsv1.Content{{Type: "text", Text: s}}}
		}
		switch r.GetName() {
		case "echo":
			resp := text(fmt.Sprint(args["text"]))
			if r.GetSession() == "" {
				resp.Session = "sov_test"
			}
			return resp, nil
		case "sleep":
			ms, _ := args["ms"].(float64)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return text("slept"), nil
			case <-ctx.Done():
				f.intOnce.Do(func() { close(f.interrupted) })
				return nil, ctx.Err()
			}
		case "wait":
			f.waitOnce.Do(func() { close(f.waiting) })
			<-f.release
			return text("waited"), nil
		case "shot":
			return &toolsv1.CallToolResponse{Content: []*toolsv1.Content{
				{Type: "image", MimeType: "image/png", Data: make([]byte, 1234)},
				{Type: "text", Text: "the page"},
			}}, nil
		case "fail":
			return &toolsv1.CallToolResponse{IsError: true, Content: []*toolsv1.Content{{Type: "text", Text: "it broke"}}}, nil
		}
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "unknown tool %q", r.GetName())
	}
	for name, h := range map[string]micro.Handler{"list": bus.Handle(c, list), "call": bus.Handle(c, call)} {
		if err := g.AddEndpoint(name, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeTools) Calls() []*toolsv1.CallToolRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*toolsv1.CallToolRequest(nil), f.calls...)
}

// memHistory is the history service's chat store, in memory.
type memHistory struct {
	mu    sync.Mutex
	chats map[string]*historyv1.ChatSession
	msgs  map[string][]*historyv1.ChatMessage
	next  int64
	svc   micro.Service
	conn  *bus.Conn
}

// down stops the chat store; once it returns, no request reaches it (the
// unsubscriptions are at the server).
func (h *memHistory) down(t *testing.T) {
	t.Helper()
	_ = h.svc.Stop()
	if err := h.conn.Served(); err != nil {
		t.Fatal(err)
	}
}

func startHistory(t *testing.T, c *bus.Conn) *memHistory {
	h := &memHistory{chats: map[string]*historyv1.ChatSession{}, msgs: map[string][]*historyv1.ChatMessage{}}
	svc, err := c.AddService("fake-history", "0.0.1", "chat store for agent tests", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.svc, h.conn = svc, c
	t.Cleanup(func() { _ = svc.Stop() })
	g := svc.AddGroup(c.Subject("history", "chat"))
	create := func(_ context.Context, r *historyv1.CreateChatSessionRequest) (*historyv1.ChatSession, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.chats[r.GetId()] != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "chat %s exists", r.GetId())
		}
		cs := &historyv1.ChatSession{Id: r.GetId(), Title: r.GetTitle(), CreatedUnixMilli: time.Now().UnixMilli()}
		h.chats[cs.Id] = cs
		return cs, nil
	}
	get := func(_ context.Context, r *historyv1.GetChatSessionRequest) (*historyv1.GetChatSessionResponse, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		cs := h.chats[r.GetId()]
		if cs == nil {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat session %s", r.GetId())
		}
		msgs := h.msgs[r.GetId()]
		if n := int(r.GetLastMessages()); n > 0 && len(msgs) > n {
			msgs = msgs[len(msgs)-n:]
		}
		return &historyv1.GetChatSessionResponse{Session: cs, Messages: msgs}, nil
	}
	appendMsgs := func(_ context.Context, r *historyv1.AppendChatMessagesRequest) (*historyv1.AppendChatMessagesResponse, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.chats[r.GetSessionId()] == nil {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat session %s", r.GetSessionId())
		}
		var out []*historyv1.ChatMessage
		for _, m := range r.GetMessages() {
			h.next++
			c := &historyv1.ChatMessage{Id: h.next, SessionId: r.GetSessionId(), Role: m.GetRole(), Content: m.GetContent(),
				ToolCallsJson: m.GetToolCallsJson(), ToolCallId: m.GetToolCallId(), CreatedUnixMilli: time.Now().UnixMilli()}
			h.msgs[r.GetSessionId()] = append(h.msgs[r.GetSessionId()], c)
			out = append(out, c)
		}
		return &historyv1.AppendChatMessagesResponse{Messages: out}, nil
	}
	for name, hd := range map[string]micro.Handler{"create": bus.Handle(c, create), "get": bus.Handle(c, get), "append": bus.Handle(c, appendMsgs)} {
		if err := g.AddEndpoint(name, hd); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *memHistory) messages(chat string) []*historyv1.ChatMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*historyv1.ChatMessage(nil), h.msgs[chat]...)
}

func (h *memHistory) chat(id string) *historyv1.ChatSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.chats[id]
}
