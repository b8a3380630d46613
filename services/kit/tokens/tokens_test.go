package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

func open(t *testing.T, nc *nats.Conn) *tokens.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := tokens.Open(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, s *tokens.Store, spec tokens.Spec) (string, tokens.Token) {
	t.Helper()
	plain, tok, err := s.Create(ctxT(t), spec)
	if err != nil {
		t.Fatalf("create %q: %v", spec.Name, err)
	}
	return plain, tok
}

var tokenRE = regexp.MustCompile(`^svt_[0-9a-f]{16}_[0-9a-f]{64}$`)

func TestCreateVerifyRevoke(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	s := open(t, natstest.Conn(t, srv))
	if got := s.BucketName(); got != "sov_tokens" {
		t.Errorf("bucket = %q, want sov_tokens", got)
	}
	plain, tok := create(t, s, tokens.Spec{Name: "ci-agent", CreatedBy: "tester",
		URLAllow: []string{"*.example.com"}, URLBlock: []string{"evil.example.com"}, Approve: []string{"eval"}})
	if !tokenRE.MatchString(plain) {
		t.Fatalf("token %q does not look like svt_<16 hex>_<64 hex>", plain)
	}
	if !strings.HasPrefix(plain, "svt_"+tok.ID+"_") || tok.Name != "ci-agent" || tok.CreatedBy != "tester" || tok.Revoked() || tok.State() != tokens.StateActive {
		t.Errorf("created token = %+v (plaintext id part %q)", tok, plain[4:20])
	}
	got, err := s.Verify(plain)
	if err != nil {
		t.Fatalf("verify the new token: %v", err)
	}
	if got.ID != tok.ID || got.Name != "ci-agent" || got.URLAllow[0] != "*.example.com" || got.URLBlock[0] != "evil.example.com" || got.Approve[0] != "eval" {
		t.Errorf("verified token = %+v", got)
	}
	if n, err := s.Count(ctxT(t)); err != nil || n != 1 {
		t.Errorf("count = %d, %v; want 1", n, err)
	}
	if got, ok := s.Lookup(tok.ID); !ok || got.Name != "ci-agent" || got.Revoked() {
		t.Errorf("Lookup(%s) = %+v, %v", tok.ID, got, ok)
	}
	if _, ok := s.Lookup("0123456789abcdef"); ok {
		t.Error("Lookup of an unknown id found a token")
	}

	secret := plain[len(plain)-64:]
	other := strings.Repeat("0", 64)
	if other == secret {
		other = strings.Repeat("1", 64)
	}
	for name, tt := range map[string]struct {
		token string
		want  error
	}{
		"wrong secret": {"svt_" + tok.ID + "_" + other, tokens.ErrWrongSecret},
		"unknown id":   {"svt_0123456789abcdef_" + secret, tokens.ErrUnknown},
		"no prefix":    {strings.TrimPrefix(plain, "svt_"), tokens.ErrMalformed},
		"short":        {plain[:len(plain)-1], tokens.ErrMalformed},
		"upper hex":    {strings.ToUpper(plain[:4]) + plain[4:], tokens.ErrMalformed},
		"empty":        {"", tokens.ErrMalformed},
	} {
		_, err := s.Verify(tt.token)
		if !errors.Is(err, tt.want) || !errors.Is(err, tokens.ErrInvalid) {
			t.Errorf("%s: err = %v, want %v (and ErrInvalid)", name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the secret: %v", name, err)
		}
	}

	revoked, err := s.Revoke(ctxT(t), "ci-agent")
	if err != nil || !revoked.Revoked() || revoked.ID != tok.ID {
		t.Fatalf("revoke = %+v, %v", revoked, err)
	}
	if _, err := s.Verify(plain); !errors.Is(err, tokens.ErrRevoked) || strings.Contains(err.Error(), secret) {
		t.Errorf("verify after revoke: %v, want ErrRevoked without the secret", err)
	}
	if got, ok := s.Lookup(tok.ID); !ok || !got.Revoked() {
		t.Errorf("Lookup after revoke = %+v, %v; want it listed as revoked", got, ok)
	}
	if _, err := s.Revoke(ctxT(t), tok.ID); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Errorf("second revoke by id: %v, want already revoked", err)
	}
	if _, err := s.Revoke(ctxT(t), "ci-agent"); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("revoke of a name no active token has: %v, want ErrNotFound", err)
	}
	if n, err := s.Count(ctxT(t)); err != nil || n != 0 {
		t.Errorf("count after revoke = %d, %v; want 0", n, err)
	}

	// The name is free again; the new token is another token.
	plain2, tok2 := create(t, s, tokens.Spec{Name: "ci-agent"})
	if tok2.ID == tok.ID {
		t.Fatal("re-created token has the revoked one's id")
	}
	if _, err := s.Verify(plain2); err != nil {
		t.Errorf("verify the re-created token: %v", err)
	}
	if _, err := s.Verify(plain); !errors.Is(err, tokens.ErrRevoked) {
		t.Errorf("the old token after re-creating its name: %v, want ErrRevoked", err)
	}
	list, err := s.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != tok2.ID || list[0].Revoked() || list[1].ID != tok.ID || !list[1].Revoked() {
		t.Errorf("list = %+v, want the new active token then the revoked one", list)
	}
	// Revoke by id works too.
	if _, err := s.Revoke(ctxT(t), tok2.ID); err != nil {
		t.Errorf("revoke by id: %v", err)
	}
}

