package nip46_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

func newKey(t *testing.T) *nostr.SecretKey {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial connects a client to the bunker and closes it when the test ends.
func dial(t *testing.T, cfg nip46.Config) *nip46.Client {
	t.Helper()
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.ReconnectMin == 0 {
		cfg.ReconnectMin = 50 * time.Millisecond
	}
	c, err := nip46.Dial(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func methods(reqs []nip46test.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method)
	}
	return out
}

func TestConnectUserKeyDiffersFromSignerKey(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	user, signer := newKey(t), newKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, UserKey: user, SignerKey: signer, Secret: testSecret,
	})
	c := dial(t, nip46.Config{BunkerURL: bunker.URL()})

	if got, want := c.PublicKey(), user.PublicKey(); got != want {
		t.Errorf("PublicKey() = %s, want the user key %s", got, want)
	}
	if got, want := c.RemoteSignerPubkey(), signer.PublicKey(); got != want {
		t.Errorf("RemoteSignerPubkey() = %s, want the signer key %s", got, want)
	}
	if st := c.State(); st.State != nip46.LinkConnected || st.LastError != "" || st.PendingAuthURL != "" {
		t.Errorf("State() = %+v, want connected with no error", st)
	}
	reqs := bunker.Received()
	if got, want := methods(reqs), []string{"connect", "get_public_key"}; !slices.Equal(got, want) {
		t.Errorf("bunker received %v, want %v", got, want)
	}
	for _, r := range reqs {
		if r.NIP04 || r.Client != c.ClientPubkey() {
			t.Errorf("request %+v: want NIP-44 from client %s", r, c.ClientPubkey())
		}
	}
	// Every kind 24133 event is ephemeral: the relay kept none, so no
	// ciphertext lingers there.
	if evs := relay.Events(); len(evs) != 0 {
		t.Errorf("relay stored %d events, want 0 (kind 24133 is ephemeral)", len(evs))
	}
	if err := c.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestSignEvent(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	user := newKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, UserKey: user, SignerKey: newKey(t)})
	c := dial(t, nip46.Config{BunkerURL: bunker.URL()})

	in := &nostr.Event{
		Kind:      1,
		CreatedAt: 1714078911,
		Tags:      [][]string{{"e", strings.Repeat("ab", 32), "wss://r.example"}, {"t", "nostr"}},
		Content:   "Hello, I'm signing remotely \"quoted\"\n✓",
	}
	out, err := c.SignEvent(ctxFor(t, 5*time.Second), in)
	if err != nil {
		t.Fatalf("SignEvent: %v", err)
	}
	if err := nostr.VerifyEvent(out); err != nil {
		t.Errorf("VerifyEvent(signed) = %v", err)
	}
	if out.PubKey != user.PublicKey() || out.Kind != in.Kind || out.CreatedAt != in.CreatedAt || out.Content != in.Content || !slices.EqualFunc(out.Tags, in.Tags, slices.Equal) {
		t.Errorf("SignEvent returned %+v, want the fields of %+v signed by %s", out, in, user.PublicKey())
	}
	if in.Sig != "" || in.ID != "" {
		t.Errorf("SignEvent modified its input: %+v", in)
	}
	// A zero created_at is set to now.
	out, err = c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 7, Content: "+"})
	if err != nil {
		t.Fatalf("SignEvent: %v", err)
	}
	if d := time.Since(time.Unix(out.CreatedAt, 0)); d < 0 || d > time.Minute {
		t.Errorf("created_at = %d, want about now", out.CreatedAt)
	}
}

