package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
)

// TestConsoleChatOverBus checks the console's chat source on a real bus: the
// chats come from a real history service, and with no agent service running
// the chat routes say so (503) instead of failing obscurely.
func TestConsoleChatOverBus(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	startHistory(t, srv)
	g, _ := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: "127.0.0.1:0", AdminToken: adminToken}})
	admin := adminURL(t, g)

	nc := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	chat := &historyv1.ChatSession{}
	if err := nc.Request(ctx, nc.Subject("history", "chat", "create"), &historyv1.CreateChatSessionRequest{Title: "links <b>task</b>"}, chat); err != nil {
		t.Fatal(err)
	}
	app := &historyv1.AppendChatMessagesRequest{SessionId: chat.GetId(), Messages: []*historyv1.ChatMessage{
		{Role: "user", Content: "save the links\nto links.txt"},
		{Role: "assistant", ToolCallsJson: `[{"id":"c1","type":"function","function":{"name":"snapshot","arguments":"{}"}}]`},
		{Role: "tool", ToolCallId: "c1", Content: `- link "One" [ref=e1]`},
		{Role: "assistant", Content: "Done."},
	}}
	if err := nc.Request(ctx, nc.Subject("history", "chat", "append"), app, &historyv1.AppendChatMessagesResponse{}); err != nil {
		t.Fatal(err)
	}

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(admin, "/")+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	if code, body := do("GET", "/api/agent/chats", ""); code != 200 || !strings.Contains(body, chat.GetId()) {
		t.Fatalf("GET /api/agent/chats: %d %s", code, body)
	}
	if code, body := do("GET", "/api/agent/chats/"+chat.GetId(), ""); code != 200 || !strings.Contains(body, `"tool_call_id": "c1"`) {
		t.Fatalf("GET the chat: %d %s", code, body)
	}
	code, body := do("GET", "/chat/"+chat.GetId(), "")
	for _, want := range []string{"save the links\nto links.txt", `<span class="name">snapshot</span>`, "- link &#34;One&#34; [ref=e1]",
		"links &lt;b&gt;task&lt;/b&gt;", "the agent is not reachable: no agent service answers on NATS (is it running?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the chat page (%d) lacks %q", code, want)
		}
	}
	if code, body := do("POST", "/api/agent/chats/"+chat.GetId()+"/messages", `{"message":"more"}`); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "no agent service answers on NATS") {
		t.Errorf("send without an agent service: %d %s, want 503 saying so", code, body)
	}
	if code, body := do("GET", "/api/agent/settings", ""); code != http.StatusServiceUnavailable {
		t.Errorf("settings without an agent service: %d %s, want 503", code, body)
	}
	if code, body := do("DELETE", "/api/agent/chats/"+chat.GetId(), ""); code != 200 {
		t.Fatalf("DELETE the chat: %d %s", code, body)
	}
	if code, body := do("GET", "/api/agent/chats/"+chat.GetId(), ""); code != http.StatusNotFound {
		t.Errorf("GET the deleted chat: %d %s, want 404", code, body)
	}
}