func TestSpecValidation(t *testing.T) {
	t.Parallel()
	s := open(t, natstest.Conn(t, natstest.Server(t)))
	for _, spec := range []tokens.Spec{
		{Name: ""},
		{Name: "CI"},
		{Name: "-ci"},
		{Name: "has space"},
		{Name: strings.Repeat("a", 64)},
		{Name: "ok", Approve: []string{"Eval!"}},
		{Name: "ok", URLAllow: []string{" "}},
	} {
		if _, _, err := s.Create(ctxT(t), spec); err == nil {
			t.Errorf("create %+v succeeded, want a validation error", spec)
		}
	}
	// URL patterns are urlpolicy's; the error names the list and each bad one.
	_, _, err := s.Create(ctxT(t), tokens.Spec{Name: "paths", URLAllow: []string{"*.example.com", "example.com/login"}, URLBlock: []string{"ftp://x"}})
	if err == nil || !strings.Contains(err.Error(), `allow: url pattern "example.com/login"`) || !strings.Contains(err.Error(), `block: url pattern "ftp://x"`) {
		t.Errorf("bad URL patterns: %v", err)
	}
	if _, _, err := s.Create(ctxT(t), tokens.Spec{Name: "hosts", URLAllow: []string{"*.example.com", "https://example.org:8443", "10.0.0.0/8"}, URLBlock: []string{"*"}}); err != nil {
		t.Errorf("good URL patterns: %v", err)
	}
	for _, name := range []string{"a", "ci-agent", "team.bot_2", strings.Repeat("a", 63), "0123456789abcdef"} {
		if _, _, err := s.Create(ctxT(t), tokens.Spec{Name: name}); err != nil {
			t.Errorf("create %q: %v", name, err)
		}
	}
	if _, _, err := s.Create(ctxT(t), tokens.Spec{Name: "ci-agent"}); err == nil ||
		!strings.Contains(err.Error(), `a token named "ci-agent" already exists`) || !strings.Contains(err.Error(), "sovereign token revoke ci-agent") {
		t.Errorf("duplicate name: %v, want an error naming the clash", err)
	}
}

// TestConcurrentNames: of many creates of one name at once, exactly one
// succeeds.
func TestConcurrentNames(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	stores := []*tokens.Store{open(t, natstest.Conn(t, srv)), open(t, natstest.Conn(t, srv))}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 8 {
		wg.Go(func() {
			if _, _, err := stores[i%2].Create(ctxT(t), tokens.Spec{Name: "racer"}); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Errorf("%d creates of one name succeeded, want 1", ok)
	}
	// The losers leave nothing behind.
	if list, err := stores[0].List(ctxT(t)); err != nil || len(list) != 1 {
		t.Errorf("list after the race = %+v, %v; want the one winner", list, err)
	}
}

// TestMirrorFollowsOtherStores: a token created or revoked through one
// store (the CLI) is seen by another (a gateway) without a restart, and
// last use is written back.
func TestMirrorFollowsOtherStores(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	cli, gw := open(t, natstest.Conn(t, srv)), open(t, natstest.Conn(t, srv))
	plain, tok := create(t, cli, tokens.Spec{Name: "agent"})
	// Wait until the gateway's store sees the new token.
	kittest.Eventually(t, 30*time.Second, func() error { _, err := gw.Verify(plain); return err })
	// Wait until last use is written back.
	kittest.Eventually(t, 30*time.Second, func() error {
		list, err := cli.List(ctxT(t))
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].LastUsed == nil {
			return fmt.Errorf("list = %+v, want last_used set", list)
		}
		return nil
	})
	if _, err := cli.Revoke(ctxT(t), tok.ID); err != nil {
		t.Fatal(err)
	}
	// Wait until the gateway's store sees the revocation.
	kittest.Eventually(t, 30*time.Second, func() error {
		if _, err := gw.Verify(plain); !errors.Is(err, tokens.ErrRevoked) {
			return fmt.Errorf("verify = %v, want ErrRevoked", err)
		}
		return nil
	})
}

// TestSurvivesNATSRestart: tokens are on file storage, and a store whose
// connection reconnects catches up with what changed meanwhile.
func TestSurvivesNATSRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.Listening(t, dir)
	gw := open(t, natstest.Reconnecting(t, srv.URL()))
	before, tok := create(t, gw, tokens.Spec{Name: "before"})

	srv.Stop()
	// Verify answers from the mirror while NATS is down.
	if _, err := gw.Verify(before); err != nil {
		t.Errorf("verify while NATS is down: %v", err)
	}
	srv.Start(dir)

	other := open(t, natstest.Conn(t, srv.Server()))
	list, err := other.List(ctxT(t))
	if err != nil || len(list) != 1 || list[0].ID != tok.ID {
		t.Fatalf("after the restart the bucket lists %+v, %v; want the token made before", list, err)
	}
	after, _ := create(t, other, tokens.Spec{Name: "after"})
	if _, err := other.Revoke(ctxT(t), "before"); err != nil {
		t.Fatal(err)
	}
	// Wait until the reconnected store sees the token made after the restart.
	kittest.Eventually(t, 30*time.Second, func() error { _, err := gw.Verify(after); return err })
	// Wait until the reconnected store sees the revocation.
	kittest.Eventually(t, 30*time.Second, func() error {
		if _, err := gw.Verify(before); !errors.Is(err, tokens.ErrRevoked) {
			return fmt.Errorf("verify = %v, want ErrRevoked", err)
		}
		return nil
	})
}

func TestBucket(t *testing.T) {
	t.Parallel()
	for prefix, want := range map[string]string{"": "sov_tokens", "sov": "sov_tokens", "acme": "acme_tokens", "a.b": "a_b_tokens"} {
		if got := tokens.Bucket(prefix); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", prefix, got, want)
		}
	}
}
