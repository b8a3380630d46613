package relaypool

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// TestHandleDropsBadEvents feeds relay messages to handle: only events
// of our subscription, with a valid id and signature, that match the
// filter reach OnEvent.
func TestHandleDropsBadEvents(t *testing.T) {
	t.Parallel()
	author, other := mustKey(t), mustKey(t)
	filter := Filter{Kinds: []int{24133}, Authors: []string{author.PublicKey()}, Tags: map[string][]string{"p": {"me"}}}
	var got []string
	p := &Pool{log: slog.New(slog.DiscardHandler), cfg: Config{OnEvent: func(_ string, ev *nostr.Event) { got = append(got, ev.Content) }}}
	r := &relay{url: "ws://test"}
	ups := 0
	markUp := func() { ups++ }

	event := func(k *nostr.SecretKey, kind int, content string, tags ...[]string) *nostr.Event {
		ev := &nostr.Event{Kind: kind, CreatedAt: 1, Content: content, Tags: tags}
		if err := nostr.SignEvent(k, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	send := func(v ...any) {
		b, _ := json.Marshal(v)
		if err := p.handle(r, "sub", &filter, b, markUp); err != nil {
			t.Fatalf("handle(%s): %v", b, err)
		}
	}
	good := event(author, 24133, "good", []string{"p", "me"})
	badSig := *event(author, 24133, "bad sig", []string{"p", "me"})
	if last := badSig.Sig[127]; last == '0' {
		badSig.Sig = badSig.Sig[:127] + "1"
	} else {
		badSig.Sig = badSig.Sig[:127] + "0"
	}
	badID := *event(author, 24133, "bad id", []string{"p", "me"})
	badID.Content = "changed"

	send("EVENT", "sub", good)
	send("EVENT", "other-sub", event(author, 24133, "other sub", []string{"p", "me"}))
	send("EVENT", "sub", &badSig)
	send("EVENT", "sub", &badID)
	send("EVENT", "sub", event(other, 24133, "other author", []string{"p", "me"}))
	send("EVENT", "sub", event(author, 24133, "not for me", []string{"p", "you"}))
	send("EVENT", "sub", event(author, 1, "other kind", []string{"p", "me"}))
	send("NOTICE", "hello")
	send("OK", good.ID, false, "blocked: no")
	send("EOSE", "sub")
	if len(got) != 1 || got[0] != "good" {
		t.Errorf("OnEvent got %q, want only [good]", got)
	}
	if ups == 0 {
		t.Error("EOSE (or our event) did not mark the relay up")
	}
	b, _ := json.Marshal([]any{"CLOSED", "sub", "auth-required: sign in"})
	if err := p.handle(r, "sub", &filter, b, markUp); err == nil {
		t.Error("CLOSED of our subscription did not end the connection")
	}
}

func TestFilterJSON(t *testing.T) {
	t.Parallel()
	since, limit := int64(10), 5
	f := Filter{IDs: []string{}, Kinds: []int{1, 24133}, Tags: map[string][]string{"p": {"ab"}}, Since: &since, Limit: &limit}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Filter
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", b, err)
	}
	if back.IDs == nil || len(back.IDs) != 0 || back.Authors != nil || len(back.Kinds) != 2 || back.Tags["p"][0] != "ab" || *back.Since != 10 || *back.Limit != 5 || back.Until != nil {
		t.Errorf("round trip of %s = %+v", b, back)
	}
	for _, bad := range []string{`[]`, `{"search":"x"}`, `{"#pp":["a"]}`, `{"kinds":null}`, `{"ids":"x"}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want an error", bad)
		}
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