func TestSignEventTampered(t *testing.T) {
	t.Parallel()
	other := newKey(t)
	user := newKey(t)
	cases := []struct {
		name   string
		tamper func(*nostr.Event)
		want   string
	}{
		{"signature", func(e *nostr.Event) { e.Sig = flipHex(e.Sig) }, "not a valid signature"},
		{"id", func(e *nostr.Event) { e.ID = flipHex(e.ID) }, "does not match"},
		{"other signer", func(e *nostr.Event) { _ = nostr.SignEvent(other, e) }, "not by the user"},
		{"content", func(e *nostr.Event) { e.Content = "pay me"; _ = nostr.SignEvent(user, e) }, "content changed"},
		{"kind", func(e *nostr.Event) { e.Kind = 4; _ = nostr.SignEvent(user, e) }, "kind changed"},
		{"tags", func(e *nostr.Event) {
			e.Tags = append(e.Tags, []string{"p", other.PublicKey()})
			_ = nostr.SignEvent(user, e)
		}, "tags changed"},
		{"created_at", func(e *nostr.Event) { e.CreatedAt++; _ = nostr.SignEvent(user, e) }, "created_at changed"},
	}
	relay := nip46test.NewRelay(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, UserKey: user, TamperSignedEvent: tc.tamper})
			c := dial(t, nip46.Config{BunkerURL: bunker.URL()})
			out, err := c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 1, CreatedAt: 1714078911, Content: "hi"})
			if !errors.Is(err, nip46.ErrBadSignature) {
				t.Fatalf("SignEvent = %+v, %v; want ErrBadSignature", out, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SignEvent error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func flipHex(s string) string {
	b := []byte(s)
	if b[0] == '0' {
		b[0] = '1'
	} else {
		b[0] = '0'
	}
	return string(b)
}

func TestEncryptDecryptRoundTrips(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	user, peer := newKey(t), newKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, UserKey: user, SignerKey: newKey(t)})
	c := dial(t, nip46.Config{BunkerURL: bunker.URL()})
	ctx := ctxFor(t, 10*time.Second)
	plain := "secret message ✓ " + strings.Repeat("x", 300)
	peerNpub, _ := nostr.EncodeNpub(peer.PublicKey())

	t.Run("nip44", func(t *testing.T) {
		ct, err := c.Nip44Encrypt(ctx, peerNpub, plain)
		if err != nil {
			t.Fatalf("Nip44Encrypt: %v", err)
		}
		ck, err := nostr.ConversationKey(peer, user.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := nostr.Nip44Decrypt(ct, ck); err != nil || got != plain {
			t.Errorf("peer decrypts the remote ciphertext: %v (plaintext matches: %v)", err, got == plain)
		}
		ct2, err := nostr.Nip44Encrypt(plain, ck)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Nip44Decrypt(ctx, peer.PublicKey(), ct2); err != nil || got != plain {
			t.Errorf("Nip44Decrypt of the peer's ciphertext: %v (plaintext matches: %v)", err, got == plain)
		}
	})
	t.Run("nip04", func(t *testing.T) {
		ct, err := c.Nip04Encrypt(ctx, peer.PublicKey(), plain)
		if err != nil {
			t.Fatalf("Nip04Encrypt: %v", err)
		}
		if got, err := nostr.Nip04Decrypt(peer, user.PublicKey(), ct); err != nil || got != plain {
			t.Errorf("peer decrypts the remote ciphertext: %v (plaintext matches: %v)", err, got == plain)
		}
		ct2, err := nostr.Nip04Encrypt(peer, user.PublicKey(), plain)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Nip04Decrypt(ctx, peer.PublicKey(), ct2); err != nil || got != plain {
			t.Errorf("Nip04Decrypt of the peer's ciphertext: %v (plaintext matches: %v)", err, got == plain)
		}
	})
	t.Run("bad peer", func(t *testing.T) {
		if _, err := c.Nip44Encrypt(ctx, "nope", plain); err == nil || strings.Contains(err.Error(), plain) {
			t.Errorf("Nip44Encrypt(bad peer) error = %v, want an error without the plaintext", err)
		}
	})
	t.Run("remote error", func(t *testing.T) {
		_, err := c.Nip44Decrypt(ctx, peer.PublicKey(), "not a nip44 payload")
		if !errors.Is(err, nip46.ErrRejected) {
			t.Errorf("Nip44Decrypt(garbage) error = %v, want ErrRejected", err)
		}
	})
}

func TestRejected(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, Reject: map[string]string{"sign_event": "user denied the request"},
	})
	c := dial(t, nip46.Config{BunkerURL: bunker.URL()})
	_, err := c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 1, Content: "x"})
	if !errors.Is(err, nip46.ErrRejected) || !strings.Contains(err.Error(), "user denied the request") || !strings.Contains(err.Error(), "sign_event") {
		t.Errorf("SignEvent error = %v, want ErrRejected naming sign_event and the bunker's message", err)
	}
}

func TestWrongSecret(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, Secret: testSecret})
	u, _ := url.Parse(bunker.URL())
	q := u.Query()
	q.Set("secret", "wrong-"+testSecret)
	u.RawQuery = q.Encode()
	key := newKey(t)

	c, err := nip46.Dial(ctxFor(t, 5*time.Second), nip46.Config{BunkerURL: u.String(), ClientKey: key})
	if err == nil {
		_ = c.Close()
		t.Fatal("Dial with a wrong secret succeeded")
	}
	if !errors.Is(err, nip46.ErrRejected) || !strings.Contains(err.Error(), "invalid secret") || !strings.Contains(err.Error(), "connect") {
		t.Errorf("Dial error = %v, want ErrRejected naming connect and \"invalid secret\"", err)
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Errorf("Dial error %q contains the secret", err)
	}
	// Nothing left open: only the bunker's connection remains.
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(relay.Connections() == 1, "not yet: the client's relay connection to close")
	})
	// A caller's key is left to the caller when Dial fails.
	if key.Wiped() {
		t.Error("Dial wiped the caller's key although it failed")
	}
	// The right secret works, with the same key.
	c = dial(t, nip46.Config{BunkerURL: bunker.URL(), ClientKey: key})
	if c.PublicKey() != bunker.UserPubkey() {
		t.Errorf("PublicKey() = %s, want %s", c.PublicKey(), bunker.UserPubkey())
	}
}

