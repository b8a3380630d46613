package nip46test_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// wsClient is a raw relay client for the tests.
type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func connect(t *testing.T, url string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &wsClient{t, ws}
}

func (c *wsClient) send(v ...any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv returns the next message, or nil after d.
func (c *wsClient) recv(d time.Duration) []json.RawMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return nil
	}
	var msg []json.RawMessage
	if err := json.Unmarshal(b, &msg); err != nil {
		c.t.Fatalf("relay sent %s, not a JSON array", b)
	}
	return msg
}

func label(msg []json.RawMessage) string {
	if len(msg) == 0 {
		return ""
	}
	var s string
	_ = json.Unmarshal(msg[0], &s)
	return s
}

// events collects the EVENTs of sub up to its EOSE.
func (c *wsClient) stored(sub string) []string {
	c.t.Helper()
	var contents []string
	for {
		msg := c.recv(5 * time.Second)
		switch label(msg) {
		case "EVENT":
			var ev nostr.Event
			_ = json.Unmarshal(msg[2], &ev)
			contents = append(contents, ev.Content)
		case "EOSE":
			return contents
		default:
			c.t.Fatalf("want EVENT or EOSE for %s, got %s", sub, msg)
		}
	}
}

func signed(t *testing.T, k *nostr.SecretKey, kind int, createdAt int64, content string, tags ...[]string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{Kind: kind, CreatedAt: createdAt, Content: content, Tags: tags}
	if err := nostr.SignEvent(k, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestRelay(t *testing.T) {
	relay := nip46test.NewRelay(t)
	if !strings.HasPrefix(relay.URL(), "ws://127.0.0.1:") {
		t.Errorf("URL() = %s, want ws://127.0.0.1:<port>", relay.URL())
	}
	alice, bob := mustKey(t), mustKey(t)
	c := connect(t, relay.URL())

	publish := func(ev *nostr.Event) (bool, string) {
		t.Helper()
		c.send("EVENT", ev)
		msg := c.recv(5 * time.Second)
		var id, reason string
		var ok bool
		if label(msg) != "OK" || json.Unmarshal(msg[1], &id) != nil || json.Unmarshal(msg[2], &ok) != nil || json.Unmarshal(msg[3], &reason) != nil || id != ev.ID {
			t.Fatalf("want OK for %s, got %s", ev.ID, msg)
		}
		return ok, reason
	}
	evs := []*nostr.Event{
		signed(t, alice, 1, 100, "a100", []string{"p", bob.PublicKey()}),
		signed(t, alice, 1, 200, "a200"),
		signed(t, bob, 1, 300, "b300", []string{"p", alice.PublicKey()}),
		signed(t, bob, 7, 400, "b400"),
	}
	for _, ev := range evs {
		if ok, reason := publish(ev); !ok {
			t.Fatalf("EVENT %s refused: %s", ev.Content, reason)
		}
	}
	if ok, reason := publish(evs[0]); !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Errorf("duplicate EVENT: OK %v %q, want true \"duplicate: …\"", ok, reason)
	}
	bad := *signed(t, alice, 1, 500, "tampered")
	bad.Content = "changed"
	if ok, reason := publish(&bad); ok || !strings.HasPrefix(reason, "invalid:") {
		t.Errorf("EVENT with a bad id: OK %v %q, want false \"invalid: …\"", ok, reason)
	}
	badSig := *signed(t, alice, 1, 500, "bad sig")
	badSig.Sig = strings.Repeat("0", 128)
	if ok, reason := publish(&badSig); ok || !strings.HasPrefix(reason, "invalid:") {
		t.Errorf("EVENT with a bad sig: OK %v %q, want false \"invalid: …\"", ok, reason)
	}
	// Ephemeral events are accepted but not stored.
	if ok, _ := publish(signed(t, alice, 24133, 600, "ephemeral")); !ok {
		t.Error("ephemeral EVENT refused")
	}
	if n := len(relay.Events()); n != 4 {
		t.Errorf("relay stored %d events, want 4", n)
	}

	filters := []struct {
		name   string
		filter map[string]any
		want   []string
	}{
		{"all, newest first", map[string]any{}, []string{"b400", "b300", "a200", "a100"}},
		{"authors", map[string]any{"authors": []string{alice.PublicKey()}}, []string{"a200", "a100"}},
		{"kinds", map[string]any{"kinds": []int{7}}, []string{"b400"}},
		{"#p", map[string]any{"#p": []string{alice.PublicKey()}}, []string{"b300"}},
		{"ids", map[string]any{"ids": []string{evs[1].ID}}, []string{"a200"}},
		{"since and until", map[string]any{"since": 200, "until": 300}, []string{"b300", "a200"}},
		{"limit", map[string]any{"limit": 2}, []string{"b400", "b300"}},
		{"empty ids", map[string]any{"ids": []string{}}, nil},
	}
	for i, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			sub := "s" + string(rune('a'+i))
			c.send("REQ", sub, tc.filter)
			if got := c.stored(sub); !slices.Equal(got, tc.want) {
				t.Errorf("REQ %v = %v, want %v", tc.filter, got, tc.want)
			}
			c.send("CLOSE", sub)
		})
	}

	t.Run("unsupported filter", func(t *testing.T) {
		c.send("REQ", "x", map[string]any{"search": "hi"})
		if msg := c.recv(5 * time.Second); label(msg) != "CLOSED" {
			t.Errorf("REQ with search: got %s, want CLOSED", msg)
		}
	})

	t.Run("live events and CLOSE", func(t *testing.T) {
		sub := connect(t, relay.URL())
		sub.send("REQ", "live", map[string]any{"kinds": []int{24133}, "#p": []string{bob.PublicKey()}})
		if got := sub.stored("live"); len(got) != 0 {
			t.Fatalf("stored answer %v, want none", got)
		}
		publish(signed(t, alice, 24133, 700, "not for bob"))
		publish(signed(t, alice, 24133, 701, "for bob", []string{"p", bob.PublicKey()}))
		msg := sub.recv(5 * time.Second)
		var ev nostr.Event
		if label(msg) != "EVENT" || json.Unmarshal(msg[2], &ev) != nil || ev.Content != "for bob" {
			t.Fatalf("live: got %s, want the event for bob", msg)
		}
		sub.send("CLOSE", "live")
		sub.send("REQ", "sync", map[string]any{"ids": []string{}})
		sub.stored("sync") // CLOSE has been processed once this answers
		publish(signed(t, alice, 24133, 702, "after close", []string{"p", bob.PublicKey()}))
		if msg := sub.recv(200 * time.Millisecond); msg != nil {
			t.Errorf("got %s after CLOSE, want nothing", msg)
		}
	})

	t.Run("drop connections", func(t *testing.T) {
		if n := relay.DropConnections(); n < 1 {
			t.Errorf("DropConnections() = %d, want at least 1", n)
		}
		if msg := c.recv(time.Second); msg != nil {
			t.Errorf("read after the drop gave %s, want an error", msg)
		}
		// The relay keeps serving.
		c2 := connect(t, relay.URL())
		c2.send("REQ", "again", map[string]any{"limit": 1})
		if got := c2.stored("again"); !slices.Equal(got, []string{"b400"}) {
			t.Errorf("after the drop: %v, want [b400]", got)
		}
	})
}

func mustKey(t *testing.T) *nostr.SecretKey {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
