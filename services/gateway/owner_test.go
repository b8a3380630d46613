package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// tokenWithID stores an API token with the given id (16 hex digits) and
// name straight into srv's token bucket, as tokens.Store.Create would with
// a random id, and returns its Authorization header value. Tests use it
// to make two tokens whose ids start alike.
func tokenWithID(t *testing.T, srv *natsrv.Server, id, name string) string {
	t.Helper()
	tokenStore(t, srv) // creates the bucket
	secret := strings.Repeat(id[len(id)-1:], 64)
	sum := sha256.Sum256([]byte(secret))
	rec, err := json.Marshal(map[string]any{"id": id, "name": name, "created": time.Now().UTC(), "secret_sha256": hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	kv := natsKV(t, srv, tokens.Bucket(""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kv.Put(ctx, "id."+id, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "name."+hex.EncodeToString([]byte(name)), []byte(id)); err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tokens.Prefix + id + "_" + secret
}

// natsKV opens the existing KV bucket of srv.
func natsKV(t *testing.T, srv *natsrv.Server, bucket string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(natstest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("open bucket %s: %v", bucket, err)
	}
	return kv
}

// startKeyWorker runs a real worker with a fresh operator key (it keeps
// saved storage) and returns the key.
func startKeyWorker(t *testing.T, srv *natsrv.Server, maxSessions int) *secrets.Key {
	t.Helper()
	key := newKey(t)
	runWorker(t, srv, browser.Config{ID: "kw1", MaxSessions: maxSessions, SecretKey: key, IdleTimeout: 5 * time.Minute})
	return key
}

// newKey is a fresh operator key.
func newKey(t *testing.T) *secrets.Key {
	t.Helper()
	text, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// loginCookieSite is a page that sets a login cookie, and /check that
// says whether the request carried it.
func loginCookieSite(t *testing.T) string {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report.txt" {
			w.Header().Set("Content-Disposition", `attachment; filename="report.txt"`)
			fmt.Fprint(w, "alice's report")
			return
		}
		if r.URL.Path == "/login" {
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "alice-session", Path: "/", Expires: time.Now().Add(time.Hour)})
		}
		who := "nobody"
		if c, err := r.Cookie("sid"); err == nil {
			who = c.Value
		}
		fmt.Fprintf(w, `<!doctype html><title>%s</title><p>%s</p>`, who, who)
	}))
	t.Cleanup(site.Close)
	return site.URL
}

// Two token ids whose first six hex digits are the same: their callers'
// labels ("token:abcdef") are the same.
const (
	collidingA = "abcdef0000000001"
	collidingB = "abcdef0000000002"
)

// TestOwnershipByFullIdentity: two API tokens whose ids share the six hex
// digits of their labels own nothing in common: B neither lists, opens
// from nor deletes A's saved storage, nor uses A's session handle, and
// its own session shows none of A's downloads.
func TestOwnershipByFullIdentity(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startKeyWorker(t, srv, 6)
	authA := tokenWithID(t, srv, collidingA, "alice")
	authB := tokenWithID(t, srv, collidingB, "bob")
	url := startGateway(t, srv, gateway.Config{})
	site := loginCookieSite(t)

	alice := legacyClient(t, url, map[string]string{"Authorization": authA})
	callTool(t, alice, "open", map[string]any{"url": site + "/login"})
	if res := callTool(t, alice, "storage_save", map[string]any{"name": "x-login"}); res.IsError {
		t.Fatalf("alice's storage_save: %s", text(res))
	}
	if got := text(callTool(t, alice, "open", map[string]any{"url": site + "/report.txt"})); !strings.Contains(got, "as d1") {
		t.Fatalf("alice's open of a download = %q, want it kept as d1", got)
	}

	bob := legacyClient(t, url, map[string]string{"Authorization": authB})
	if res := callTool(t, bob, "storage_list", nil); res.IsError || strings.Contains(text(res), "x-login") {
		t.Errorf("bob's storage_list = %q, want a list without alice's saved storage", text(res))
	}
	res := callTool(t, bob, "open", map[string]any{"url": site + "/check", "storage": "x-login"})
	if !res.IsError || !strings.Contains(text(res), `no saved storage "x-login"`) || strings.Contains(text(res), "alice-session") {
		t.Errorf("bob's open from alice's saved storage = %q, want not found", text(res))
	}
	if res := callTool(t, bob, "storage_delete", map[string]any{"name": "x-login"}); !res.IsError || !strings.Contains(text(res), "no saved storage") {
		t.Errorf("bob's storage_delete of alice's saved storage = %q, want not found", text(res))
	}
	if res := callTool(t, bob, "download_list", nil); res.IsError || strings.Contains(text(res), "report.txt") {
		t.Errorf("bob's download_list = %q, want a list without alice's", text(res))
	}
	if res := callTool(t, bob, "download_get", map[string]any{"id": "d1"}); !res.IsError || !strings.Contains(text(res), `no download "d1"`) {
		t.Errorf("bob's download_get d1 = %q, want none", text(res))
	}
	// Alice still has it, and starts from it.
	if got := text(callTool(t, alice, "storage_list", nil)); !strings.Contains(got, "x-login") {
		t.Errorf("alice's storage_list = %q, want x-login", got)
	}
	aliceAgain := legacyClient(t, url, map[string]string{"Authorization": authA})
	if got := text(callTool(t, aliceAgain, "open", map[string]any{"url": site + "/check", "storage": "x-login"})); !strings.Contains(got, "alice-session") {
		t.Errorf("alice's open from her saved storage = %q, want her cookie", got)
	}

	// Session handles: B cannot use A's.
	modernA := modernClient(t, url, map[string]string{"Authorization": authA})
	h := metaSession(callTool(t, modernA, "get_url", nil))
	if h == "" {
		t.Fatal("alice's call without a handle minted none")
	}
	modernB := modernClient(t, url, map[string]string{"Authorization": authB})
	if res := callTool(t, modernB, "get_url", map[string]any{"session": h}); !res.IsError || !strings.Contains(text(res), "unknown or expired session handle") {
		t.Errorf("bob's call with alice's handle = %q, want an unknown handle", text(res))
	}
}

