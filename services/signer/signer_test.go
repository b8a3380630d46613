package signer

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

// NIP-06 test vectors (../shared/specs/nips/06.md).
const (
	vecMnemonic12 = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	vecSecret12   = "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a"
	vecPub12      = "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"
	vecMnemonic24 = "what bleak badge arrange retreat wolf trade produce cricket blur garlic valid proud rude strong choose busy staff weather area salt hollow arm fade"
	vecPub24      = "d41b22899549e1f3d335a31002cfd382174006e166d3e658e3a5eecdb6463573"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a signer on a real embedded NATS server, a client bus, and the
// signer's log output.
type env struct {
	t    *testing.T
	s    *Service
	c    *bus.Conn
	logs *syncBuffer
}

func start(t *testing.T) *env { return startWith(t, Config{}) }

// startWith is start with cfg (its Logger and LoginTimeout are set here).
func startWith(t *testing.T, cfg Config) *env {
	t.Helper()
	srv := natstest.Server(t)
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.LoginTimeout = 5 * time.Second
	if cfg.ApprovalTimeout == 0 {
		cfg.ApprovalTimeout = 300 * time.Millisecond // nobody decides in these tests
	}
	s, err := New(t.Context(), cfg, natstest.Bus(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kittest.RunService(t, s)
	return &env{t: t, s: s, c: natstest.Bus(t, srv), logs: logs}
}

// identity is scope's identity in the table (nil if none).
func (e *env) identity(scope string) *identity {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.s.ids[scope]
}

// call sends req to the signer endpoint name and decodes into resp.
func (e *env) call(name string, req, resp proto.Message) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return e.c.Request(ctx, e.c.Subject("signer", name), req, resp)
}

func (e *env) login(req *signerv1.Login) (*signerv1.LoginResponse, error) {
	e.t.Helper()
	resp := &signerv1.LoginResponse{}
	return resp, e.call("login", req, resp)
}

func (e *env) mustLogin(req *signerv1.Login) *signerv1.LoginResponse {
	e.t.Helper()
	resp, err := e.login(req)
	if err != nil {
		e.t.Fatalf("login %s: %v", methodName(req.GetMethod()), err)
	}
	return resp
}

func (e *env) status(scope string) *signerv1.StatusResponse {
	e.t.Helper()
	resp := &signerv1.StatusResponse{}
	if err := e.call("status", &signerv1.Status{Scope: scope}, resp); err != nil {
		e.t.Fatalf("status: %v", err)
	}
	return resp
}

func (e *env) sign(scope, origin string, kind int64) (*signerv1.SignEventResponse, error) {
	e.t.Helper()
	resp := &signerv1.SignEventResponse{}
	err := e.call("sign_event", &signerv1.SignEvent{Scope: scope, Origin: origin, TopOrigin: origin, Event: &signerv1.UnsignedEvent{
		Kind: kind, CreatedAt: 1700000000, Content: "hello from the test",
		Tags: []*signerv1.Tag{{Values: []string{"p", vecPub24, "wss://relay.example"}}, {Values: []string{"t", "sovereign"}}},
	}}, resp)
	return resp, err
}

// verified checks that a signed event's id and BIP-340 signature hold for
// pubkey.
func verified(t *testing.T, r *signerv1.SignEventResponse, pubkey string) {
	t.Helper()
	ev := &nostr.Event{ID: r.GetId(), PubKey: r.GetPubkey(), CreatedAt: r.GetCreatedAt(), Kind: int(r.GetKind()), Content: r.GetContent(), Sig: r.GetSig()}
	for _, tg := range r.GetTags() {
		ev.Tags = append(ev.Tags, tg.GetValues())
	}
	if err := nostr.VerifyEvent(ev); err != nil {
		t.Fatalf("signed event does not verify: %v", err)
	}
	if ev.PubKey != pubkey {
		t.Fatalf("signed by %s, want %s", ev.PubKey, pubkey)
	}
	if len(ev.Tags) != 2 || ev.Tags[0][2] != "wss://relay.example" || ev.Content != "hello from the test" || ev.CreatedAt != 1700000000 {
		t.Fatalf("signed event lost fields: %+v", ev)
	}
}

// wantErr checks err's code and that its message contains every part.
func wantErr(t *testing.T, err error, code commonv1.ErrorCode, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s %q", code, parts)
	}
	if got := bus.CodeOf(err); got != code {
		t.Fatalf("error code %s (%v), want %s", got, err, code)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

func newKey(t *testing.T) *nostr.SecretKey {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Wipe)
	return k
}

func TestLoginLocalSeedReadonly(t *testing.T) {
	t.Parallel()
	e := start(t)
	k := newKey(t)
	nsec := nostr.EncodeNsec(k)
	npub12, _ := nostr.EncodeNpub(vecPub12)

	cases := []struct {
		name string
		req  *signerv1.Login
		pub  string
	}{
		{"local nsec", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: nsec}, k.PublicKey()},
		{"local hex", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: strings.ToUpper(vecSecret12)}, vecPub12},
		{"seed 12 words", &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic12}, vecPub12},
		{"seed 24 words", &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: "  " + vecMnemonic24 + "\n"}, vecPub24},
		{"readonly npub", &signerv1.Login{Method: signerv1.Method_METHOD_READONLY, Pubkey: npub12}, vecPub12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scope := "scope-" + tc.name
			tc.req.Scope = scope
			resp := e.mustLogin(tc.req)
			npub, _ := nostr.EncodeNpub(tc.pub)
			if resp.GetPubkey() != tc.pub || resp.GetNpub() != npub || resp.GetMethod() != tc.req.GetMethod() {
				t.Fatalf("login answered %v, want pubkey %s npub %s", resp, tc.pub, npub)
			}
			st := e.status(scope)
			if st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_IN || st.GetPubkey() != tc.pub || st.GetMethod() != tc.req.GetMethod() || st.GetLinkState() != "" {
				t.Fatalf("status %v", st)
			}
			gp := &signerv1.GetPublicKeyResponse{}
			if err := e.call("get_public_key", &signerv1.GetPublicKey{Scope: scope}, gp); err != nil || gp.GetPubkey() != tc.pub {
				t.Fatalf("get_public_key = %v, %v", gp, err)
			}
			signed, err := e.sign(scope, "https://app.example", 1)
			if tc.req.GetMethod() == signerv1.Method_METHOD_READONLY {
				wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "read-only identity: it can only give its public key")
				err = e.call("decrypt", &signerv1.Decrypt{Scope: scope, PeerPubkey: vecPub24, Text: "AgAAAA"}, &signerv1.DecryptResponse{})
				wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "read-only identity")
				err = e.call("encrypt", &signerv1.Encrypt{Scope: scope, PeerPubkey: vecPub24, Text: "hi"}, &signerv1.EncryptResponse{})
				wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "read-only identity")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			verified(t, signed, tc.pub)
		})
	}
	// The secrets given to login appear in no log record.
	logs := e.logs.String()
	for _, secret := range []string{nsec, vecSecret12, strings.ToUpper(vecSecret12), "leader monkey", "what bleak", "scope-local"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log carries a secret or scope key %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "method=seed") {
		t.Fatalf("the log does not say the login method:\n%s", logs)
	}
}

