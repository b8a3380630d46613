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

// TestRestoreProfileSession: a session opened on a base profile keeps the
// profile's name in its checkpoint, and its restore starts from the same
// profile (a Chromium of its own) with the session's cookies on top.
func TestRestoreProfileSession(t *testing.T) {
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

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, err := jetstream.New(f.c.NATS())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(f.c.Prefix(), "_browser_checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := kv.Get(ctx, s.SessionId)
		if err == nil {
			body, err := key.Open("browser-checkpoint/"+s.SessionId, e.Value())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(body), `"profile":"base"`) && strings.Contains(string(body), "carol") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint with the profile and the cookie: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
