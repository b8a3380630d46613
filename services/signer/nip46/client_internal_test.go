package nip46

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// TestHandleEventChecksOrigin feeds forged answers to a connected client:
// only an answer authored by the remote signer, p-tagged to the client
// and matching a pending request resolves it, and only once.
func TestHandleEventChecksOrigin(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	signer, forger := mustKey(t), mustKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, SignerKey: signer})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{BunkerURL: bunker.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cl := &call{method: "ping", reply: make(chan response, 2)}
	c.mu.Lock()
	c.pending["req-1"] = cl
	c.mu.Unlock()

	answer := func(from *nostr.SecretKey, to, id, result string, nip04 bool) *nostr.Event {
		body, _ := json.Marshal(map[string]string{"id": id, "result": result})
		var content string
		if nip04 {
			content, err = nostr.Nip04Encrypt(from, c.clientPub, string(body))
		} else {
			ck, _ := nostr.ConversationKey(from, c.clientPub)
			content, err = nostr.Nip44Encrypt(string(body), ck)
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := &nostr.Event{Kind: Kind, CreatedAt: time.Now().Unix(), Tags: [][]string{{"p", to}}, Content: content}
		if err := nostr.SignEvent(from, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	forged := []struct {
		name string
		ev   *nostr.Event
	}{
		{"another author", answer(forger, c.clientPub, "req-1", "forged", false)},
		{"not p-tagged to us", answer(signer, forger.PublicKey(), "req-1", "forged", false)},
		{"unknown request id", answer(signer, c.clientPub, "req-2", "forged", false)},
	}
	for _, f := range forged {
		c.handleEvent("test", f.ev)
		if len(cl.reply) != 0 {
			t.Fatalf("%s: the forged answer resolved the request", f.name)
		}
	}
	genuine := answer(signer, c.clientPub, "req-1", "pong", true)
	c.handleEvent("test", genuine)
	c.handleEvent("test", genuine) // the same answer through a second relay
	if len(cl.reply) != 1 {
		t.Fatalf("genuine answer delivered %d times, want 1", len(cl.reply))
	}
	if r := <-cl.reply; r.result != "pong" || r.errMsg != "" {
		t.Errorf("reply = %+v, want pong", r)
	}
	c.mu.Lock()
	nip04 := c.nip04
	c.mu.Unlock()
	if !nip04 {
		t.Error("a NIP-04 answer did not switch the client to NIP-04")
	}
}

func mustKey(t *testing.T) *nostr.SecretKey {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
