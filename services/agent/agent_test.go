package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func protoUnmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

// lastToolResult answers with what the last tool result said.
func lastToolResult(prefix string) llmtest.Step {
	return llmtest.Func(func(r llmtest.Request) llmtest.Step {
		res := r.ToolResults()
		if len(res) == 0 {
			return llmtest.Reply("no tool result")
		}
		return llmtest.Reply(prefix + res[len(res)-1].Content)
	})
}

func TestToolLoop(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		name := "stream"
		if !stream {
			name = "whole"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t,
				llmtest.Step{Text: "Let me echo twice.", ToolCalls: []llmtest.ToolCall{
					{Name: "echo", Arguments: `{"text":"hello"}`},
					{Name: "echo", Arguments: `{"text":"world","session":"sov_model_made_up"}`},
				}},
				llmtest.Call(llmtest.ToolCall{Name: "shot", Arguments: `{}`}),
				lastToolResult("done: "),
			)
			cfg := e.config()
			cfg.NoStream = !stream
			a := e.agent(cfg)
			events := e.events("r_loop")

			run := e.start(&agentv1.StartRunRequest{Id: "r_loop", Message: "Echo hello and world, then look."})
			if run.GetState() != agentv1.RunState_RUN_STATE_IDLE || run.GetChatId() == "" || run.GetReplica() != a.Owner() {
				t.Fatalf("start = %v", run)
			}
			run = e.wait("r_loop")
			if run.GetState() != agentv1.RunState_RUN_STATE_COMPLETE {
				t.Fatalf("state %s error %q", run.GetState(), run.GetError())
			}
			if want := "done: [image: image/png, 1234 bytes — not shown to the model]\nthe page"; run.GetFinalAnswer() != want {
				t.Errorf("final answer %q, want %q", run.GetFinalAnswer(), want)
			}
			if run.GetIteration() != 3 || run.GetToolCalls() != 3 || run.GetLastMessage() != run.GetFinalAnswer() || run.GetCurrentTool() != "" {
				t.Errorf("run = %v", run)
			}
			if run.GetTask() != "Echo hello and world, then look." || run.GetCallerName() != "test token" || run.GetMaxIterations() != DefaultMaxIterations {
				t.Errorf("run = %v", run)
			}

			reqs := e.llm.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			first := reqs[0]
			if first.Authorization != "" {
				t.Errorf("Authorization %q sent without an API key", first.Authorization)
			}
			if first.Stream != stream || first.Model != "test-model" || first.Temperature != nil {
				t.Errorf("request: stream %v model %q temperature %v", first.Stream, first.Model, first.Temperature)
			}
			if len(first.Messages) != 2 || first.Messages[0].Role != "system" || first.Messages[0].Content != "You are a test agent." ||
				first.Messages[1].Role != "user" || first.Messages[1].Content != "Echo hello and world, then look." {
				t.Errorf("first request messages = %+v", first.Messages)
			}
			var echo *llmtest.Tool
			for i, tl := range first.Tools {
				if tl.Name == "echo" {
					echo = &first.Tools[i]
				}
			}
			if len(first.Tools) != 5 || echo == nil {
				t.Fatalf("tools = %+v", first.Tools)
			}
			props, _ := echo.Parameters["properties"].(map[string]any)
			req, _ := echo.Parameters["required"].([]any)
			if _, has := props["session"]; has || props["text"] == nil || len(req) != 1 || req[0] != "text" || echo.Description != "Echo the text back." {
				t.Errorf("echo tool = %+v: want the schema without session", echo)
			}
			second := reqs[1]
			res := second.ToolResults()
			if len(res) != 2 || res[0].Content != "hello" || res[1].Content != "world" {
				t.Errorf("tool results sent to the model = %+v", res)
			}
			asst := second.Messages[len(second.Messages)-3]
			if asst.Role != "assistant" || asst.Content != "Let me echo twice." || len(asst.ToolCalls) != 2 ||
				asst.ToolCalls[0].ID != res[0].ToolCallID || asst.ToolCalls[1].Arguments != `{"text":"world","session":"sov_model_made_up"}` {
				t.Errorf("assistant message sent back = %+v", asst)
			}

			// The dispatcher saw the caller, the run, and the session the
			// first call opened on every later call.
			calls := e.tools.Calls()
			if len(calls) != 3 {
				t.Fatalf("%d tool calls, want 3", len(calls))
			}
			for i, c := range calls {
				if c.GetCaller().GetId() != "token:t1" || c.GetRunId() != "r_loop" {
					t.Errorf("call %d: caller %v run %q", i, c.GetCaller(), c.GetRunId())
				}
			}
			if calls[0].GetSession() != "" || calls[1].GetSession() != "sov_test" || calls[2].GetSession() != "sov_test" {
				t.Errorf("sessions %q %q %q, want \"\", sov_test, sov_test", calls[0].GetSession(), calls[1].GetSession(), calls[2].GetSession())
			}
			if calls[1].GetArgumentsJson() != `{"text":"world"}` {
				t.Errorf("arguments %s: want the model's session argument dropped", calls[1].GetArgumentsJson())
			}

			// The chat holds the whole exchange.
			msgs := e.hist.messages(run.GetChatId())
			var roles []string
			for _, m := range msgs {
				roles = append(roles, m.GetRole())
			}
			if strings.Join(roles, ",") != "user,assistant,tool,tool,assistant,tool,assistant" {
				t.Fatalf("chat roles = %v", roles)
			}
			var stored []toolCall
			if err := json.Unmarshal([]byte(msgs[1].GetToolCallsJson()), &stored); err != nil || len(stored) != 2 ||
				stored[0].Type != "function" || stored[0].Function.Name != "echo" || stored[0].ID != msgs[2].GetToolCallId() {
				t.Errorf("stored tool calls %s (%v)", msgs[1].GetToolCallsJson(), err)
			}
			if e.hist.chat(run.GetChatId()).GetTitle() != "Echo hello and world, then look." {
				t.Errorf("chat title %q", e.hist.chat(run.GetChatId()).GetTitle())
			}

			// Events: every state, in order, ending COMPLETE.
			ev := kittest.EventuallyValue(t, 30*time.Second, func() ([]*agentv1.Run, error) {
				ev := events()
				return ev, kittest.Check(len(ev) > 0 && terminal(ev[len(ev)-1].GetState()), "%d run events, none terminal", len(ev))
			})
			var states []agentv1.RunState
			for _, r := range ev {
				if len(states) == 0 || states[len(states)-1] != r.GetState() {
					states = append(states, r.GetState())
				}
			}
			want := []agentv1.RunState{agentv1.RunState_RUN_STATE_IDLE, agentv1.RunState_RUN_STATE_THINKING, agentv1.RunState_RUN_STATE_TOOL_CALL,
				agentv1.RunState_RUN_STATE_THINKING, agentv1.RunState_RUN_STATE_TOOL_CALL, agentv1.RunState_RUN_STATE_THINKING, agentv1.RunState_RUN_STATE_COMPLETE}
			if !slices.Equal(states, want) {
				t.Errorf("event states %v, want %v", states, want)
			}
		})
	}
}

func TestIterationCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.llm.SetDefault(llmtest.Step{Text: "still working", ToolCalls: []llmtest.ToolCall{{Name: "echo", Arguments: `{"text":"x"}`}}})
	a := e.agent(e.config())
	_ = a
	run := e.start(&agentv1.StartRunRequest{Message: "loop for ever", MaxIterations: 3})
	if run.GetMaxIterations() != 3 {
		t.Fatalf("max_iterations %d", run.GetMaxIterations())
	}
	run = e.wait(run.GetId())
	want := "Stopped after 3 iterations (the cap): still working"
	if run.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || run.GetFinalAnswer() != want || run.GetIteration() != 3 || run.GetToolCalls() != 3 {
		t.Fatalf("run = %v", run)
	}
	if n := len(e.llm.Requests()); n != 3 {
		t.Errorf("%d model requests, want 3", n)
	}
	msgs := e.hist.messages(run.GetChatId())
	if last := msgs[len(msgs)-1]; last.GetRole() != "assistant" || last.GetContent() != want {
		t.Errorf("last chat message = %v", last)
	}
}

func TestCancelWhileModelThinks(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	e := newEnv(t, llmtest.Step{Block: gate, Text: "never seen"})
	e.agent(e.config())
	run := e.start(&agentv1.StartRunRequest{Message: "think hard"})
	select {
	case <-gate.Entered():
	case <-time.After(time.Minute):
		t.Fatal("the model was never called")
	}
	got := e.cancel(run.GetId(), "tester")
	if !got.GetCancelRequested() {
		t.Errorf("cancel answered %v: want cancel_requested", got)
	}
	select {
	case <-gate.Cancelled():
	case <-time.After(time.Minute):
		t.Fatal("the model request in flight was not cancelled")
	}
	run = e.wait(run.GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_CANCELLED || run.GetError() != "cancelled by tester" || !run.GetCancelRequested() {
		t.Fatalf("run = %v", run)
	}
	// Cancelling an ended run returns it unchanged.
	if again := e.cancel(run.GetId(), "someone else"); !proto.Equal(again, run) {
		t.Errorf("cancel of an ended run = %v, want %v", again, run)
	}
}

func TestCancelDuringToolCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, llmtest.Call(llmtest.ToolCall{Name: "sleep", Arguments: `{"ms":600000}`}), llmtest.Reply("not reached"))
	e.agent(e.config())
	run := e.start(&agentv1.StartRunRequest{Message: "sleep"})
	e.waitFor(run.GetId(), func(r *agentv1.Run) bool { return r.GetState() == agentv1.RunState_RUN_STATE_TOOL_CALL })
	e.cancel(run.GetId(), "tester")
	select {
	case <-e.tools.interrupted:
	case <-time.After(time.Minute):
		t.Fatal("the tool call in flight was not cancelled")
	}
	run = e.wait(run.GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_CANCELLED || run.GetError() != "cancelled by tester" {
		t.Fatalf("run = %v", run)
	}
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

// A cancel whose notice never reached the owner (only the record says
// so) stops the run before its next tool call.
func TestCancelBetweenToolCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, llmtest.Call(
		llmtest.ToolCall{Name: "wait", Arguments: `{}`},
		llmtest.ToolCall{Name: "echo", Arguments: `{"text":"second"}`},
	), llmtest.Reply("not reached"))
	a := e.agent(e.config())
	run := e.start(&agentv1.StartRunRequest{Message: "two tools"})
	select {
	case <-e.tools.waiting:
	case <-time.After(time.Minute):
		t.Fatal("the wait tool was never called")
	}
	if _, err := a.updateRun(context.Background(), run.GetId(), func(r *agentv1.Run) error {
		r.CancelRequested, r.Error = true, cancelText("the record")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	close(e.tools.release)
	run = e.wait(run.GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_CANCELLED || run.GetError() != "cancelled by the record" || run.GetToolCalls() != 1 {
		t.Fatalf("run = %v", run)
	}
	for _, c := range e.tools.Calls() {
		if c.GetName() == "echo" {
			t.Error("the second tool was called after the cancel")
		}
	}
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

func TestMalformedToolCalls(t *testing.T) {
	t.Parallel()
	var seen []string
	expect := func(next llmtest.Step) llmtest.Step {
		return llmtest.Func(func(r llmtest.Request) llmtest.Step {
			for _, m := range r.ToolResults() {
				seen = append(seen, m.Content)
			}
			return next
		})
	}
	e := newEnv(t,
		llmtest.Call(llmtest.ToolCall{Name: "nope", Arguments: `{}`}),
		expect(llmtest.Call(llmtest.ToolCall{Name: "echo", Arguments: `[1,2]`}, llmtest.ToolCall{Name: "echo", Arguments: `{"text":`})),
		expect(llmtest.Call(llmtest.ToolCall{Name: "fail", Arguments: ``})),
		expect(llmtest.Reply("recovered")),
	)
	e.agent(e.config())
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "be sloppy"}).GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || run.GetFinalAnswer() != "recovered" || run.GetToolCalls() != 4 {
		t.Fatalf("run = %v", run)
	}
	if len(seen) != 4 {
		t.Fatalf("tool results %q", seen)
	}
	for i, want := range []string{
		`error: there is no tool named "nope"; the tools are: echo, fail, shot, sleep, wait`,
		"error: the arguments of echo must be a JSON object (got [1,2])",
		"error: the arguments of echo must be a JSON object (got {\"text\":)",
		"error: it broke",
	} {
		if !strings.HasPrefix(seen[i], want) {
			t.Errorf("tool result %d = %q, want it to start with %q", i, seen[i], want)
		}
	}
	if n := len(e.tools.Calls()); n != 1 {
		t.Errorf("%d calls reached the dispatcher, want 1 (fail)", n)
	}
}

func TestToolTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, llmtest.Call(llmtest.ToolCall{Name: "sleep", Arguments: `{"ms":600000}`}), lastToolResult("model saw: "))
	cfg := e.config()
	cfg.ToolTimeout = 300 * time.Millisecond
	e.agent(cfg)
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "sleep long"}).GetId())
	want := "model saw: error: sleep did not finish within the tool timeout (300ms)"
	if run.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || run.GetFinalAnswer() != want {
		t.Fatalf("run = %v, want final %q", run, want)
	}
}

