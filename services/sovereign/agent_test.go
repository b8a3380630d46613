package sovereign

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// The full-stack agent tests: `sovereign up` in-process (embedded NATS,
// gateway with its dispatcher, a real Chromium worker, history on SQLite,
// the agent) against a scripted OpenAI-compatible server. Only the model
// is scripted; every tool call goes through the gateway to the browser.

// consoleCaller is who the runs of these tests act for.
var consoleCaller = &toolsv1.Caller{Kind: "console", Id: "console", Name: "console"}

// startAgentUp runs `sovereign up` with the agent pointed at llm.
func startAgentUp(t *testing.T, llm *llmtest.Server, extra ...string) (listen string, c *bus.Conn, dir string) {
	t.Helper()
	listen, natsListen, dir := startUp(t, append([]string{"--llm-base-url", llm.URL, "--llm-model", "scripted",
		"--system-tools", "agent"}, extra...)...)
	nc, err := nats.Connect("nats://" + natsListen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err = bus.New(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	return listen, c, dir
}

func startRun(t *testing.T, c *bus.Conn, req *agentv1.StartRunRequest) *agentv1.Run {
	t.Helper()
	if req.Caller == nil {
		req.Caller = consoleCaller
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := &agentv1.Run{}
	if err := c.Request(ctx, c.Subject("agent", "run", "start"), req, run); err != nil {
		t.Fatalf("start run: %v", err)
	}
	return run
}

func getRun(t *testing.T, c *bus.Conn, id string) *agentv1.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := &agentv1.Run{}
	if err := c.Request(ctx, c.Subject("agent", "run", "get"), &agentv1.GetRunRequest{Id: id}, run); err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	return run
}

func ended(s agentv1.RunState) bool {
	return s == agentv1.RunState_RUN_STATE_COMPLETE || s == agentv1.RunState_RUN_STATE_ERROR || s == agentv1.RunState_RUN_STATE_CANCELLED
}

// waitRun polls the run until it ends.
func waitRun(t *testing.T, c *bus.Conn, id string) *agentv1.Run {
	t.Helper()
	return kittest.EventuallyValue(t, 3*time.Minute, func() (*agentv1.Run, error) {
		run := getRun(t, c, id)
		return run, kittest.Check(ended(run.GetState()), "run %s has not ended: %v", id, run)
	})
}

func call(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

// linkPattern finds the link targets in a snapshot ("- /url: …").
var linkPattern = regexp.MustCompile(`/url: (\S+)`)

// TestAgentSavesLinks is the seed's example: "save the links of this page
// to links.txt". The scripted model opens the page, snapshots it, reads
// the links out of the real snapshot and writes them with fs_write; the
// file in the workspace must hold exactly the page's links. A follow-up
// message in the same chat sees the first exchange (history).
func TestAgentSavesLinks(t *testing.T) {
	t.Parallel()
	want := []string{"https://example.org/a", "https://example.net/b?x=1", "https://example.com/c#top"}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>Links</title><h1>Three links</h1><ul>`)
		for i, u := range want {
			fmt.Fprintf(w, `<li><a href="%s">link %d</a></li>`, u, i+1)
		}
		fmt.Fprint(w, `</ul><p>Not a link: https://example.invalid/no</p>`)
	}))
	defer site.Close()

	llm := llmtest.New(t,
		llmtest.Call(call("open", map[string]any{"url": site.URL})),
		llmtest.Call(call("snapshot", map[string]any{})),
		llmtest.Func(func(r llmtest.Request) llmtest.Step {
			res := r.ToolResults()
			if len(res) != 1 {
				return llmtest.Reply(fmt.Sprintf("expected one snapshot result, got %d", len(res)))
			}
			var links []string
			for _, m := range linkPattern.FindAllStringSubmatch(res[0].Content, -1) {
				links = append(links, m[1])
			}
			return llmtest.Call(call("fs_write", map[string]any{"path": "links.txt", "content": strings.Join(links, "\n") + "\n"}))
		}),
		llmtest.Reply("Saved the page's links to links.txt."),
	)
	_, c, dir := startAgentUp(t, llm)

	run := startRun(t, c, &agentv1.StartRunRequest{Message: "Save the links of " + site.URL + " to links.txt"})
	done := waitRun(t, c, run.GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || done.GetFinalAnswer() != "Saved the page's links to links.txt." {
		t.Fatalf("run ended %v", done)
	}
	if done.GetToolCalls() != 3 || done.GetIteration() != 4 {
		t.Errorf("run made %d tool calls in %d iterations; want 3 in 4", done.GetToolCalls(), done.GetIteration())
	}
	got, err := os.ReadFile(filepath.Join(dir, "workspace", "links.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strings.Join(want, "\n")+"\n" {
		t.Fatalf("links.txt = %q; want the page's links %q", got, want)
	}

	// The model saw the catalog as OpenAI tools, from the same source as
	// MCP, with the system tools (mode "agent") and without the session
	// argument or run_browser_task.
	first := llm.Requests()[0]
	names := map[string]bool{}
	for _, tool := range first.Tools {
		names[tool.Name] = true
		if props, _ := tool.Parameters["properties"].(map[string]any); props["session"] != nil {
			t.Errorf("tool %s offers the session argument to the model", tool.Name)
		}
	}
	for _, n := range []string{"open", "snapshot", "click", "fs_write", "shell_exec"} {
		if !names[n] {
			t.Errorf("the model was not offered %s (got %d tools)", n, len(first.Tools))
		}
	}
	if names["run_browser_task"] {
		t.Error("the model was offered run_browser_task (a run could start runs)")
	}

	// A follow-up continues the chat with its history.
	llm.Script(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		var seen []string
		for _, m := range r.Messages {
			seen = append(seen, m.Role)
		}
		return llmtest.Reply(fmt.Sprintf("%d messages: %s", len(r.Messages), strings.Join(seen, ",")))
	}))
	follow := startRun(t, c, &agentv1.StartRunRequest{ChatId: done.GetChatId(), Message: "How many were there?"})
	fdone := waitRun(t, c, follow.GetId())
	// system, user, 3×(assistant tool call, tool result), assistant, user
	if fdone.GetFinalAnswer() != "10 messages: system,user,assistant,tool,assistant,tool,assistant,tool,assistant,user" {
		t.Fatalf("the follow-up saw %q", fdone.GetFinalAnswer())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	chat := &historyv1.GetChatSessionResponse{}
	if err := c.Request(ctx, c.Subject("history", "chat", "get"), &historyv1.GetChatSessionRequest{Id: done.GetChatId()}, chat); err != nil {
		t.Fatal(err)
	}
	if n := len(chat.GetMessages()); n != 10 {
		t.Errorf("the chat store holds %d messages; want 10 (two user messages, two answers, three tool calls and their results)", n)
	}
}

// TestAgentCapAndMalformedCalls: malformed tool calls go back to the model
// as tool errors and the run goes on; the iteration cap ends the run with a
// message saying so. Whole (non-streamed) replies.
func TestAgentCapAndMalformedCalls(t *testing.T) {
	t.Parallel()
	llm := llmtest.New(t,
		llmtest.Call(llmtest.ToolCall{Name: "no_such_tool", Arguments: `{}`}),
		llmtest.Call(llmtest.ToolCall{Name: "get_url", Arguments: `not json`}),
		llmtest.Call(llmtest.ToolCall{Name: "open", Arguments: `{"url": 5}`}),
	)
	llm.SetDefault(llmtest.Call(call("get_title", map[string]any{})))
	_, c, _ := startAgentUp(t, llm, "--llm-stream=false")

	run := startRun(t, c, &agentv1.StartRunRequest{Message: "loop", MaxIterations: 6})
	done := waitRun(t, c, run.GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || !strings.Contains(done.GetFinalAnswer(), "6 iterations") {
		t.Fatalf("run ended %v; want COMPLETE saying it stopped at the cap of 6", done)
	}
	reqs := llm.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d model calls; want 6 (the cap)", len(reqs))
	}
	for i, want := range []string{"no_such_tool", "must be a JSON object", "url"} {
		res := reqs[i+1].ToolResults()
		if len(res) != 1 || !strings.Contains(res[0].Content, "error") || !strings.Contains(res[0].Content, want) {
			t.Errorf("model call %d got tool results %+v; want an error naming %q", i+2, res, want)
		}
	}
	if reqs[0].Stream {
		t.Error("--llm-stream=false still streamed")
	}
}

// TestAgentCancel: a run cancelled while the model thinks stops at once
// (the model request is given up) and ends CANCELLED.
func TestAgentCancel(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	defer gate.Release()
	llm := llmtest.New(t,
		llmtest.Call(call("get_url", map[string]any{})),
		llmtest.Step{Block: gate, Text: "too late"},
	)
	_, c, _ := startAgentUp(t, llm)
	run := startRun(t, c, &agentv1.StartRunRequest{Message: "wait"})
	select {
	case <-gate.Entered():
	case <-time.After(2 * time.Minute):
		t.Fatalf("the run never reached its second model call: %v", getRun(t, c, run.GetId()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Request(ctx, c.Subject("agent", "run", "cancel"), &agentv1.CancelRunRequest{Id: run.GetId(), By: "test"}, &agentv1.Run{}); err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, c, run.GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_CANCELLED || !strings.Contains(done.GetError(), "test") {
		t.Fatalf("run ended %v; want CANCELLED by test", done)
	}
	select {
	case <-gate.Cancelled():
	case <-time.After(30 * time.Second):
		t.Fatal("the model request in flight was not given up")
	}
}

// TestAgentProviderErrors: a 500 is retried and the run goes on; a 429
// that never clears ends the run with a clear error.
func TestAgentProviderErrors(t *testing.T) {
	t.Parallel()
	llm := llmtest.New(t,
		llmtest.FailRetryAfter(500, "upstream hiccup", "0"),
		llmtest.Reply("fine after all"),
	)
	_, c, _ := startAgentUp(t, llm)
	done := waitRun(t, c, startRun(t, c, &agentv1.StartRunRequest{Message: "hi"}).GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || done.GetFinalAnswer() != "fine after all" {
		t.Fatalf("after one 500: %v", done)
	}
	llm.SetDefault(llmtest.FailRetryAfter(429, "slow down", "0"))
	done = waitRun(t, c, startRun(t, c, &agentv1.StartRunRequest{Message: "again"}).GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_ERROR || !strings.Contains(done.GetError(), "429") || !strings.Contains(done.GetError(), "slow down") {
		t.Fatalf("with 429 throughout: %v; want ERROR naming 429 and the provider's message", done)
	}
	if n := len(llm.Requests()); n < 2+3 {
		t.Errorf("%d model requests in all; the 429 was not retried", n)
	}
}

// TestRunBrowserTask: an MCP client asks for a task; the run acts in the
// client's own browser session, progress notifications arrive while it
// works, and the answer is the result.
func TestRunBrowserTask(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>Task page</title><h1>hello</h1>`)
	}))
	defer site.Close()
	llm := llmtest.New(t,
		llmtest.Call(call("open", map[string]any{"url": site.URL + "/task"})),
		llmtest.Call(call("get_title", map[string]any{})),
		llmtest.Func(func(r llmtest.Request) llmtest.Step {
			res := r.ToolResults()
			if len(res) != 1 {
				return llmtest.Reply("no title")
			}
			return llmtest.Reply("The title is: " + strings.TrimSpace(res[0].Content))
		}),
	)
	listen, _, _ := startAgentUp(t, llm)
	mc := mcpSession(t, listen)
	var mu sync.Mutex
	var progress []string
	mc.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, fmt.Sprint(n.Params.AdditionalFields["message"]))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_browser_task"
	req.Params.Arguments = map[string]any{"task": "What is the title of " + site.URL + "/task?"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "task-1"}
	res, err := mc.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError || !strings.Contains(text, "The title is: Task page") {
		t.Fatalf("run_browser_task = %q (error %v)", text, res.IsError)
	}
	mu.Lock()
	got := append([]string(nil), progress...)
	mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no progress notification reached the client")
	}
	// The run used the client's browser session: its page is there now.
	if u := callText(t, mc, "get_url", nil); !strings.Contains(u, site.URL+"/task") {
		t.Fatalf("after the task the client's session is at %q; want the page the run opened", u)
	}
	t.Logf("progress: %q", got)
}
