package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// raceCalls makes one get_url call on each client at once (the clients
// are ready before any call starts) and returns their results in order.
func raceCalls(t *testing.T, clients []*client.Client) []*mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pending := make([]<-chan *mcp.CallToolResult, len(clients))
	for i, c := range clients {
		pending[i] = asyncCall(ctx, c, "get_url", nil, "")
	}
	out := make([]*mcp.CallToolResult, len(clients))
	for i, ch := range pending {
		out[i] = awaitResult(t, ch)
	}
	return out
}

// TestSessionLimitConcurrent: 20 calls at once from one caller, none
// naming a session, spread over two gateway replicas on one NATS, open at
// most the caller's limit of browser sessions, for 2026 handles and for
// 2025 MCP sessions alike; another caller is still served; a session
// ended gives its slot back.
func TestSessionLimitConcurrent(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 8)
	greedy, _ := newToken(t, srv, tokens.Spec{Name: "greedy"})
	greedy2025, _ := newToken(t, srv, tokens.Spec{Name: "greedy-2025"})
	other, _ := newToken(t, srv, tokens.Spec{Name: "other"})
	const limit = 2
	cfg := gateway.Config{SessionsConfig: gateway.SessionsConfig{SessionsPerCaller: limit}}
	urls := []string{startGateway(t, srv, cfg), startGateway(t, srv, cfg)}
	const calls = 20

	t.Run("handles", func(t *testing.T) {
		var clients []*client.Client
		for i := range calls {
			clients = append(clients, modernClient(t, urls[i%2], map[string]string{"Authorization": greedy}))
		}
		opened := 0
		for _, res := range raceCalls(t, clients) {
			switch {
			case !res.IsError:
				opened++
			case !strings.Contains(text(res), "limit"):
				t.Errorf("a refused call says %q, want the limit named", text(res))
			}
		}
		if opened == 0 || opened > limit {
			t.Errorf("%d concurrent calls without a session opened %d browser sessions, want 1 to %d", calls, opened, limit)
		}
	})
	t.Run("another caller", func(t *testing.T) {
		if res := callTool(t, modernClient(t, urls[1], map[string]string{"Authorization": other}), "get_url", nil); res.IsError {
			t.Errorf("another caller after the race: %s", text(res))
		}
	})
	t.Run("mcp sessions", func(t *testing.T) {
		var clients []*client.Client
		for i := range calls {
			clients = append(clients, legacyClient(t, urls[i%2], map[string]string{"Authorization": greedy2025}))
		}
		var holder *client.Client
		var waiting []*client.Client
		opened := 0
		for i, res := range raceCalls(t, clients) {
			if res.IsError {
				waiting = append(waiting, clients[i])
			} else {
				opened++
				holder = clients[i]
			}
		}
		if opened == 0 || opened > limit {
			t.Fatalf("%d MCP sessions' concurrent first calls opened %d browser sessions, want 1 to %d", calls, opened, limit)
		}
		if opened < limit {
			return // nothing to free: the slot left is free already
		}
		// Ending a session (DELETE) gives its slot back, on either replica.
		if err := holder.Close(); err != nil {
			t.Fatalf("end an MCP session: %v", err)
		}
		kittest.Eventually(t, 30*time.Second, func() error {
			res := callTool(t, waiting[0], "get_url", nil)
			return kittest.Check(!res.IsError, "a call after an MCP session ended = %q, want its slot free", text(res))
		})
	})
}

// TestSessionLimitFreedByIdle: a handle's browser session given back
// after --handle-idle-timeout frees its caller's slot.
func TestSessionLimitFreedByIdle(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 3)
	url := startGateway(t, srv, gateway.Config{SessionsConfig: gateway.SessionsConfig{SessionsPerCaller: 1, HandleIdleTimeout: time.Second}})
	c := modernClient(t, url, nil)
	if res := callTool(t, c, "get_url", nil); res.IsError {
		t.Fatalf("first call: %s", text(res))
	}
	calls := 1
	kittest.Eventually(t, 30*time.Second, func() error {
		res := callTool(t, c, "get_url", nil)
		calls++
		if res.IsError && !strings.Contains(text(res), "limit") {
			t.Fatalf("a call without a session after the first went idle = %q, want the limit until the keeper gives the first back", text(res))
		}
		return kittest.Check(!res.IsError, "a call without a session after the first went idle = %q, want a session once the keeper gave the first back", text(res))
	})
	var released bool
	for _, r := range auditRecords(t, srv, calls+1) { // the calls, and the keeper's release
		released = released || r.GetTool() == "session.release"
	}
	if !released {
		t.Error("no session.release record: the slot was freed some other way")
	}
}