// legacyStorage seals a saved storage as a gateway before owner digests
// had its worker keep it: under the scope of the caller's label.
func legacyStorage(t *testing.T, srv *natsrv.Server, key *secrets.Key, label, name, cookie, site string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(label))
	scope := hex.EncodeToString(sum[:12])
	host := strings.TrimPrefix(site, "http://")
	host = host[:strings.Index(host, ":")]
	body, err := json.Marshal(map[string]any{"name": name, "time": time.Now().UTC(),
		"cookies": []map[string]any{{"name": "sid", "value": cookie, "domain": host, "path": "/", "expires": float64(time.Now().Add(time.Hour).Unix()), "size": 3}}})
	if err != nil {
		t.Fatal(err)
	}
	k := scope + "." + name
	sealed, err := key.Seal("browser-storage/"+k, body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natsKV(t, srv, bus.BucketName("sov", "_browser_storage")).Put(ctx, k, sealed); err != nil {
		t.Fatal(err)
	}
	return scope
}

// TestLegacyStorageMigration: saved storage kept under a caller's label
// by an older gateway moves to its one owner at the gateway's start; one
// under a label two tokens share stays reachable by neither, until the
// operator moves it with the admin API.
func TestLegacyStorageMigration(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	key := startKeyWorker(t, srv, 8)
	site := loginCookieSite(t)
	authCarol := tokenWithID(t, srv, "0123450000000009", "carol")
	authA := tokenWithID(t, srv, collidingA, "alice")
	authB := tokenWithID(t, srv, collidingB, "bob")
	legacyStorage(t, srv, key, "token:012345", "carol-login", "carol-session", site)
	legacyStorage(t, srv, key, "anonymous", "anon-login", "anon-session", site)
	shared := legacyStorage(t, srv, key, "token:abcdef", "shared-login", "alice-session", site)
	// A revoked token's label is erin's too: that scope is not erin's alone.
	tokenWithID(t, srv, "5555550000000001", "dave")
	authErin := tokenWithID(t, srv, "5555550000000002", "erin")
	legacyStorage(t, srv, key, "token:555555", "dave-login", "dave-session", site)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tokenStore(t, srv).Revoke(ctx, "dave"); err != nil {
		t.Fatal(err)
	}

	const adminToken = "admin-token-for-the-migration-test-0123456789"
	g, url := serveGateway(t, srv, gateway.Config{AdminConfig: gateway.AdminConfig{AdminListen: "127.0.0.1:0", AdminToken: adminToken},
		PolicyConfig: gateway.PolicyConfig{AllowPrivate: true}})
	carol := legacyClient(t, url, map[string]string{"Authorization": authCarol})
	anon := legacyClient(t, url, nil)
	alice := legacyClient(t, url, map[string]string{"Authorization": authA})
	bob := legacyClient(t, url, map[string]string{"Authorization": authB})

	// The migration runs in the background of the gateway's start.
	select {
	case <-gateway.StorageMigrated(g):
	case <-time.After(60 * time.Second):
		t.Fatal("the legacy saved storage migration did not end within 60 s")
	}
	if got := text(callTool(t, carol, "storage_list", nil)); !strings.Contains(got, "carol-login") {
		t.Fatalf("carol's storage_list after the migration = %q, want carol-login", got)
	}
	if got := text(callTool(t, carol, "open", map[string]any{"url": site + "/check", "storage": "carol-login"})); !strings.Contains(got, "carol-session") {
		t.Errorf("carol's open from her moved storage = %q, want her cookie", got)
	}
	if got := text(callTool(t, anon, "storage_list", nil)); !strings.Contains(got, "anon-login") {
		t.Errorf("anonymous storage_list after the migration = %q, want anon-login", got)
	}
	erin := legacyClient(t, url, map[string]string{"Authorization": authErin})
	for who, c := range map[string]*client.Client{"alice": alice, "bob": bob, "anonymous": anon, "erin": erin} {
		res := callTool(t, c, "storage_list", nil)
		if got := text(res); res.IsError || strings.Contains(got, "shared-login") || strings.Contains(got, "carol-login") || strings.Contains(got, "dave-login") {
			t.Errorf("%s's storage_list = %q, want none of the ambiguous legacy storage nor carol's", who, got)
		}
	}

	// The operator knows it is alice's.
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(adminURL(t, g), "/")+"/admin/storage/alice/shared-login/move",
		strings.NewReader(`{"from_scope":"`+shared+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin move of the legacy storage to alice = %d", resp.StatusCode)
	}
	if got := text(callTool(t, alice, "storage_list", nil)); !strings.Contains(got, "shared-login") {
		t.Errorf("alice's storage_list after the operator's move = %q, want shared-login", got)
	}
	if res := callTool(t, bob, "storage_list", nil); res.IsError || strings.Contains(text(res), "shared-login") {
		t.Errorf("bob's storage_list after the move to alice = %q", text(res))
	}
}