func TestSeedAccountAndPassphrase(t *testing.T) {
	t.Parallel()
	e := start(t)
	want, err := nostr.KeyFromMnemonic(vecMnemonic12, "correct horse", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Wipe()
	resp := e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic12, Passphrase: "correct horse", Account: 3})
	if resp.GetPubkey() != want.PublicKey() || resp.GetPubkey() == vecPub12 {
		t.Fatalf("account 3 with passphrase: pubkey %s, want %s", resp.GetPubkey(), want.PublicKey())
	}
	if strings.Contains(e.logs.String(), "correct horse") {
		t.Fatal("the passphrase was logged")
	}
}

func TestOriginPolicy(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	for _, kind := range []int64{0, 3, 5, 10002} {
		_, err := e.sign("a", "https://app.example", kind)
		wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "needs approval", "https://app.example")
	}
	for _, kind := range []int64{1, 7, 30023} {
		r, err := e.sign("a", "https://app.example", kind)
		if err != nil {
			t.Fatalf("kind %d: %v", kind, err)
		}
		verified(t, r, vecPub12)
	}
	// No origin: the agent itself, not a page.
	r, err := e.sign("a", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, r, vecPub12)
	err = e.call("decrypt", &signerv1.Decrypt{Scope: "a", Origin: "https://app.example", PeerPubkey: vecPub24, Text: "x"}, &signerv1.DecryptResponse{})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "decrypting for https://app.example needs approval")
	_, err = e.sign("a", "https://app.example", 70000)
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "kind 70000")
}

