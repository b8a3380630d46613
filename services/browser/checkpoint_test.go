package browser_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

func (f *fleet) restore(old string) (*browserv1.OpenSessionResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res browserv1.OpenSessionResponse
	err := f.c.Request(ctx, f.c.Subject("browser", "restore"), &browserv1.RestoreSessionRequest{OldSessionId: old, Owner: "test"}, &res)
	return &res, err
}

// waitCheckpoint waits until the checkpoint of session id holds every
// one of want (in its sealed JSON, opened with key).
func (f *fleet) waitCheckpoint(key *secrets.Key, id string, want ...string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(f.c.NATS())
	if err != nil {
		f.t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(f.c.Prefix(), "_browser_checkpoints"))
	if err != nil {
		f.t.Fatal(err)
	}
	var body []byte
	for {
		if e, err := kv.Get(ctx, id); err == nil {
			if body, err = key.Open("browser-checkpoint/"+id, e.Value()); err != nil {
				f.t.Fatal(err)
			}
			missing := false
			for _, w := range want {
				missing = missing || !strings.Contains(string(body), w)
			}
			if !missing {
				return
			}
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("no checkpoint of %s holding %q; last: %s", id, want, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestRestoreProfileSession: a session opened on a base profile keeps the
// profile's name in its checkpoint, and its restore starts from the same
// profile (a Chromium of its own) with the session's cookies on top.
func TestRestoreProfileSession(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ts := site(t)
	emptyProfile(t, f, "base")
	keyText, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	f.worker(browser.Config{ID: "ckp", MaxSessions: 3, SecretKey: key, ProfileDir: t.TempDir(), CheckpointEvery: time.Second})
	s, err := f.openProfile("base", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mustCall(s, openReq(ts.URL+"/setcookie?v=carol"))

	f.waitCheckpoint(key, s.SessionId, `"profile":"base"`, "carol")
	r, err := f.restore(s.SessionId)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := f.mustCall(r, evalReq("document.cookie")); !strings.Contains(got, "who=carol") {
		t.Errorf("restored profile session: cookie = %q, want who=carol", got)
	}
	if got := f.mustCall(r, evalReq("location.pathname")); !strings.Contains(got, "/setcookie") {
		t.Errorf("restored profile session is on %q, want /setcookie", got)
	}
	_, err = f.restore("s-never-was")
	wantCode(t, "restore of an unknown session", err, commonv1.ErrorCode_SESSION_NOT_FOUND, "has no checkpoint")
}

// TestRestoreIdentity: the Nostr identity of a session (the public key its
// window.nostr answers for) is in its checkpoint, and the restored
// session's pages have window.nostr from their first script.
func TestRestoreIdentity(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ts := site(t)
	keyText, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	f.worker(browser.Config{ID: "ckid", MaxSessions: 3, SecretKey: key, CheckpointEvery: time.Second})
	s := f.mustOpen()
	const pubkey = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
	f.setIdentity(s, pubkey)
	f.mustCall(s, openReq(ts.URL+"/id"))
	if got := f.evalString(s, "typeof window.nostr"); got != "object" {
		t.Fatalf("before the restore: typeof window.nostr = %s", got)
	}
	f.waitCheckpoint(key, s.SessionId, pubkey, "/id")
	r, err := f.restore(s.SessionId)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := f.evalString(r, "typeof window.nostr + ' ' + location.pathname"); got != "object /id" {
		t.Fatalf("restored session: typeof window.nostr, path = %q, want object /id", got)
	}
}
