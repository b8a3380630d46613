package console

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// chromiumPath is the browser the UI test drives.
const chromiumPath = "/usr/bin/chromium"

// TestChatPageInBrowser drives the chat page's script in headless
// Chromium against the console's real handler: send a message, watch the
// status line and the tool calls appear as the run moves (the test moves
// the in-test agent), see the answer, and press Stop on a second run. The
// test against a real agent and stack lives with the agent service.
func TestChatPageInBrowser(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("no Chromium at " + chromiumPath)
	}
	ag := newFakeAgent()
	ag.settings.BaseUrl, ag.settings.Model = "http://127.0.0.1:11434/v1", "llama3.1"
	f := newFixture(t, Sources{Agent: ag})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.Headless, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1200, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// Start the browser on ctx itself: the context of the first action
	// bounds its life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}

	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v (page %s)\n%s", what, err, loc, html)
		}
	}
	// until waits for a JavaScript condition on the page.
	until := func(what, cond string) {
		t.Helper()
		step(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond)))
	}
	text := func(css string) string {
		t.Helper()
		// One evaluation: the live refresh may replace the node between a
		// query and a separate read.
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const n = document.querySelector(`+strconv.Quote(css)+`); return n ? n.innerText : ""; })()`))
		if err != nil {
			t.Fatalf("text of %s: %v", css, err)
		}
		return s
	}
	runID := func() string {
		t.Helper()
		ag.mu.Lock()
		defer ag.mu.Unlock()
		return ag.order[len(ag.order)-1]
	}

	step("log in", chromedp.Navigate(f.srv.URL+"/login?next=/chat/new"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("message")))

	step("send a message", chromedp.SendKeys(chromedp.ID("message"), "save the links of this page"),
		chromedp.Click(chromedp.ID("send")))
	until("the page follows the new chat and the run", `location.pathname === "/chat/chat-1" &&
		document.getElementById("run-state").textContent === "Thinking" && document.getElementById("send").disabled`)
	until("the sent message shows", `document.querySelector(".msg.user .bubble").textContent === "save the links of this page"`)

	id := runID()
	calls := `[{"id":"call_1","type":"function","function":{"name":"open","arguments":"{\"url\":\"https://example.com/links\"}"}}]`
	ag.step(id, func(r *agentv1.Run) {
		r.State, r.CurrentTool, r.ToolCalls = agentv1.RunState_RUN_STATE_TOOL_CALL, "open", 1
	},
		&historyv1.ChatMessage{Role: "assistant", ToolCallsJson: calls})
	until("the tool call appears with the status", `document.querySelector('details[data-call="call_1"]') !== null &&
		document.getElementById("run-detail").textContent.includes("open")`)
	if s := text(`details[data-call="call_1"] summary`); !strings.Contains(s, `open(url="https://example.com/links")`) {
		t.Errorf("the tool call reads %q", s)
	}
	step("expand the tool call", chromedp.Evaluate[chromedp.Void](`document.querySelector('details[data-call="call_1"] summary').click()`))

	ag.step(id, func(r *agentv1.Run) {}, &historyv1.ChatMessage{Role: "tool", ToolCallId: "call_1", Content: "Opened https://example.com/links"})
	until("the result arrives, the call still open", `(() => { const d = document.querySelector('details[data-call="call_1"]');
		return d.open && d.querySelector("pre.result") && d.querySelector("pre.result").textContent === "Opened https://example.com/links"; })()`)

	ag.step(id, func(r *agentv1.Run) {
		r.State, r.CurrentTool, r.Iteration, r.FinalAnswer = agentv1.RunState_RUN_STATE_COMPLETE, "", 2, "Saved 2 links:\n- One\n- Two"
	}, &historyv1.ChatMessage{Role: "assistant", Content: "Saved 2 links:\n- One\n- Two"})
	until("the answer shows and the run is done", `document.getElementById("run-state").textContent === "Done" &&
		document.getElementById("stop-form").hidden && !document.getElementById("send").disabled &&
		[...document.querySelectorAll(".msg.assistant .bubble")].some(b => b.textContent === "Saved 2 links:\n- One\n- Two")`)
	if title := text("#chat-title"); title != "save the links of this page" {
		t.Errorf("the chat's title reads %q", title)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile("/tmp/console-chat.png", png, 0o644)
	}

	// A second run, stopped with the Stop button (Enter sends).
	step("send a follow-up", chromedp.SendKeys(chromedp.ID("message"), "a long task\r"))
	until("the second run works", `document.getElementById("run-state").textContent === "Thinking" && !document.getElementById("stop-form").hidden`)
	id2 := runID()
	if id2 == id {
		t.Fatal("the follow-up did not start a run")
	}
	step("press Stop", chromedp.Click(chromedp.ID("stop")))
	until("the stop is requested", `document.getElementById("stop").textContent === "Stopping…"`)
	// The button reads "Stopping…" as the click sends the cancel, before
	// the agent has it: wait for the agent.
	cancels := kittest.EventuallyValue(t, 30*time.Second, func() ([]string, error) {
		ag.mu.Lock()
		defer ag.mu.Unlock()
		return append([]string(nil), ag.cancels...), kittest.Check(len(ag.cancels) > 0, "the agent has no cancel")
	})
	if len(cancels) != 1 || cancels[0] != id2+" by console:admin" {
		t.Fatalf("cancels = %v, want %s by console:admin", cancels, id2)
	}
	ag.step(id2, func(r *agentv1.Run) {
		r.State, r.Error = agentv1.RunState_RUN_STATE_CANCELLED, "cancelled by console:admin"
	})
	until("the run shows stopped", `document.getElementById("run-state").textContent === "Stopped" &&
		!document.getElementById("run-error").hidden && document.getElementById("stop-form").hidden`)
	png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile("/tmp/console-chat-stopped.png", png, 0o644)
	}

	step("open the chat list", chromedp.Navigate(f.srv.URL+"/chat"), chromedp.WaitVisible(chromedp.ID("chats-table")))
	if s := text("#chats-table tbody tr td"); s != "save the links of this page" {
		t.Errorf("the chat list's first title reads %q", s)
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile("/tmp/console-chat-list.png", png, 0o644)
	}
	step("open the chat from the list", chromedp.Click(chromedp.CSS("#chats-table tbody tr td:nth-child(2)")),
		chromedp.WaitVisible(chromedp.ID("messages")))
	step("open the settings", chromedp.Navigate(f.srv.URL+"/chat/settings"), chromedp.WaitVisible(chromedp.ID("settings-form")),
		chromedp.Clear(chromedp.CSS(`input[name="model"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="model"]`), "qwen2.5"), chromedp.Click(chromedp.CSS(`#settings-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice.ok")))
	if ag.settings.Model != "qwen2.5" {
		t.Errorf("the settings form saved model %q", ag.settings.Model)
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile("/tmp/console-chat-settings.png", png, 0o644)
	}
}