func TestEncryptDecryptBetweenScopes(t *testing.T) {
	t.Parallel()
	e := start(t)
	alice := e.mustLogin(&signerv1.Login{Scope: "alice", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: nostr.EncodeNsec(newKey(t))})
	bob := e.mustLogin(&signerv1.Login{Scope: "bob", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic24})
	for _, scheme := range []signerv1.Scheme{signerv1.Scheme_SCHEME_NIP44, signerv1.Scheme_SCHEME_UNSPECIFIED, signerv1.Scheme_SCHEME_NIP04} {
		plain := "meet at noon · " + scheme.String()
		enc := &signerv1.EncryptResponse{}
		if err := e.call("encrypt", &signerv1.Encrypt{Scope: "alice", Origin: "https://chat.example", TopOrigin: "https://chat.example", Scheme: scheme, PeerPubkey: bob.GetNpub(), Text: plain}, enc); err != nil {
			t.Fatalf("%s encrypt: %v", scheme, err)
		}
		if enc.GetText() == "" || strings.Contains(enc.GetText(), "noon") {
			t.Fatalf("%s ciphertext %q", scheme, enc.GetText())
		}
		if scheme == signerv1.Scheme_SCHEME_NIP04 != strings.Contains(enc.GetText(), "?iv=") {
			t.Fatalf("%s payload %q has the wrong format", scheme, enc.GetText())
		}
		dec := &signerv1.DecryptResponse{}
		if err := e.call("decrypt", &signerv1.Decrypt{Scope: "bob", Scheme: scheme, PeerPubkey: alice.GetPubkey(), Text: enc.GetText()}, dec); err != nil {
			t.Fatalf("%s decrypt: %v", scheme, err)
		}
		if dec.GetText() != plain {
			t.Fatalf("%s round trip: got %q, want %q", scheme, dec.GetText(), plain)
		}
	}
	// A payload that is not NIP-44 is a clear error, and a bad peer too.
	err := e.call("decrypt", &signerv1.Decrypt{Scope: "bob", PeerPubkey: alice.GetPubkey(), Text: "not a payload"}, &signerv1.DecryptResponse{})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "decrypt")
	err = e.call("encrypt", &signerv1.Encrypt{Scope: "alice", PeerPubkey: "npub1xyz", Text: "x"}, &signerv1.EncryptResponse{})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "peer_pubkey")
}

func TestScopeIsolation(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.mustLogin(&signerv1.Login{Scope: "A", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	if st := e.status("B"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT || st.GetPubkey() != "" {
		t.Fatalf("scope B sees %v", st)
	}
	_, err := e.sign("B", "", 1)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "not logged in")
	err = e.call("get_public_key", &signerv1.GetPublicKey{Scope: "B"}, &signerv1.GetPublicKeyResponse{})
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "not logged in")
	err = e.call("status", &signerv1.Status{}, &signerv1.StatusResponse{})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "scope is required")
	if st := e.status("A"); st.GetPubkey() != vecPub12 {
		t.Fatalf("scope A: %v", st)
	}
}

func TestBadLoginsKeepState(t *testing.T) {
	t.Parallel()
	e := start(t)
	k := newKey(t)
	nsec := nostr.EncodeNsec(k)
	bad := []byte(nsec)
	if bad[len(bad)-1] == 'q' {
		bad[len(bad)-1] = 'p'
	} else {
		bad[len(bad)-1] = 'q'
	}
	dir, err := os.MkdirTemp("", "sgn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	wrongWord := strings.Replace(vecMnemonic12, "parrot", "parrrot", 1)

	cases := []struct {
		name  string
		req   *signerv1.Login
		code  commonv1.ErrorCode
		parts []string
	}{
		{"bad nsec checksum", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: string(bad)}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"login (local)", "bad checksum"}},
		{"short hex", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12[:60]}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"wrong length"}},
		{"no key", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"nsec_or_hex is required"}},
		{"wrong word", &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: wrongWord}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"login (seed)", "word 3 of 12"}},
		{"readonly nsec", &signerv1.Login{Method: signerv1.Method_METHOD_READONLY, Pubkey: nsec}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"got an nsec"}},
		{"no method", &signerv1.Login{}, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"method is required"}},
		{"unreachable device", &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: filepath.Join(dir, "none.sock")}},
			commonv1.ErrorCode_UNAVAILABLE, []string{"device is unreachable", "none.sock"}},
		{"unknown transport", &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "usb", Device: "/dev/x"}},
			commonv1.ErrorCode_INVALID_ARGUMENT, []string{"unknown transport"}},
	}

	// Each bad login leaves scope "a" logged in as before, and scope "b"
	// logged out.
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic12})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, scope := range []string{"a", "b"} {
				req := proto.Clone(tc.req).(*signerv1.Login)
				req.Scope = scope
				_, err := e.login(req)
				wantErr(t, err, tc.code, tc.parts...)
				for _, secret := range []string{string(bad), nsec, "parrrot", "leader"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("the error %q carries a secret", err)
					}
				}
			}
			if st := e.status("a"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_IN || st.GetPubkey() != vecPub12 || st.GetMethod() != signerv1.Method_METHOD_SEED {
				t.Fatalf("after a failed login, scope a is %v", st)
			}
			if st := e.status("b"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
				t.Fatalf("after a failed login, scope b is %v", st)
			}
		})
	}
	r, err := e.sign("a", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, r, vecPub12)
	if logs := e.logs.String(); strings.Contains(logs, string(bad)) || strings.Contains(logs, "parrrot") {
		t.Fatalf("the log carries a secret:\n%s", logs)
	}
}