func TestAuthURL(t *testing.T) {
	t.Parallel()
	const authURL = "https://bunker.example/approve?request=42"
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, AuthURL: authURL, AuthFor: []string{"sign_event"},
	})
	got := make(chan string, 4)
	c := dial(t, nip46.Config{BunkerURL: bunker.URL(), OnAuthURL: func(u string) { got <- u }})

	type result struct {
		ev  *nostr.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		ev, err := c.SignEvent(ctxFor(t, 20*time.Second), &nostr.Event{Kind: 1, Content: "needs approval"})
		done <- result{ev, err}
	}()
	select {
	case u := <-got:
		if u != authURL {
			t.Errorf("OnAuthURL(%q), want %q", u, authURL)
		}
	case r := <-done:
		t.Fatalf("SignEvent returned before the auth challenge: %+v", r)
	case <-time.After(5 * time.Second):
		t.Fatal("OnAuthURL was not called")
	}
	if st := c.State(); st.PendingAuthURL != authURL {
		t.Errorf("State().PendingAuthURL = %q, want %q", st.PendingAuthURL, authURL)
	}
	select {
	case r := <-done:
		t.Fatalf("SignEvent returned before approval: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	bunker.Approve()
	r := <-done
	if r.err != nil {
		t.Fatalf("SignEvent after approval: %v", r.err)
	}
	if err := nostr.VerifyEvent(r.ev); err != nil || r.ev.PubKey != bunker.UserPubkey() {
		t.Errorf("signed event %+v: %v", r.ev, err)
	}
	if st := c.State(); st.PendingAuthURL != "" {
		t.Errorf("State().PendingAuthURL = %q after the answer, want \"\"", st.PendingAuthURL)
	}
	// Only the first sign_event is challenged.
	if _, err := c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 1, Content: "again"}); err != nil {
		t.Errorf("second SignEvent: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("OnAuthURL called again: %q", <-got)
	}
}

func TestAuthURLTimeout(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, AuthURL: "https://bunker.example/ok", AuthFor: []string{"nip44_encrypt"},
	})
	auth := make(chan string, 1)
	c := dial(t, nip46.Config{BunkerURL: bunker.URL(), OnAuthURL: func(u string) { auth <- u }})
	// The deadline leaves the challenge time to come on a loaded machine
	// (1.5 s was short for two relay round trips under load).
	_, err := c.Nip44Encrypt(ctxFor(t, 5*time.Second), bunker.UserPubkey(), "x")
	if len(auth) != 1 {
		t.Fatalf("no auth challenge came within the request's deadline (error %v)", err)
	}
	if !errors.Is(err, nip46.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "approve") {
		t.Errorf("Nip44Encrypt error = %v, want ErrTimeout saying the approval never came", err)
	}
}

func TestNIP04OnlyBunker(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	user := newKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, UserKey: user, SignerKey: newKey(t), Secret: testSecret, NIP04Only: true,
	})
	var progress []string
	c := dial(t, nip46.Config{
		BunkerURL: bunker.URL(), NIP04Fallback: 200 * time.Millisecond,
		OnProgress: func(m string) { progress = append(progress, m) },
	})
	if !slices.ContainsFunc(progress, func(m string) bool { return strings.Contains(m, "NIP-04") }) {
		t.Errorf("progress messages %q, want one about the NIP-04 retry", progress)
	}
	for _, m := range progress {
		if strings.Contains(m, testSecret) {
			t.Errorf("progress message %q contains the secret", m)
		}
	}
	if c.PublicKey() != user.PublicKey() {
		t.Errorf("PublicKey() = %s, want %s", c.PublicKey(), user.PublicKey())
	}
	out, err := c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 1, Content: "old bunker"})
	if err != nil {
		t.Fatalf("SignEvent: %v", err)
	}
	if err := nostr.VerifyEvent(out); err != nil {
		t.Error(err)
	}
	// The NIP-44 connect was ignored; everything the bunker read was NIP-04.
	reqs := bunker.Received()
	if got, want := methods(reqs), []string{"connect", "get_public_key", "sign_event"}; !slices.Equal(got, want) {
		t.Errorf("bunker received %v, want %v", got, want)
	}
	for _, r := range reqs {
		if !r.NIP04 {
			t.Errorf("request %s was not NIP-04", r.Method)
		}
	}
}

