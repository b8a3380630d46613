package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// fakeAgent answers sov.agent.run.{start,get,cancel} by the agent service's
// contract, with runs the test moves along (the agent service itself is
// another module; the full stack is tested in services/sovereign).
type fakeAgent struct {
	c       *bus.Conn
	starts  chan *agentv1.StartRunRequest
	cancels chan *agentv1.CancelRunRequest

	mu   sync.Mutex
	runs map[string]*agentv1.Run
	seq  int64 // stands in for updated_unix_milli: only the order matters
}

func startFakeAgent(t *testing.T, srv *natsrv.Server) *fakeAgent {
	t.Helper()
	c := connect(t, srv)
	a := &fakeAgent{c: c, starts: make(chan *agentv1.StartRunRequest, 16), cancels: make(chan *agentv1.CancelRunRequest, 16),
		runs: map[string]*agentv1.Run{}}
	svc, err := c.AddService("sovereign-agent", "0.0.0-test", "test stand-in for the agent service", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	grp := svc.AddGroup(c.Subject("agent", "run"))
	for _, err := range []error{
		grp.AddEndpoint("start", bus.Handle(c, a.start)),
		grp.AddEndpoint("get", bus.Handle(c, a.get)),
		grp.AddEndpoint("cancel", bus.Handle(c, a.cancel)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Served(); err != nil { // a start sent next from the gateway finds it
		t.Fatal(err)
	}
	return a
}

func (a *fakeAgent) start(_ context.Context, r *agentv1.StartRunRequest) (*agentv1.Run, error) {
	chat := r.GetChatId()
	if chat == "" {
		chat = "chat-" + r.GetId()
	}
	maxIter := r.GetMaxIterations()
	if maxIter == 0 {
		maxIter = 100
	}
	run := a.update(&agentv1.Run{Id: r.GetId(), ChatId: chat, State: agentv1.RunState_RUN_STATE_IDLE, MaxIterations: maxIter,
		Task: r.GetMessage(), CallerName: r.GetCaller().GetName()}, false)
	a.starts <- r
	return run, nil
}

func (a *fakeAgent) get(_ context.Context, r *agentv1.GetRunRequest) (*agentv1.Run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	run, ok := a.runs[r.GetId()]
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no run %q", r.GetId())
	}
	return proto.Clone(run).(*agentv1.Run), nil
}

func (a *fakeAgent) cancel(_ context.Context, r *agentv1.CancelRunRequest) (*agentv1.Run, error) {
	a.cancels <- r
	cur, err := a.get(context.Background(), &agentv1.GetRunRequest{Id: r.GetId()})
	if err != nil {
		return nil, err
	}
	cur.CancelRequested, cur.State, cur.Error = true, agentv1.RunState_RUN_STATE_CANCELLED, "cancelled by "+r.GetBy()
	return a.update(cur, true), nil
}

// update stores run as the newest record of its id and, when publish, sends
// it as an event.
func (a *fakeAgent) update(run *agentv1.Run, publish bool) *agentv1.Run {
	a.mu.Lock()
	a.seq++
	run = proto.Clone(run).(*agentv1.Run)
	run.UpdatedUnixMilli = a.seq
	a.runs[run.GetId()] = run
	a.mu.Unlock()
	if publish {
		data, _ := proto.Marshal(run)
		_ = a.c.NATS().Publish(a.c.Subject("agent", "run", "event", run.GetId()), data)
	}
	return run
}

// step moves run id along (its current record changed by fn) and publishes it.
func (a *fakeAgent) step(t *testing.T, id string, publish bool, fn func(*agentv1.Run)) {
	t.Helper()
	cur, err := a.get(context.Background(), &agentv1.GetRunRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	fn(cur)
	a.update(cur, publish)
}

func (a *fakeAgent) nextStart(t *testing.T) *agentv1.StartRunRequest {
	t.Helper()
	select {
	case r := <-a.starts:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no sov.agent.run.start arrived")
	}
	return nil
}

func (a *fakeAgent) nextCancel(t *testing.T) *agentv1.CancelRunRequest {
	t.Helper()
	select {
	case r := <-a.cancels:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no sov.agent.run.cancel arrived")
	}
	return nil
}

// progressLog collects an MCP client's progress notifications.
type progressLog struct {
	mu   sync.Mutex
	got  []map[string]any
	more chan struct{}
}

func watchProgress(c *client.Client) *progressLog {
	p := &progressLog{more: make(chan struct{}, 1)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		p.mu.Lock()
		p.got = append(p.got, n.Params.AdditionalFields)
		p.mu.Unlock()
		select {
		case p.more <- struct{}{}:
		default:
		}
	})
	return p
}

// await waits for a progress notification saying message.
func (p *progressLog) await(t *testing.T, message string) {
	t.Helper()
	p.awaitMatch(t, fmt.Sprintf("%q", message), func(m string) bool { return m == message })
}

// awaitContaining waits for a progress notification whose message holds
// part.
func (p *progressLog) awaitContaining(t *testing.T, part string) {
	t.Helper()
	p.awaitMatch(t, fmt.Sprintf("with %q", part), func(m string) bool { return strings.Contains(m, part) })
}

// awaitMatch waits for a progress notification whose message matches.
func (p *progressLog) awaitMatch(t *testing.T, what string, match func(message string) bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		for _, n := range p.got {
			if m, _ := n["message"].(string); match(m) {
				p.mu.Unlock()
				return
			}
		}
		got := fmt.Sprint(p.got)
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-timeout:
			t.Fatalf("no progress notification %s; got %s", what, got)
		}
	}
}