func TestReplaceAndLogoutWipe(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	first := e.identity("a")
	resp := e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic24})
	if resp.GetPubkey() != vecPub24 {
		t.Fatalf("switched to %s", resp.GetPubkey())
	}
	if !first.key.Wiped() {
		t.Fatal("the replaced identity's key was not wiped")
	}
	second := e.identity("a")

	out := &signerv1.LogoutResponse{}
	if err := e.call("logout", &signerv1.Logout{Scope: "a"}, out); err != nil || !out.GetWasLoggedIn() {
		t.Fatalf("logout = %v, %v", out, err)
	}
	if !second.key.Wiped() {
		t.Fatal("logout did not wipe the key")
	}
	if st := e.status("a"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
		t.Fatalf("after logout: %v", st)
	}
	_, err := e.sign("a", "", 1)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "not logged in")
	if err := e.call("logout", &signerv1.Logout{Scope: "a"}, out); err != nil || out.GetWasLoggedIn() {
		t.Fatalf("second logout = %v, %v", out, err)
	}

	// Close wipes what is left.
	e.mustLogin(&signerv1.Login{Scope: "c", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	third := e.identity("c")
	if err := e.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !third.key.Wiped() {
		t.Fatal("Close did not wipe the key")
	}
	err = e.call("status", &signerv1.Status{Scope: "c"}, &signerv1.StatusResponse{})
	wantErr(t, err, commonv1.ErrorCode_UNAVAILABLE)
}

// serveDevice serves dev on a unix socket until the test ends and returns
// the socket's path.
func serveDevice(t *testing.T, dev *nsigner.Device) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sgn")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nsigner.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	links := nsigner.ServeListener(ln, dev)
	t.Cleanup(func() {
		links.Close()
		dev.Close()
		os.RemoveAll(dir)
	})
	return path
}

func TestNsignerUnix(t *testing.T) {
	t.Parallel()
	e := start(t)
	dev, err := nsigner.NewSeedDevice(vecMnemonic12, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	dev.Logger = slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
	path := serveDevice(t, dev)
	want, err := nostr.KeyFromMnemonic(vecMnemonic12, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Wipe()

	resp := e.mustLogin(&signerv1.Login{Scope: "hw", Method: signerv1.Method_METHOD_NSIGNER,
		Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: path, Index: 1}})
	if resp.GetPubkey() != want.PublicKey() || resp.GetMethod() != signerv1.Method_METHOD_NSIGNER {
		t.Fatalf("nsigner login: %v, want pubkey %s", resp, want.PublicKey())
	}
	st := e.status("hw")
	if st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_IN || st.GetLinkState() != "connected" || st.GetLinkError() != "" {
		t.Fatalf("status %v", st)
	}
	r, err := e.sign("hw", "https://app.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, r, want.PublicKey())

	// NIP-44 with a local scope, both ways.
	local := e.mustLogin(&signerv1.Login{Scope: "sw", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	enc := &signerv1.EncryptResponse{}
	if err := e.call("encrypt", &signerv1.Encrypt{Scope: "hw", PeerPubkey: local.GetPubkey(), Text: "from the device"}, enc); err != nil {
		t.Fatal(err)
	}
	dec := &signerv1.DecryptResponse{}
	if err := e.call("decrypt", &signerv1.Decrypt{Scope: "sw", PeerPubkey: resp.GetPubkey(), Text: enc.GetText()}, dec); err != nil || dec.GetText() != "from the device" {
		t.Fatalf("decrypt = %q, %v", dec.GetText(), err)
	}
	if err := e.call("encrypt", &signerv1.Encrypt{Scope: "sw", Scheme: signerv1.Scheme_SCHEME_NIP04, PeerPubkey: resp.GetPubkey(), Text: "to the device"}, enc); err != nil {
		t.Fatal(err)
	}
	if err := e.call("decrypt", &signerv1.Decrypt{Scope: "hw", Scheme: signerv1.Scheme_SCHEME_NIP04, PeerPubkey: local.GetPubkey(), Text: enc.GetText()}, dec); err != nil || dec.GetText() != "to the device" {
		t.Fatalf("nip04 decrypt on the device = %q, %v", dec.GetText(), err)
	}

	// A key index the device does not have is a clear error, and leaves
	// the scope as it was.
	_, err = e.login(&signerv1.Login{Scope: "sw", Method: signerv1.Method_METHOD_NSIGNER,
		Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: path, Index: 1 << 31}})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "login (nsigner)")
	if st := e.status("sw"); st.GetPubkey() != vecPub12 {
		t.Fatalf("scope sw after a failed nsigner login: %v", st)
	}

	// Logout closes the link.
	link := e.identity("hw").remote.(nsignerRemote).c
	if err := e.call("logout", &signerv1.Logout{Scope: "hw"}, &signerv1.LogoutResponse{}); err != nil {
		t.Fatal(err)
	}
	if _, err := link.GetPublicKey(context.Background(), 1); err == nil {
		t.Fatal("the nsigner link is still open after logout")
	}
	_, err = e.sign("hw", "", 1)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "not logged in")
}

func TestNsignerRejected(t *testing.T) {
	t.Parallel()
	e := start(t)
	dev, err := nsigner.NewSlotDevice(vecSecret12)
	if err != nil {
		t.Fatal(err)
	}
	dev.Reject = true
	dev.Logger = slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
	path := serveDevice(t, dev)
	e.mustLogin(&signerv1.Login{Scope: "hw", Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: path}})
	_, err = e.sign("hw", "", 1)
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "rejected on the nsigner device")
}

func TestNsignerBadSignatureRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	dev, err := nsigner.NewSlotDevice(vecSecret12)
	if err != nil {
		t.Fatal(err)
	}
	dev.BadSig = true
	dev.Logger = slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
	path := serveDevice(t, dev)
	e.mustLogin(&signerv1.Login{Scope: "hw", Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: path}})
	_, err = e.sign("hw", "", 1)
	wantErr(t, err, commonv1.ErrorCode_UNAVAILABLE, "does not verify")
}

// TestIdentityIdle: an identity nobody uses (its worker died without
// logging it out) is wiped after IdentityIdle; one in use is kept.
func TestIdentityIdle(t *testing.T) {
	t.Parallel()
	e := startWith(t, Config{IdentityIdle: time.Hour})
	e.mustLogin(&signerv1.Login{Scope: "used", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	e.mustLogin(&signerv1.Login{Scope: "orphan", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	orphan, used := e.identity("orphan"), e.identity("used")
	// Both were last used two hours ago...
	e.s.mu.Lock()
	orphan.lastUsed, used.lastUsed = time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)
	e.s.mu.Unlock()
	e.status("used") // ... then a request refreshes one.
	if n := e.s.expireIdle(time.Now().Add(59 * time.Minute)); n != 1 {
		t.Fatalf("%d expired, want the orphan only", n)
	}
	if st := e.status("orphan"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
		t.Fatalf("orphan: %v", st)
	}
	if !orphan.key.Wiped() {
		t.Fatal("the expired identity's key was not wiped")
	}
	if st := e.status("used"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_IN {
		t.Fatalf("used: %v", st)
	}
}

// TestMove: a restored browser session keeps its login: the identity moves
// to the new scope, the old one is logged out, and a bad request is an
// error naming the fields.
func TestMove(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.mustLogin(&signerv1.Login{Scope: "old", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	var resp signerv1.MoveResponse
	if err := e.call("move", &signerv1.Move{FromScope: "old", ToScope: "new"}, &resp); err != nil || !resp.GetMoved() {
		t.Fatalf("move = %v, %v; want moved", &resp, err)
	}
	if st := e.status("new"); st.GetPubkey() != vecPub12 {
		t.Errorf("the new scope after the move: %v", st)
	}
	if st := e.status("old"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
		t.Errorf("the old scope after the move: %v", st)
	}
	if _, err := e.sign("new", "", 1); err != nil {
		t.Errorf("signing in the new scope: %v", err)
	}
	if err := e.call("move", &signerv1.Move{FromScope: "nobody", ToScope: "x"}, &resp); err != nil || resp.GetMoved() {
		t.Errorf("moving a scope without identity = %v, %v; want not moved, no error", &resp, err)
	}
	err := e.call("move", &signerv1.Move{FromScope: "a"}, &resp)
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "to_scope are required")
}