func TestRelayDropReconnects(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}})
	// The first retry comes 1-2 s after the drop: long enough to see even
	// on a loaded machine (at 150-300 ms, a poll delayed that long would
	// find the link up again and wait in vain for the drop).
	c := dial(t, nip46.Config{BunkerURL: bunker.URL(), ReconnectMin: 2 * time.Second})
	if err := c.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if n := relay.DropConnections(); n != 2 {
		t.Fatalf("DropConnections() = %d, want 2 (bunker and client)", n)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(c.State().State != nip46.LinkConnected, "not yet: the client to see the drop")
	})
	if st := c.State(); st.LastError == "" {
		t.Errorf("State() = %+v after the drop, want a LastError", st)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(relay.Connections() == 2 && c.State().State == nip46.LinkConnected, "not yet: both to reconnect")
	})
	out, err := c.SignEvent(ctxFor(t, 5*time.Second), &nostr.Event{Kind: 1, Content: "after the drop"})
	if err != nil {
		t.Fatalf("SignEvent after reconnecting: %v", err)
	}
	if out.PubKey != bunker.UserPubkey() {
		t.Errorf("signed by %s, want %s", out.PubKey, bunker.UserPubkey())
	}
	if st := c.State(); st.LastError != "" {
		t.Errorf("State().LastError = %q once reconnected, want \"\"", st.LastError)
	}
}

func TestTwoRelaysOneDown(t *testing.T) {
	t.Parallel()
	up, down := nip46test.NewRelay(t), nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{up.URL(), down.URL()}})
	down.Close()
	c := dial(t, nip46.Config{BunkerURL: bunker.URL()})
	if err := c.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Ping with one relay down: %v", err)
	}
	st := c.State()
	if st.State != nip46.LinkConnected || !strings.Contains(st.LastError, down.URL()) {
		t.Errorf("State() = %+v, want connected with an error naming %s", st, down.URL())
	}
}

func TestUnreachableRelay(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		relay := nip46test.NewRelay(t)
		bunkerURL := "bunker://" + testPubkey(t) + "?relay=" + url.QueryEscape(relay.URL()) + "&secret=" + testSecret
		relay.Close()
		ctx := ctxFor(t, 5*time.Second)
		c, err := nip46.Dial(ctx, nip46.Config{BunkerURL: bunkerURL})
		if err == nil {
			_ = c.Close()
			t.Fatal("Dial succeeded with no relay")
		}
		if !errors.Is(err, nip46.ErrLinkDown) || !strings.Contains(err.Error(), relay.URL()) {
			t.Errorf("Dial error = %v, want ErrLinkDown naming the relay", err)
		}
		if ctx.Err() != nil {
			t.Errorf("Dial waited for its whole context (%v), want it to fail as soon as the relay refused", ctx.Err())
		}
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("error %q contains the secret", err)
		}
	})
	t.Run("hanging", func(t *testing.T) {
		// A TCP listener that never answers the websocket handshake.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		bunkerURL := "bunker://" + testPubkey(t) + "?relay=ws://" + ln.Addr().String()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		c, err := nip46.Dial(ctx, nip46.Config{BunkerURL: bunkerURL})
		if err == nil {
			_ = c.Close()
			t.Fatal("Dial succeeded with a relay that never answers")
		}
		if !errors.Is(err, nip46.ErrLinkDown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Dial error = %v, want ErrLinkDown and DeadlineExceeded", err)
		}
	})
}

func TestCloseFailsInFlight(t *testing.T) {
	t.Parallel()
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
		Relays: []string{relay.URL()}, AuthURL: "https://bunker.example/ok", AuthFor: []string{"sign_event"},
	})
	auth := make(chan string, 1)
	key := newKey(t)
	c := dial(t, nip46.Config{BunkerURL: bunker.URL(), ClientKey: key, OnAuthURL: func(u string) { auth <- u }})
	done := make(chan error, 1)
	go func() {
		_, err := c.SignEvent(context.Background(), &nostr.Event{Kind: 1, Content: "never approved"})
		done <- err
	}()
	select {
	case <-auth:
	case <-time.After(5 * time.Second):
		t.Fatal("no auth challenge")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, nip46.ErrClosed) {
			t.Errorf("in-flight SignEvent error = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight SignEvent did not return after Close")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !key.Wiped() {
		t.Error("Close did not wipe the client key")
	}
	if _, err := c.Nip44Encrypt(context.Background(), bunker.UserPubkey(), "x"); !errors.Is(err, nip46.ErrClosed) {
		t.Errorf("Nip44Encrypt after Close error = %v, want ErrClosed", err)
	}
	if st := c.State(); st.State != nip46.LinkDisconnected {
		t.Errorf("State() after Close = %+v, want disconnected", st)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(relay.Connections() == 1, "not yet: the client's relay connection to close")
	})
}