// asyncCall runs a tool call in the background.
func asyncCall(ctx context.Context, c *client.Client, name string, args map[string]any, token string) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		if token != "" {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			res = mcp.NewToolResultError("protocol error: " + err.Error())
		}
		out <- res
	}()
	return out
}

func awaitResult(t *testing.T, ch <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(90 * time.Second):
		t.Fatal("the call did not return")
	}
	return nil
}

var runIDPattern = regexp.MustCompile(`^r_[0-9A-Za-z]{22}$`)

// TestRunBrowserTask: run_browser_task through mcp-go clients against a
// real gateway and worker, with a stand-in agent service.
func TestRunBrowserTask(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 4)
	url := startGateway(t, srv, gateway.Config{})

	t.Run("bad arguments", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		for _, tt := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{}, `argument "task" is required`},
			{map[string]any{"task": "  "}, `argument "task" must not be empty`},
			{map[string]any{"task": "x", "max_iterations": 0}, `argument "max_iterations" must be at least 1`},
			{map[string]any{"task": "x", "max_iterations": 1001}, `argument "max_iterations" must be at most 1000`},
			{map[string]any{"task": strings.Repeat("x", 32<<10+1)}, `argument "task" is 32769 characters long`},
		} {
			if res := callTool(t, c, "run_browser_task", tt.args); !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("run_browser_task(%.60v) = %q, want an error containing %q", tt.args, text(res), tt.want)
			}
		}
	})

	t.Run("no agent service", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		res := callTool(t, c, "run_browser_task", map[string]any{"task": "find the title"})
		if !res.IsError || !strings.Contains(text(res), "run_browser_task needs the agent service, and none is running") {
			t.Fatalf("run_browser_task without an agent = %q", text(res))
		}
	})

	a := startFakeAgent(t, srv)
	site := startSite(t)

	t.Run("progress and the answer (2025 client)", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		mustOK(t, callTool(t, c, "open", map[string]any{"url": site}), "open")
		progress := watchProgress(c)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		call := asyncCall(ctx, c, "run_browser_task", map[string]any{"task": "what is the title?", "max_iterations": 7}, "task-1")
		start := a.nextStart(t)
		id := start.GetId()
		if !runIDPattern.MatchString(id) || start.GetMessage() != "what is the title?" || start.GetMaxIterations() != 7 ||
			start.GetSession() != "mcp:"+c.GetSessionId() || start.GetChatId() != "" {
			t.Errorf("start request = %v; want the task, the cap, and the MCP session's browser session", start)
		}
		if cl := start.GetCaller(); cl.GetKind() != gateway.KindAnonymous || cl.GetId() != gateway.Anonymous || cl.GetName() != gateway.Anonymous {
			t.Errorf("start request caller = %v", cl)
		}
		progress.await(t, "agent run "+id+" started")
		a.step(t, id, true, func(r *agentv1.Run) { r.State, r.Iteration = agentv1.RunState_RUN_STATE_THINKING, 1 })
		progress.await(t, "iteration 1/7: thinking")
		a.step(t, id, true, func(r *agentv1.Run) { r.State, r.CurrentTool = agentv1.RunState_RUN_STATE_TOOL_CALL, "get_title" })
		progress.await(t, "iteration 1/7: get_title")
		a.step(t, id, true, func(r *agentv1.Run) {
			r.State, r.CurrentTool, r.Iteration, r.ToolCalls = agentv1.RunState_RUN_STATE_THINKING, "", 2, 1
		})
		progress.await(t, "iteration 2/7: thinking")
		a.step(t, id, true, func(r *agentv1.Run) {
			r.State, r.FinalAnswer = agentv1.RunState_RUN_STATE_COMPLETE, "The title is Sovereign test."
		})
		res := awaitResult(t, call)
		if res.IsError || text(res) != "The title is Sovereign test." {
			t.Fatalf("run_browser_task = %q (isError %v)", text(res), res.IsError)
		}
		s := structured(t, res)
		if s["run_id"] != id || s["chat_id"] != "chat-"+id || s["state"] != "complete" || s["iterations"] != 2.0 || s["tool_calls"] != 1.0 {
			t.Errorf("structured content = %v", s)
		}
		progress.mu.Lock()
		defer progress.mu.Unlock()
		last := -1.0
		for _, n := range progress.got {
			v, _ := n["progress"].(float64)
			if n["progressToken"] != "task-1" || v <= last || n["total"] != 7.0 {
				t.Errorf("progress notification %v after progress %v: want token task-1, growing progress, total 7", n, last)
			}
			last = v
		}
	})

	t.Run("failed run, new handle and token caller (2026 client)", func(t *testing.T) {
		auth, tok := newToken(t, srv, tokens.Spec{Name: "alice"})
		awaitStatus(t, url, auth, http.StatusOK)
		c := modernClient(t, url, map[string]string{"Authorization": auth})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		call := asyncCall(ctx, c, "run_browser_task", map[string]any{"task": "do it", "chat_id": "chat-42"}, "")
		start := a.nextStart(t)
		if !strings.HasPrefix(start.GetSession(), "sov_") || start.GetChatId() != "chat-42" || start.GetMaxIterations() != 0 {
			t.Errorf("start request = %v; want a new handle and the chat", start)
		}
		if cl := start.GetCaller(); cl.GetKind() != gateway.KindToken || cl.GetId() != owner(tok) || cl.GetName() != "alice" {
			t.Errorf("start request caller = %v", cl)
		}
		a.step(t, start.GetId(), true, func(r *agentv1.Run) {
			r.State, r.Iteration, r.Error = agentv1.RunState_RUN_STATE_ERROR, 3, "the model provider answered 401: check the API key"
		})
		res := awaitResult(t, call)
		want := "run_browser_task: agent run " + start.GetId() + " failed: the model provider answered 401: check the API key"
		if !res.IsError || !strings.Contains(text(res), want) {
			t.Fatalf("run_browser_task of a failed run = %q, want %q", text(res), want)
		}
		if metaSession(res) != start.GetSession() || structured(t, res)["state"] != "error" {
			t.Errorf("result names session %q and %v; want the run's handle %q and state error", metaSession(res), res.StructuredContent, start.GetSession())
		}
		// The handle is the client's: its browser session is the run's.
		mustOK(t, callTool(t, c, "get_url", map[string]any{"session": start.GetSession()}), "get_url with the run's handle")
	})

	t.Run("a missed event is polled", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		call := asyncCall(ctx, c, "run_browser_task", map[string]any{"task": "quietly"}, "")
		start := a.nextStart(t)
		a.step(t, start.GetId(), false, func(r *agentv1.Run) { // no event
			r.State, r.Iteration, r.FinalAnswer = agentv1.RunState_RUN_STATE_COMPLETE, 1, "done without events"
		})
		if res := awaitResult(t, call); res.IsError || text(res) != "done without events" {
			t.Fatalf("run_browser_task = %q (isError %v)", text(res), res.IsError)
		}
	})

	t.Run("cancelling the MCP request cancels the run", func(t *testing.T) {
		c := legacyClient(t, url, nil)
		progress := watchProgress(c)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		call := asyncCall(ctx, c, "run_browser_task", map[string]any{"task": "a long one"}, "task-2")
		start := a.nextStart(t)
		a.step(t, start.GetId(), true, func(r *agentv1.Run) { r.State, r.Iteration = agentv1.RunState_RUN_STATE_THINKING, 1 })
		progress.await(t, "iteration 1/100: thinking")
		cancel()
		got := a.nextCancel(t)
		if got.GetId() != start.GetId() || got.GetBy() != "mcp client" {
			t.Errorf("cancel request = %v; want run %s by mcp client", got, start.GetId())
		}
		awaitResult(t, call)
	})

	t.Run("task timeout", func(t *testing.T) {
		short := startGateway(t, srv, gateway.Config{AgentConfig: gateway.AgentConfig{TaskTimeout: 2 * time.Second}})
		c := legacyClient(t, short, nil)
		res := asyncCall(context.Background(), c, "run_browser_task", map[string]any{"task": "never ends"}, "")
		start := a.nextStart(t)
		got := a.nextCancel(t)
		if got.GetId() != start.GetId() || got.GetBy() != "run_browser_task timeout" {
			t.Errorf("cancel request = %v; want run %s by the timeout", got, start.GetId())
		}
		want := "run_browser_task did not finish within 2s (the gateway's --task-timeout); agent run " + start.GetId() + " was cancelled"
		if r := awaitResult(t, res); !r.IsError || text(r) != want {
			t.Errorf("run_browser_task past its timeout = %q, want %q", text(r), want)
		}
	})
}

// TestTaskTimeoutConfig: --task-timeout is bounded.
func TestTaskTimeoutConfig(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Millisecond, 25 * time.Hour} {
		err := (gateway.Config{AgentConfig: gateway.AgentConfig{TaskTimeout: d}}).Validate()
		if err == nil || !strings.Contains(err.Error(), "--task-timeout: "+d.String()+" must be from 1s to 24h0m0s") {
			t.Errorf("TaskTimeout %s: %v", d, err)
		}
	}
}
