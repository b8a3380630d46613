package sovereign

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
)

// chatUIChromium is the browser TestChatUIInBrowser drives (the worker's
// Chromium too).
const chatUIChromium = "/usr/bin/chromium"

// TestChatUIInBrowser drives the console's chat UI in headless Chromium
// against the real stack: `sovereign up` with the console on its admin
// listener, the agent pointed at the scripted model, a real browser worker
// and history. It logs in, starts a chat whose run opens a page and
// snapshots it (the tool calls show compactly and expand to their
// arguments and real results; the answer appears without a reload), stops
// a second run while the model thinks, and saves a model and an API key in
// the settings (shown masked; the next run uses both).
func TestChatUIInBrowser(t *testing.T) {
	if _, err := os.Stat(chatUIChromium); err != nil {
		t.Skip("no Chromium at " + chatUIChromium)
	}
	const heading = "Quarterly lighthouse report"
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>Lighthouse</title><h1>%s</h1><p>All lamps lit.</p><a href="/keepers">Keepers</a>`, heading)
	}))
	defer site.Close()

	gate := llmtest.NewGate()
	defer gate.Release()
	const answer = "The page's heading is “" + heading + "”."
	llm := llmtest.New(t,
		llmtest.Call(call("open", map[string]any{"url": site.URL + "/report"})),
		llmtest.Call(call("snapshot", map[string]any{})),
		llmtest.Func(func(r llmtest.Request) llmtest.Step {
			if res := r.ToolResults(); len(res) != 1 || !strings.Contains(res[0].Content, heading) {
				return llmtest.Reply(fmt.Sprintf("the snapshot did not hold the heading: %+v", res))
			}
			return llmtest.Reply(answer)
		}),
		// The second message: the model thinks until the run is stopped.
		llmtest.Step{Block: gate, Text: "too late"},
		// The third, after the settings changed.
		llmtest.Reply("Answered with the new settings."),
	)

	const token = "chat-ui-admin-token-0123456789"
	t.Setenv("SOVEREIGN_ADMIN_TOKEN", token)
	_, _, dir := startAgentUp(t, llm, "--admin-listen", "127.0.0.1:0")
	base := strings.TrimSuffix(consoleURL(t, dir), "/")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chatUIChromium), chromedp.NoSandbox, chromedp.Headless, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1200, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// Start the browser on ctx itself: the context of the first action
	// bounds its life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}

	step := func(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v (page %s)\n%s", what, err, loc, html)
		}
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step(what, 30*time.Second, actions...)
	}
	// until waits for a JavaScript condition on the page; the runs drive
	// a real browser on a shared machine, so it waits long.
	until := func(what, cond string) {
		t.Helper()
		step(what, 2*time.Minute, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond)))
	}
	text := func(css string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// One evaluation: a live refresh may replace the node between a
		// query and a separate read.
		s, err := chromedp.Run(sctx, chromedp.Evaluate[string](`(() => { const n = document.querySelector(`+strconv.Quote(css)+`); return n ? n.textContent : ""; })()`))
		if err != nil {
			t.Fatalf("text of %s: %v", css, err)
		}
		return s
	}
	html := func() string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("the page's HTML: %v", err)
		}
		return s
	}

	// shot saves the whole page as the eye sees it: the viewport grows to
	// the page's height (so the sticky composer sits at the end, not over
	// the conversation), then returns to 1200×900.
	shot := func(path string) {
		t.Helper()
		h, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Math.max(900, document.documentElement.scrollHeight)`))
		if err != nil {
			t.Errorf("screenshot %s: %v", path, err)
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, chromedp.EmulateViewport(1200, h)); err != nil {
			t.Errorf("screenshot %s: %v", path, err)
			return
		}
		png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
		if err == nil {
			err = os.WriteFile(path, png, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot %s: %v", path, err)
		}
		if err := chromedp.Do(sctx, chromedp.EmulateViewport(1200, 900)); err != nil {
			t.Errorf("screenshot %s: restore the viewport: %v", path, err)
		}
	}

	// Log in, open the chat list, start a new chat.
	do("log in", chromedp.Navigate(base+"/login?next=/chat"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("new-chat")))
	do("start a new chat", chromedp.Click(chromedp.ID("new-chat")), chromedp.WaitVisible(chromedp.ID("message")))
	if s := text("#chat-title"); s != "New chat" {
		t.Errorf("the new chat's title reads %q", s)
	}

	// The first message: open, snapshot, answer.
	task := "What is the heading of " + site.URL + "/report?"
	do("send the first message", chromedp.SendKeys(chromedp.ID("message"), task), chromedp.Click(chromedp.ID("send")))
	until("the page follows the new chat", `location.pathname.startsWith("/chat/") && location.pathname !== "/chat/new"`)
	until("the answer appears without a reload", `document.getElementById("run-state").textContent === "Done" &&
		[...document.querySelectorAll(".msg.assistant .bubble")].some(b => b.textContent === `+jsString(answer)+`)`)
	calls, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("details.call")].map(d => d.querySelector("summary").textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	wantOpen := `open(url="` + site.URL + `/report")`
	if len(calls) != 2 || calls[0] != wantOpen || calls[1] != "snapshot()" {
		t.Fatalf("the tool calls read %q; want [%s snapshot()]", calls, wantOpen)
	}
	closed, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`[...document.querySelectorAll("details.call")].every(d => !d.open && d.classList.contains("done"))`))
	if err != nil || !closed {
		t.Errorf("the tool calls are not shown compactly (closed, done): %v", err)
	}
	if s := text("#chat-title"); s != task {
		t.Errorf("the chat's title reads %q; want the first message", s)
	}
	if u := text(".msg.user .bubble"); u != task {
		t.Errorf("the user's message reads %q", u)
	}

	// Expanding a call shows its arguments and its real result.
	do("expand the open call", chromedp.Evaluate[chromedp.Void](`document.querySelector('details[data-call="call_1_0"] summary').click()`))
	until("the open call shows its arguments", `document.querySelector('details[data-call="call_1_0"]').open`)
	if args := text(`details[data-call="call_1_0"] .call-body pre.block`); !strings.Contains(args, `"url": "`+site.URL+`/report"`) {
		t.Errorf("the open call's arguments read %q", args)
	}
	do("expand the snapshot call", chromedp.Evaluate[chromedp.Void](`document.querySelector('details[data-call="call_2_0"] summary').click()`))
	until("the snapshot call shows its result", `document.querySelector('details[data-call="call_2_0"]').open`)
	if res := text(`details[data-call="call_2_0"] pre.result`); !strings.Contains(res, heading) || !strings.Contains(res, "Keepers") {
		t.Errorf("the snapshot's result reads %q; want the page's heading and link", res)
	}
	shot("/tmp/chat-real.png")
	chatURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}

	// The second message: the model blocks; Stop cancels the run.
	do("send the second message", chromedp.SendKeys(chromedp.ID("message"), "Now read every keeper's page.\r"))
	until("the status line shows the run working", `["Starting", "Thinking"].includes(document.getElementById("run-state").textContent) &&
		!document.getElementById("stop-form").hidden && document.getElementById("send").disabled`)
	select {
	case <-gate.Entered():
	case <-time.After(2 * time.Minute):
		t.Fatal("the second run never reached the model")
	}
	until("the status says the model is thinking", `document.getElementById("run-state").textContent === "Thinking" &&
		document.getElementById("run-detail").textContent.includes("waiting for the model")`)
	do("press Stop", chromedp.Click(chromedp.ID("stop")))
	until("the status shows the run stopped", `document.getElementById("run-state").textContent === "Stopped" &&
		document.getElementById("stop-form").hidden && !document.getElementById("send").disabled &&
		!document.getElementById("run-error").hidden`)
	if s := text("#run-error"); !strings.Contains(s, "stopped") || !strings.Contains(s, "console") {
		t.Errorf("the stopped run's notice reads %q; want it to say who stopped it", s)
	}
	select {
	case <-gate.Cancelled():
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not give up the model request in flight")
	}
	shot("/tmp/chat-real-stopped.png")

	// The settings: a new model and an API key, the key shown masked.
	const key = "sk-chatui-0123456789abcdefSECRET"
	do("open the settings", chromedp.Navigate(base+"/chat/settings"), chromedp.WaitVisible(chromedp.ID("settings-form")))
	if s := text("#key-state"); !strings.HasPrefix(s, "not set") {
		t.Errorf("before saving, the key reads %q; want not set", s)
	}
	do("save a model and a key",
		chromedp.Clear(chromedp.CSS(`input[name="model"]`)), chromedp.SendKeys(chromedp.CSS(`input[name="model"]`), "ui-model-7b"),
		chromedp.SendKeys(chromedp.CSS(`input[name="api_key"]`), key),
		chromedp.Click(chromedp.CSS(`#settings-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(".notice.ok")))
	if s := text("#key-state"); !strings.Contains(s, "set (sk-…CRET)") {
		t.Errorf("after saving, the key reads %q; want it masked as sk-…CRET", s)
	}
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name="model"]`))); err != nil || v != "ui-model-7b" {
		t.Errorf("the saved model reads %q (%v)", v, err)
	}
	if page := html(); strings.Contains(page, key) || strings.Contains(page, "0123456789abcdef") {
		t.Error("the settings page's HTML holds the API key")
	}
	shot("/tmp/chat-real-settings.png")

	// The next run uses the new model and sends the key.
	before := len(llm.Requests())
	do("back to the chat", chromedp.Navigate(chatURL), chromedp.WaitVisible(chromedp.ID("message")))
	do("send the third message", chromedp.SendKeys(chromedp.ID("message"), "Are you there?\r"))
	until("the third answer appears", `document.getElementById("run-state").textContent === "Done" &&
		[...document.querySelectorAll(".msg.assistant .bubble")].some(b => b.textContent === "Answered with the new settings.")`)
	shot("/tmp/chat-real-final.png")
	reqs := llm.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d model requests after the settings changed; want 1", len(reqs)-before)
	}
	if r := reqs[before]; r.Model != "ui-model-7b" || r.Authorization != "Bearer "+key {
		t.Errorf("the next run asked model %q with Authorization %q; want ui-model-7b with the saved key as Bearer",
			r.Model, maskAuth(r.Authorization, key))
	}
	if r := reqs[0]; r.Model != "scripted" || strings.Contains(r.Authorization, key) {
		t.Errorf("the first run asked model %q (Authorization %q)", r.Model, maskAuth(r.Authorization, key))
	}
	if page := html(); strings.Contains(page, key) {
		t.Error("the chat page's HTML holds the API key")
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return fmt.Sprintf("%q", s)
}

// maskAuth replaces the test's key in an Authorization header, so a
// failure message does not print it.
func maskAuth(h, key string) string {
	return strings.ReplaceAll(h, key, "<the saved key>")
}
