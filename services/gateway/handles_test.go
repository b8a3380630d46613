package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

func metaSession(r *mcp.CallToolResult) string {
	if r.Meta == nil {
		return ""
	}
	s, _ := r.Meta.AdditionalFields[gateway.MetaSession].(string)
	return s
}

// TestHandleRouting checks, on a fleet whose only worker is gone, that a
// handle is refused to another caller, and that its owner's call fails as
// "lost", drops the dead binding and makes the next call open a fresh
// session (here: finding no worker).
func TestHandleRouting(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	aliceAuth, aliceTok := newToken(t, srv, tokens.Spec{Name: "alice"})
	malloryAuth, _ := newToken(t, srv, tokens.Spec{Name: "mallory"})
	g, url := startGatewayG(t, srv, gateway.Config{})
	store := gateway.StoreOf(g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	h := state.NewHandle()
	if _, err := store.Create(ctx, state.Handle, h, state.Record{Owner: owner(aliceTok), WorkerID: "gone", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	mallory := modernClient(t, url, map[string]string{"Authorization": malloryAuth})
	anon := modernClient(t, url, nil)
	for name, c := range map[string]interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}{"mallory": mallory, "anonymous": anon} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "get_url", map[string]any{"session": h}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.HasPrefix(text(res), "unknown or expired session handle") {
			t.Errorf("%s using alice's handle: %q (isError %v), want the unknown-handle refusal", name, text(res), res.IsError)
		}
	}

	alice := modernClient(t, url, map[string]string{"Authorization": aliceAuth})
	res := callTool(t, alice, "get_url", map[string]any{"session": h})
	if !res.IsError || !strings.Contains(text(res), "the browser session was lost (its worker or its browser stopped); the next call opens a fresh session") {
		t.Fatalf("get_url on a dead worker = %q, want the lost-session error", text(res))
	}
	if got := metaSession(res); got != h {
		t.Errorf("_meta[%s] = %q, want %q", gateway.MetaSession, got, h)
	}
	e, err := store.Get(ctx, state.Handle, h)
	if err != nil || e.Bound() {
		t.Fatalf("after the loss the handle record is %+v, %v; want it kept and unbound", e, err)
	}
	res = callTool(t, alice, "get_url", map[string]any{"session": h})
	if !res.IsError || !strings.Contains(text(res), "no browser workers are running") {
		t.Errorf("next call = %q, want it to try a fresh session (and find no workers)", text(res))
	}

	// A 2025 client may name the handle too; ownership still applies.
	legacy := legacyClient(t, url, map[string]string{"Authorization": malloryAuth})
	res = callTool(t, legacy, "get_url", map[string]any{"session": h})
	if !strings.HasPrefix(text(res), "unknown or expired session handle") {
		t.Errorf("2025 client with another caller's handle = %q", text(res))
	}
}

// TestMCPSessionLost: the browser session of an MCP session whose worker is
// gone is dropped at the first failing call.
func TestMCPSessionLost(t *testing.T) {
	t.Parallel()
	g, url := startGatewayG(t, startNATS(t, ""), gateway.Config{})
	store := gateway.StoreOf(g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := legacyClient(t, url, nil)
	id := c.GetSessionId()
	if _, err := store.Modify(ctx, state.MCP, id, func(r *state.Record) bool {
		r.WorkerID, r.SessionID = "gone", "s1"
		return true
	}); err != nil {
		t.Fatal(err)
	}
	res := callTool(t, c, "snapshot", nil)
	if !res.IsError || !strings.Contains(text(res), "the browser session was lost") {
		t.Fatalf("snapshot on a dead worker = %q, want the lost-session error", text(res))
	}
	if metaSession(res) != "" {
		t.Errorf("an MCP-session call carries a handle in _meta: %q", metaSession(res))
	}
	e, err := store.Get(ctx, state.MCP, id)
	if err != nil || e.Bound() || e.Terminated {
		t.Fatalf("after the loss the MCP session record is %+v, %v; want it live and unbound", e, err)
	}
}