func TestModelTimeout(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e := newEnv(t, llmtest.Step{Block: gate})
	cfg := e.config()
	cfg.LLMTimeout = 300 * time.Millisecond
	e.agent(cfg)
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "slow model"}).GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_ERROR ||
		!strings.HasPrefix(run.GetError(), "the model did not answer within the LLM timeout (300ms, SOVEREIGN_LLM_TIMEOUT)") {
		t.Fatalf("run = %v", run)
	}
}

func TestModelErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		steps    []llmtest.Step
		def      *llmtest.Step
		state    agentv1.RunState
		want     string // the error, or the final answer
		requests int
	}{
		{name: "500 then success", steps: []llmtest.Step{llmtest.FailRetryAfter(500, "boom", "0"), llmtest.Reply("fine")},
			state: agentv1.RunState_RUN_STATE_COMPLETE, want: "fine", requests: 2},
		{name: "502 text body then success", steps: []llmtest.Step{{Status: 502, Body: "bad gateway", RetryAfter: "0"}, llmtest.Reply("fine")},
			state: agentv1.RunState_RUN_STATE_COMPLETE, want: "fine", requests: 2},
		{name: "429 always", def: ptr(llmtest.FailRetryAfter(429, "Rate limit reached; slow down", "0")),
			state: agentv1.RunState_RUN_STATE_ERROR, want: "the model provider answered 429 Too Many Requests after 4 attempts: Rate limit reached; slow down", requests: 4},
		{name: "503 text always", def: &llmtest.Step{Status: 503, Body: "upstream down", RetryAfter: "0"},
			state: agentv1.RunState_RUN_STATE_ERROR, want: "the model provider answered 503 Service Unavailable after 4 attempts: upstream down", requests: 4},
		{name: "401", steps: []llmtest.Step{llmtest.Fail(401, "Incorrect API key provided: sk-tes************2345")},
			state: agentv1.RunState_RUN_STATE_ERROR, want: "the model provider refused the API key (401 Unauthorized): Incorrect API key provided: sk-tes************2345; check the key in the chat settings or SOVEREIGN_LLM_API_KEY", requests: 1},
		{name: "404", steps: []llmtest.Step{llmtest.Fail(404, "The model `test-model` does not exist")},
			state: agentv1.RunState_RUN_STATE_ERROR, want: `the model provider answered 404 Not Found: unknown model "test-model", or the base URL`, requests: 1},
		{name: "400", steps: []llmtest.Step{llmtest.Fail(400, "messages: bad")},
			state: agentv1.RunState_RUN_STATE_ERROR, want: "the model provider rejected the request (400 Bad Request): messages: bad", requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.steps...)
			if tc.def != nil {
				e.llm.SetDefault(*tc.def)
			}
			e.agent(e.config())
			run := e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
			got := run.GetError()
			if tc.state == agentv1.RunState_RUN_STATE_COMPLETE {
				got = run.GetFinalAnswer()
			}
			if run.GetState() != tc.state || !strings.HasPrefix(got, tc.want) {
				t.Errorf("run %s %q, want %s %q", run.GetState(), got, tc.state, tc.want)
			}
			if n := len(e.llm.Requests()); n != tc.requests {
				t.Errorf("%d model requests, want %d", n, tc.requests)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestModelUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	e.llm.Close()
	cfg.LLMRetries = -1
	e.agent(cfg)
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_ERROR || !strings.HasPrefix(run.GetError(), "the model provider at "+e.llm.URL+" is not reachable after 1 attempt") {
		t.Fatalf("run = %v", run)
	}
}

func TestNoProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.BaseURL = ""
	e.agent(cfg)
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_ERROR || run.GetError() != ErrNoProvider {
		t.Fatalf("run = %v", run)
	}
}

func TestStartRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent(e.config())
	for _, tc := range []struct {
		name string
		req  *agentv1.StartRunRequest
		code commonv1.ErrorCode
		want string
	}{
		{"empty message", &agentv1.StartRunRequest{Message: "  ", Caller: testCaller}, commonv1.ErrorCode_INVALID_ARGUMENT, "message is required"},
		{"no caller", &agentv1.StartRunRequest{Message: "hi"}, commonv1.ErrorCode_INVALID_ARGUMENT, "caller is required"},
		{"cap too high", &agentv1.StartRunRequest{Message: "hi", Caller: testCaller, MaxIterations: 1001}, commonv1.ErrorCode_INVALID_ARGUMENT, "max_iterations 1001: must be 1 to 1000"},
		{"bad id", &agentv1.StartRunRequest{Id: "a.b", Message: "hi", Caller: testCaller}, commonv1.ErrorCode_INVALID_ARGUMENT, `run id "a.b"`},
		{"unknown chat", &agentv1.StartRunRequest{ChatId: "nope", Message: "hi", Caller: testCaller}, commonv1.ErrorCode_NOT_FOUND, `no chat "nope"`},
		{"long message", &agentv1.StartRunRequest{Message: strings.Repeat("x", MaxMessage+1), Caller: testCaller}, commonv1.ErrorCode_INVALID_ARGUMENT, "message is 100001 characters; at most 100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.startErr(tc.req)
			if !bus.Is(err, tc.code) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("start: %v (%s), want %s %q", err, bus.CodeOf(err), tc.code, tc.want)
			}
		})
	}
	// A taken id.
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e.llm.Script(llmtest.Step{Block: gate, Text: "ok"})
	e.start(&agentv1.StartRunRequest{Id: "r_taken", Message: "hi"})
	if err := e.startErr(&agentv1.StartRunRequest{Id: "r_taken", Message: "hi", Caller: testCaller}); !bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) || !strings.Contains(err.Error(), "is taken") {
		t.Errorf("second start with the same id: %v", err)
	}
	// History down: a new chat cannot be made.
	e.hist.down(t)
	if err := e.startErr(&agentv1.StartRunRequest{Message: "hi", Caller: testCaller}); !bus.Is(err, commonv1.ErrorCode_UNAVAILABLE) || !strings.Contains(err.Error(), "chat history is not reachable") {
		t.Errorf("start without history: %v", err)
	}
}

func TestHistoryFollowUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, llmtest.Reply("Noted: 42."))
	e.agent(e.config())
	first := e.wait(e.start(&agentv1.StartRunRequest{Message: "Remember the number 42."}).GetId())
	if first.GetState() != agentv1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("first run = %v", first)
	}
	e.llm.Script(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		for _, m := range r.Messages {
			if m.Role == "assistant" && strings.Contains(m.Content, "42") {
				return llmtest.Reply("It was 42.")
			}
		}
		return llmtest.Reply("I do not know.")
	}))
	second := e.wait(e.start(&agentv1.StartRunRequest{ChatId: first.GetChatId(), Message: "Which number?"}).GetId())
	if second.GetChatId() != first.GetChatId() || second.GetFinalAnswer() != "It was 42." {
		t.Fatalf("second run = %v", second)
	}
	req := e.llm.Requests()[1]
	var got []string
	for _, m := range req.Messages {
		got = append(got, m.Role+": "+m.Content)
	}
	want := []string{"system: You are a test agent.", "user: Remember the number 42.", "assistant: Noted: 42.", "user: Which number?"}
	if !slices.Equal(got, want) {
		t.Errorf("second request messages %q, want %q", got, want)
	}
	if n := len(e.hist.messages(first.GetChatId())); n != 4 {
		t.Errorf("chat has %d messages, want 4", n)
	}

	// History going away mid-chat ends a run with a clear error.
	e.hist.down(t)
	e.llm.Script(llmtest.Reply("x"))
	var run agentv1.Run
	err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "start"),
		&agentv1.StartRunRequest{ChatId: first.GetChatId(), Message: "again", Caller: testCaller}, &run)
	if !bus.Is(err, commonv1.ErrorCode_UNAVAILABLE) || !strings.Contains(err.Error(), "history") {
		t.Errorf("start with history down: %v", err)
	}
}

