package signer

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// TestNIP46Login: a login by bunker:// URL through a real relay and bunker;
// signing and encryption go through the bunker; an auth_url challenge is
// published as progress and the login completes once the bunker answers.
func TestNIP46Login(t *testing.T) {
	t.Parallel()
	e := start(t)
	relay := nip46test.NewRelay(t)
	user := newKey(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, UserKey: user,
		SignerKey: newKey(t), Secret: "s3cret-connect-token"})

	r := e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_NIP46, BunkerUrl: bunker.URL()})
	if r.GetPubkey() != user.PublicKey() || r.GetMethod() != signerv1.Method_METHOD_NIP46 {
		t.Fatalf("login: %v", r)
	}
	st := e.status("a")
	if st.GetLinkState() != "connected" || st.GetPubkey() != user.PublicKey() {
		t.Fatalf("status: %v", st)
	}
	ev, err := e.sign("a", "https://app.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, ev, user.PublicKey())

	// NIP-44 and NIP-04 through the bunker, to a local identity and back.
	peer := e.mustLogin(&signerv1.Login{Scope: "peer", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	for _, scheme := range []signerv1.Scheme{signerv1.Scheme_SCHEME_NIP44, signerv1.Scheme_SCHEME_NIP04} {
		enc := &signerv1.EncryptResponse{}
		if err := e.call("encrypt", &signerv1.Encrypt{Scope: "a", Scheme: scheme, PeerPubkey: peer.GetPubkey(), Text: "through the bunker"}, enc); err != nil {
			t.Fatalf("%s encrypt: %v", scheme, err)
		}
		dec := &signerv1.DecryptResponse{}
		if err := e.call("decrypt", &signerv1.Decrypt{Scope: "peer", Scheme: scheme, PeerPubkey: user.PublicKey(), Text: enc.GetText()}, dec); err != nil || dec.GetText() != "through the bunker" {
			t.Fatalf("%s decrypt: %q %v", scheme, dec.GetText(), err)
		}
		back := &signerv1.EncryptResponse{}
		if err := e.call("encrypt", &signerv1.Encrypt{Scope: "peer", Scheme: scheme, PeerPubkey: user.PublicKey(), Text: "and back"}, back); err != nil {
			t.Fatal(err)
		}
		if err := e.call("decrypt", &signerv1.Decrypt{Scope: "a", Scheme: scheme, PeerPubkey: peer.GetPubkey(), Text: back.GetText()}, dec); err != nil || dec.GetText() != "and back" {
			t.Fatalf("%s decrypt through the bunker: %q %v", scheme, dec.GetText(), err)
		}
	}
	if strings.Contains(e.logs.String(), "s3cret-connect-token") {
		t.Fatal("the bunker secret reached the log")
	}

	// Logout closes the connection: the bunker's next request fails.
	if err := e.call("logout", &signerv1.Logout{Scope: "a"}, &signerv1.LogoutResponse{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.sign("a", "", 1)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "not logged in")
}

func TestNIP46AuthURL(t *testing.T) {
	t.Parallel()
	e := start(t)
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, Secret: "tok",
		AuthURL: "https://bunker.example/approve?req=42", AuthFor: []string{"connect"}})

	progress := make(chan *signerv1.LoginProgress, 16)
	inbox := nats.NewInbox()
	sub, err := e.c.NATS().Subscribe(inbox, func(m *nats.Msg) {
		p := &signerv1.LoginProgress{}
		if proto.Unmarshal(m.Data, p) == nil {
			progress <- p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	done := make(chan error, 1)
	var resp signerv1.LoginResponse
	go func() {
		done <- e.call("login", &signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_NIP46, BunkerUrl: bunker.URL(), ProgressSubject: inbox}, &resp)
	}()
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case p := <-progress:
			if p.GetAuthUrl() != "" {
				if p.GetAuthUrl() != "https://bunker.example/approve?req=42" || !strings.Contains(p.GetMessage(), "Open https://bunker.example/approve?req=42") {
					t.Fatalf("progress: %v", p)
				}
				got = true
			}
		case err := <-done:
			t.Fatalf("login ended before the auth_url was approved: %v", err)
		case <-deadline:
			t.Fatal("no auth_url progress")
		}
	}
	if st := e.status("a"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
		t.Fatalf("logged in before the bunker answered: %v", st)
	}
	select {
	case err := <-done:
		t.Fatalf("login ended before the approval: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	bunker.Approve()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if resp.GetPubkey() != bunker.UserPubkey() {
		t.Fatalf("pubkey %s, want %s", resp.GetPubkey(), bunker.UserPubkey())
	}
}

func TestNIP46LoginErrors(t *testing.T) {
	t.Parallel()
	e := start(t)
	relay := nip46test.NewRelay(t)
	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, Secret: "right"})
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	pk := bunker.SignerPubkey()
	npub, _ := nostr.EncodeNpub(pk)
	for _, c := range []struct {
		url  string
		code commonv1.ErrorCode
		want string
	}{
		{"", commonv1.ErrorCode_INVALID_ARGUMENT, "bunker_url is required"},
		{"https://" + pk, commonv1.ErrorCode_INVALID_ARGUMENT, "bunker://"},
		{"bunker://" + badChecksum(npub) + "?relay=" + relay.URL(), commonv1.ErrorCode_INVALID_ARGUMENT, "checksum"},
		{"bunker://" + pk, commonv1.ErrorCode_INVALID_ARGUMENT, "relay"},
		{"bunker://" + pk + "?relay=http://x.example&secret=hidden-one", commonv1.ErrorCode_INVALID_ARGUMENT, "ws"},
		{strings.Replace(bunker.URL(), "secret=right", "secret=wrong-secret-here", 1), commonv1.ErrorCode_FORBIDDEN, "secret"},
		{"bunker://" + pk + "?relay=ws://127.0.0.1:1", commonv1.ErrorCode_UNAVAILABLE, "unreachable"},
	} {
		_, err := e.login(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_NIP46, BunkerUrl: c.url})
		wantErr(t, err, c.code, c.want)
		if strings.Contains(err.Error(), "hidden-one") || strings.Contains(err.Error(), "wrong-secret-here") {
			t.Fatalf("error quotes the secret: %v", err)
		}
		if st := e.status("a"); st.GetPubkey() != vecPub12 || st.GetMethod() != signerv1.Method_METHOD_LOCAL {
			t.Fatalf("%q: a failed login changed the scope: %v", c.url, st)
		}
	}
}

// badChecksum changes the last character of a bech32 string.
func badChecksum(s string) string {
	last := byte('q')
	if s[len(s)-1] == 'q' {
		last = 'p'
	}
	return s[:len(s)-1] + string(last)
}
