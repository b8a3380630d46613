package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// TestIdentity runs the signer as its own process: an MCP client logs the
// browser in, a page signs through window.nostr, a kind the policy asks
// about waits for an approval that the test gives through the fleet's
// queue (as the console does), and a remembered identity survives a
// SIGKILL of the signer.
func TestIdentity(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 4})
	site := newSite(t)
	dataDir := t.TempDir()
	env := []string{"SOVEREIGN_SIGNER_PASSPHRASE=e2e passphrase, long enough"}
	ctx := callCtx(t, 4*time.Minute)
	signer, err := f.StartSigner(ctx, dataDir, env)
	if err != nil {
		t.Fatal(err)
	}
	c := initClient(t, ctx, f.Gateways[0].MCP)

	if got := text(t, ctx, c, "login_status", nil); !strings.Contains(strings.ToLower(got), "not logged in") {
		t.Fatalf("login_status before login: %q", got)
	}
	key, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	npub, _ := nostr.EncodeNpub(key.PublicKey())
	if got := text(t, ctx, c, "login", map[string]any{"method": "local", "nsec": nostr.EncodeNsec(key), "remember": true}); !strings.Contains(got, npub) {
		t.Fatalf("login: %q", got)
	}
	text(t, ctx, c, "open", map[string]any{"url": site + "/form"})

	// A kind 1 event from the page the session navigated to: allowed.
	signed := evalJSONString(t, ctx, c, `window.nostr.signEvent({kind: 1, created_at: 1700000000, tags: [["t", "e2e"]], content: "hello from e2e"}).then(JSON.stringify)`)
	checkSigned(t, signed, key.PublicKey(), 1)

	// Kind 0 needs a person: approve it on the queue the console reads.
	q, err := approval.Open(ctx, f.Bus().NATS(), f.Bus().Prefix())
	if err != nil {
		t.Fatal(err)
	}
	decided := make(chan approval.Request, 1)
	go func() {
		for ctx.Err() == nil {
			list, _ := q.List(ctx)
			for _, r := range list {
				if r.State == approval.Pending && r.Tool == "window.nostr.signEvent" {
					d, err := q.Decide(ctx, r.ID, true, approval.Once, "console:e2e", "")
					if err != nil {
						t.Error(err)
					}
					decided <- d
					return
				}
			}
			time.Sleep(50 * time.Millisecond) // polls in a goroutine of its own (no t to fail): the wait on decided below is bounded
		}
	}()
	signed = evalJSONString(t, ctx, c, `window.nostr.signEvent({kind: 0, created_at: 1700000000, tags: [], content: "{\"name\":\"e2e\"}"}).then(JSON.stringify)`)
	checkSigned(t, signed, key.PublicKey(), 0)
	if d := <-decided; !strings.Contains(d.Arguments, `"kind":0`) || !strings.HasPrefix(d.Caller, "page http://127.0.0.1:") {
		t.Fatalf("approval request: %+v", d)
	}

	// The signer dies: identities in memory are gone, the remembered one
	// comes back by npub alone after a restart.
	if err := signer.Kill(); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "login_status", nil); err != nil || !res.IsError || !strings.Contains(res.Text(), "signer") {
		t.Fatalf("login_status with the signer down: %v %v", res, err)
	}
	if _, err := f.StartSigner(ctx, dataDir, env); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, c, "login_status", nil); !strings.Contains(strings.ToLower(got), "not logged in") || !strings.Contains(got, npub) {
		t.Fatalf("login_status after the restart (logged out, %s remembered): %q", npub, got)
	}
	if got := text(t, ctx, c, "login", map[string]any{"method": "local", "npub": npub}); !strings.Contains(got, npub) {
		t.Fatalf("login with a remembered npub: %q", got)
	}
	signed = evalJSONString(t, ctx, c, `window.nostr.signEvent({kind: 1, created_at: 1700000001, tags: [], content: "after restart"}).then(JSON.stringify)`)
	checkSigned(t, signed, key.PublicKey(), 1)

	text(t, ctx, c, "logout", nil)
	if got := evalString(t, ctx, c, `window.nostr.getPublicKey().then(() => "resolved", e => e.message)`); !strings.Contains(got, "logged out") {
		t.Fatalf("window.nostr after logout: %q", got)
	}
	text(t, ctx, c, "open", map[string]any{"url": site + "/next"})
	if got := evalString(t, ctx, c, `typeof window.nostr`); got != "undefined" {
		t.Fatalf("a new page after logout has window.nostr: %q", got)
	}
}

// checkSigned verifies a signed event a page returned as JSON.
func checkSigned(t *testing.T, raw, pubkey string, kind int) {
	t.Helper()
	var ev nostr.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatalf("signed event %q: %v", raw, err)
	}
	if err := nostr.VerifyEvent(&ev); err != nil || ev.PubKey != pubkey || ev.Kind != kind {
		t.Fatalf("signed event %s: %v (pubkey %s, want %s)", raw, err, ev.PubKey, pubkey)
	}
}

// evalJSONString runs a script whose value is a string and decodes it.
func evalJSONString(t *testing.T, ctx context.Context, c *harness.MCPClient, script string) string {
	t.Helper()
	raw := text(t, ctx, c, "eval", map[string]any{"script": script})
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("eval %s: result %q is not a JSON string: %v", script, raw, err)
	}
	return s
}