func TestMaxRuns(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e := newEnv(t, llmtest.Step{Block: gate, Text: "one"})
	cfg := e.config()
	cfg.MaxRuns = 1
	e.agent(cfg)
	first := e.start(&agentv1.StartRunRequest{Message: "first"})
	err := e.startErr(&agentv1.StartRunRequest{Message: "second", Caller: testCaller})
	if !bus.Is(err, commonv1.ErrorCode_NO_CAPACITY) || !strings.Contains(err.Error(), "SOVEREIGN_AGENT_MAX_RUNS=1") {
		t.Fatalf("second start: %v, want NO_CAPACITY naming the limit", err)
	}
	gate.Release()
	if r := e.wait(first.GetId()); r.GetFinalAnswer() != "one" {
		t.Fatalf("first run = %v", r)
	}
	e.llm.Script(llmtest.Reply("two"))
	// The slot is free once the run is recorded as ended.
	if err := e.startErr(&agentv1.StartRunRequest{Id: "r_second", Message: "second", Caller: testCaller}); err != nil {
		t.Fatalf("start after the first ended: %v", err)
	}
	if r := e.wait("r_second"); r.GetFinalAnswer() != "two" {
		t.Errorf("second run = %v", r)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e := newEnv(t, llmtest.Reply("a"), llmtest.Reply("b"), llmtest.Step{Block: gate, Text: "c"})
	e.agent(e.config())
	r1 := e.wait(e.start(&agentv1.StartRunRequest{Id: "r_1", Message: "one"}).GetId())
	r2 := e.wait(e.start(&agentv1.StartRunRequest{Id: "r_2", ChatId: r1.GetChatId(), Message: "two"}).GetId())
	r3 := e.start(&agentv1.StartRunRequest{Id: "r_3", Message: "three"})
	list := func(req *agentv1.ListRunsRequest) []string {
		var resp agentv1.ListRunsResponse
		if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "list"), req, &resp); err != nil {
			t.Fatalf("list %v: %v", req, err)
		}
		var ids []string
		for _, r := range resp.GetRuns() {
			ids = append(ids, r.GetId())
		}
		return ids
	}
	if got := list(&agentv1.ListRunsRequest{}); !slices.Equal(got, []string{"r_3", "r_2", "r_1"}) {
		t.Errorf("list = %v", got)
	}
	if got := list(&agentv1.ListRunsRequest{ChatId: r2.GetChatId()}); !slices.Equal(got, []string{"r_2", "r_1"}) {
		t.Errorf("list of the chat = %v", got)
	}
	if got := list(&agentv1.ListRunsRequest{ActiveOnly: true}); !slices.Equal(got, []string{r3.GetId()}) {
		t.Errorf("active runs = %v", got)
	}
	if got := list(&agentv1.ListRunsRequest{Limit: 1}); !slices.Equal(got, []string{"r_3"}) {
		t.Errorf("limit 1 = %v", got)
	}
	var resp agentv1.ListRunsResponse
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "list"), &agentv1.ListRunsRequest{Limit: 501}, &resp); !bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) {
		t.Errorf("limit 501: %v", err)
	}
	var run agentv1.Run
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "get"), &agentv1.GetRunRequest{Id: "r_none"}, &run); !bus.Is(err, commonv1.ErrorCode_NOT_FOUND) {
		t.Errorf("get of an unknown run: %v", err)
	}
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "run", "cancel"), &agentv1.CancelRunRequest{Id: "r_none"}, &run); !bus.Is(err, commonv1.ErrorCode_NOT_FOUND) {
		t.Errorf("cancel of an unknown run: %v", err)
	}
}

