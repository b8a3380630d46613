package signer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// TestRemember: a remembered identity is an NIP-49 file under the data dir
// that another scope, and a restarted signer, can log in with by pubkey.
func TestRemember(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Passphrase: "tr0ub4dor & 3", RememberLogN: 4}
	e := startWith(t, cfg)
	npub12, _ := nostr.EncodeNpub(vecPub12)

	// Refusals leave the scope as it was.
	_, err := e.login(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_READONLY, Pubkey: vecPub12, Remember: true})
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "remember only applies to local and seed logins")
	_, err = e.login(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, Pubkey: npub12})
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no remembered identity "+npub12, "remember: true first")
	if st := e.status("a"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT || len(st.GetRemembered()) != 0 {
		t.Fatalf("after refusals: %v", st)
	}

	e.mustLogin(&signerv1.Login{Scope: "a", Owner: "alice", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic12, Remember: true})
	b, err := os.ReadFile(filepath.Join(e.s.identitiesDir("alice"), npub12+".ncryptsec"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "ncryptsec1") || strings.Contains(string(b), vecSecret12) {
		t.Fatalf("file: %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(e.s.identitiesDir("alice"), npub12+".ncryptsec")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v", fi.Mode())
	}
	statusOf := func(scope, owner string) *signerv1.StatusResponse {
		st := &signerv1.StatusResponse{}
		if err := e.call("status", &signerv1.Status{Scope: scope, Owner: owner}, st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := statusOf("b", "alice"); len(st.GetRemembered()) != 1 || st.GetRemembered()[0] != npub12 {
		t.Fatalf("remembered: %q", st.GetRemembered())
	}
	// Another owner neither sees nor loads it.
	if st := statusOf("c", "mallory"); len(st.GetRemembered()) != 0 {
		t.Fatalf("another owner sees %q", st.GetRemembered())
	}
	_, err = e.login(&signerv1.Login{Scope: "c", Owner: "mallory", Method: signerv1.Method_METHOD_LOCAL, Pubkey: npub12})
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no remembered identity "+npub12)
	// Another scope of the same owner logs in by pubkey and signs with the
	// same key.
	r := e.mustLogin(&signerv1.Login{Scope: "b", Owner: "alice", Method: signerv1.Method_METHOD_LOCAL, Pubkey: npub12})
	if r.GetPubkey() != vecPub12 {
		t.Fatalf("remembered login: %s", r.GetPubkey())
	}
	ev, err := e.sign("b", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, ev, vecPub12)
	if strings.Contains(e.logs.String(), cfg.Passphrase) || strings.Contains(e.logs.String(), vecSecret12) {
		t.Fatal("a secret reached the log")
	}

	// A signer with another passphrase says so; one without says it has none.
	e2 := startWith(t, Config{DataDir: dir, Passphrase: "wrong"})
	_, err = e2.login(&signerv1.Login{Scope: "a", Owner: "alice", Method: signerv1.Method_METHOD_LOCAL, Pubkey: vecPub12})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "cannot decrypt remembered identity "+npub12, "SOVEREIGN_SIGNER_PASSPHRASE")
	e3 := startWith(t, Config{DataDir: dir})
	_, err = e3.login(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12, Remember: true})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "remember is refused", "SOVEREIGN_SIGNER_PASSPHRASE")
	if st := e3.status("a"); st.GetState() != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
		t.Fatal("a refused remember left an identity")
	}
	_, err = e3.login(&signerv1.Login{Scope: "a", Owner: "alice", Method: signerv1.Method_METHOD_LOCAL, Pubkey: npub12})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "no passphrase to decrypt it")
}

// TestAskHook: "ask" goes to Config.Ask when there is one.
func TestAskHook(t *testing.T) {
	t.Parallel()
	var asked []Request
	e := startWith(t, Config{Ask: func(_ context.Context, scope string, r Request) error {
		asked = append(asked, r)
		if r.Op == OpDecrypt {
			return errors.New("denied by a person")
		}
		return nil
	}})
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	r, err := e.sign("a", "https://app.example", 0)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, r, vecPub12)
	err = e.call("decrypt", &signerv1.Decrypt{Scope: "a", Origin: "https://app.example", TopOrigin: "https://app.example", PeerPubkey: vecPub24, Text: "x"}, &signerv1.DecryptResponse{})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "decrypting for https://app.example needs approval", "it was not approved: denied by a person")
	if len(asked) != 2 || asked[0].Kind != 0 || asked[0].Op != OpSign || asked[1].Op != OpDecrypt {
		t.Fatalf("asked %v", asked)
	}
}