// An agent that comes back under the same name ends the runs of its
// previous life; any replica ends the runs of a replica whose heartbeat
// stopped.
func TestRestartRecovery(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e := newEnv(t, llmtest.Step{Block: gate, Text: "never"})
	cfg := e.config()
	first := e.agent(cfg)
	run := e.start(&agentv1.StartRunRequest{Message: "long task"})
	select {
	case <-gate.Entered():
	case <-time.After(time.Minute):
		t.Fatal("the model was never called")
	}
	// The first agent dies: its connection is gone, its loop can write
	// nothing more.
	first.bus.NATS().Close()
	if r := e.record(run.GetId()); r.GetState() != agentv1.RunState_RUN_STATE_THINKING {
		t.Fatalf("run before the restart = %v", r)
	}
	second := e.agent(cfg)
	if second.Owner() == first.Owner() {
		t.Fatal("same incarnation twice")
	}
	r := e.get(run.GetId())
	if r.GetState() != agentv1.RunState_RUN_STATE_ERROR || r.GetError() != ErrAgentRestarted {
		t.Fatalf("run after the restart = %v", r)
	}
	if _, err := second.kv.Get(context.Background(), keyActivePrefix+run.GetId()); err == nil {
		t.Error("active key left behind")
	}

	// Runs of another replica: one whose heartbeat is stale, one with
	// none at all, one alive.
	ctx := context.Background()
	old := time.Now().Add(-time.Minute).UnixMilli()
	put := func(id, owner string) {
		b, _ := encodeRun(&agentv1.Run{Id: id, State: agentv1.RunState_RUN_STATE_THINKING, Replica: owner, CreatedUnixMilli: old})
		if _, err := second.kv.Put(ctx, keyRunPrefix+id, b); err != nil {
			t.Fatal(err)
		}
		if _, err := second.kv.Put(ctx, keyActivePrefix+id, []byte(owner)); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(name, inc string, at int64) {
		b, _ := json.Marshal(heartbeat{Incarnation: inc, UnixMilli: at})
		if _, err := second.kv.Put(ctx, keyReplicaPrefix+name, b); err != nil {
			t.Fatal(err)
		}
	}
	put("r_stale", "stale/aaaa")
	beat("stale", "aaaa", old)
	put("r_missing", "ghost/bbbb")
	put("r_alive", "alive/cccc")
	beat("alive", "cccc", time.Now().UnixMilli())
	put("r_reborn", "alive/old1") // "alive" restarted: its heartbeat names another incarnation
	second.recover(ctx)
	for id, want := range map[string]agentv1.RunState{
		"r_stale": agentv1.RunState_RUN_STATE_ERROR, "r_missing": agentv1.RunState_RUN_STATE_ERROR,
		"r_alive": agentv1.RunState_RUN_STATE_THINKING, "r_reborn": agentv1.RunState_RUN_STATE_ERROR,
	} {
		r := e.get(id)
		if r.GetState() != want || (want == agentv1.RunState_RUN_STATE_ERROR && r.GetError() != ErrAgentRestarted) {
			t.Errorf("%s after the scan = %v, want %s", id, r, want)
		}
	}
}

func TestGracefulCloseEndsRuns(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	t.Cleanup(gate.Release)
	e := newEnv(t, llmtest.Step{Block: gate, Text: "never"})
	a := e.agent(e.config())
	run := e.start(&agentv1.StartRunRequest{Message: "long task"})
	<-gate.Entered()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := e.record(run.GetId())
	if r.GetState() != agentv1.RunState_RUN_STATE_ERROR || r.GetError() != errTextShutdown {
		t.Fatalf("run after Close = %v", r)
	}
}
