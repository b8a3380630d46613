package gateway_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
	"github.com/sovereign-fleet/sovereign/services/signer"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

// Test identities: the NIP-19 example key and the first NIP-06 vector
// (specs/nips/19.md, 06.md).
const (
	nip19Nsec    = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	nip19Hex     = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	nip06Words   = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	nip06Npub    = "npub1zutzeysacnf9rru6zqwmxd54mud0k44tst6l70ja5mhv8jjumytsd2x7nu"
	nip06Pubkey  = "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"
	readonlyNpb  = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	readonlyHex  = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
	bunkerURL    = "bunker://" + readonlyHex + "?relay=ws%3A%2F%2F127.0.0.1%3A1&secret=s3cr3t-bunker"
	bunkerHidden = "bunker://" + readonlyHex + "?relay=ws%3A%2F%2F127.0.0.1%3A1&secret=[hidden]"
	loginHint    = "this gateway requires a Nostr login first: call login (methods: local, seed, readonly, nip46, nsigner)"
)

// startSigner runs the signer service on srv until the test ends.
func startSigner(t *testing.T, srv *natsrv.Server) *signer.Service {
	return startSignerWith(t, srv, signer.Config{})
}

func startSignerWith(t *testing.T, srv *natsrv.Server, cfg signer.Config) *signer.Service {
	t.Helper()
	s, err := signer.New(context.Background(), cfg, connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// identity is a key the test made, with what the gateway should report.
type identity struct {
	nsec, pubkey, npub string
}

func newIdentity(t *testing.T) identity {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return identityOf(t, k)
}

func identityOf(t *testing.T, k *nostr.SecretKey) identity {
	t.Helper()
	npub, err := nostr.EncodeNpub(k.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return identity{nsec: nostr.EncodeNsec(k), pubkey: k.PublicKey(), npub: npub}
}

// loginCalls counts the tool calls of TestLogin, to know how many audit
// records to read.
var loginCalls atomic.Int64

// lcall is callTool, counted.
func lcall(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	loginCalls.Add(1)
	return callTool(t, c, name, args)
}

// structured decodes a result's structured content.
func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// wantOK fails unless r succeeded, and returns its text.
func wantOK(t *testing.T, what string, r *mcp.CallToolResult) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("%s failed: %s", what, text(r))
	}
	return text(r)
}

// wantErr fails unless r is an error whose text holds want and none of
// the secrets, and returns its text.
func wantErr(t *testing.T, what string, r *mcp.CallToolResult, want string, secrets ...string) string {
	t.Helper()
	got := text(r)
	if !r.IsError || !strings.Contains(got, want) {
		t.Fatalf("%s = %q (error %v), want an error containing %q", what, got, r.IsError, want)
	}
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("%s error shows a secret: %q", what, got)
		}
	}
	return got
}

// wantStatus checks login_status: logged in as pubkey with method, or
// logged out when pubkey is "".
func wantStatus(t *testing.T, c *client.Client, args map[string]any, method, pubkey string) map[string]any {
	t.Helper()
	r := lcall(t, c, "login_status", args)
	txt := wantOK(t, "login_status", r)
	s := structured(t, r)
	if pubkey == "" {
		if s["state"] != "logged_out" || !strings.Contains(txt, "Not logged in") || s["pubkey"] != nil {
			t.Fatalf("login_status = %q %v, want logged out", txt, s)
		}
		return s
	}
	npub, _ := nostr.EncodeNpub(pubkey)
	if s["state"] != "logged_in" || s["pubkey"] != pubkey || s["npub"] != npub || s["method"] != method ||
		!strings.Contains(txt, "Logged in as "+npub+" (method: "+method+")") {
		t.Fatalf("login_status = %q %v, want logged in as %s (%s)", txt, s, npub, method)
	}
	return s
}

// TestLogin drives the identity tools through an MCP client against a
// real gateway, worker, Chromium and signer: every login method but nip46
// (whose bunker is tested with the signer; here a stand-in signer shows
// the auth_url reaching the client, and the login timeout), window.nostr
// in the session's pages, switch_identity, logout, bad input leaving the
// state as it was, identities scoped to their browser session,
// --require-login, the audit trail without secrets, and a stopped signer.
func TestLogin(t *testing.T) {
	// Not parallel: run beside the package's other tests, its audit check
	// once found 50 of its 53 records after 30 s (1 run in 8), which is
	// not explained yet; alone it has never failed.
	needChromium(t)
	loginCalls.Store(0)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 6)
	sig := startSigner(t, srv)
	url := startGateway(t, srv, gateway.Config{LoginConfig: gateway.LoginConfig{LoginTimeout: 20 * time.Second}})
	strict := startGateway(t, srv, gateway.Config{LoginConfig: gateway.LoginConfig{RequireLogin: true}})
	c := legacyClient(t, url, nil) // one MCP session: one browser session

	// An nsigner device holding the NIP-06 test seed, on a unix socket.
	dir, err := os.MkdirTemp("", "nsg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dev, err := nsigner.NewSeedDevice(nip06Words, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	sock := filepath.Join(dir, "ns.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	links := nsigner.ServeListener(ln, dev)
	t.Cleanup(links.Close)

	first := newIdentity(t)
	hexKey, err := nostr.ParseSecretKey(nip19Hex)
	if err != nil {
		t.Fatal(err)
	}
	second := identityOf(t, hexKey)
	account1, err := nostr.KeyFromMnemonic(nip06Words, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The state the bad inputs must leave alone.
	var current identity
	var currentMethod string

	t.Run("logged out", func(t *testing.T) {
		s := wantStatus(t, c, nil, "", "")
		if _, ok := s["remembered"].([]any); !ok {
			t.Errorf("login_status remembered = %v, want a list", s["remembered"])
		}
	})
	t.Run("local nsec", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "local", "nsec": first.nsec})
		txt := wantOK(t, "login local", r)
		if !strings.HasPrefix(txt, "Logged in as "+first.npub+" (method: local)") || strings.Contains(txt, first.nsec) {
			t.Errorf("login local = %q, want Logged in as %s (method: local)", txt, first.npub)
		}
		if s := structured(t, r); s["pubkey"] != first.pubkey || s["npub"] != first.npub || s["method"] != "local" || s["state"] != "logged_in" {
			t.Errorf("login local structured = %v", s)
		}
		wantStatus(t, c, nil, "local", first.pubkey)
	})
	t.Run("local privkey_hex", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "local", "privkey_hex": nip19Hex})
		if txt := wantOK(t, "login local hex", r); !strings.Contains(txt, second.npub) || strings.Contains(txt, nip19Hex) {
			t.Errorf("login local hex = %q, want %s", txt, second.npub)
		}
		wantStatus(t, c, nil, "local", second.pubkey)
	})
	t.Run("seed", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "seed", "mnemonic": nip06Words})
		txt := wantOK(t, "login seed", r)
		if !strings.HasPrefix(txt, "Logged in as "+nip06Npub+" (method: seed, account 0)") {
			t.Errorf("login seed = %q, want the NIP-06 vector %s", txt, nip06Npub)
		}
		if s := structured(t, r); s["pubkey"] != nip06Pubkey || s["account"] != 0.0 {
			t.Errorf("login seed structured = %v", s)
		}
		wantStatus(t, c, nil, "seed", nip06Pubkey)
	})
	t.Run("readonly", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "readonly", "npub": readonlyNpb})
		if txt := wantOK(t, "login readonly", r); !strings.Contains(txt, "method: readonly") {
			t.Errorf("login readonly = %q", txt)
		}
		wantStatus(t, c, nil, "readonly", readonlyHex)
	})
	t.Run("nsigner unix", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "nsigner", "transport": "unix", "device": sock, "index": 1})
		txt := wantOK(t, "login nsigner", r)
		if s := structured(t, r); s["pubkey"] != account1.PublicKey() || s["transport"] != "unix" || s["index"] != 1.0 {
			t.Errorf("login nsigner = %q %v, want pubkey %s (account 1 of the device's seed)", txt, s, account1.PublicKey())
		}
		s := wantStatus(t, c, nil, "nsigner", account1.PublicKey())
		if s["link_state"] != "connected" {
			t.Errorf("login_status link_state = %v, want connected", s["link_state"])
		}
	})
	t.Run("switch_identity", func(t *testing.T) {
		old, _ := nostr.EncodeNpub(account1.PublicKey())
		r := lcall(t, c, "switch_identity", map[string]any{"method": "local", "nsec": first.nsec})
		txt := wantOK(t, "switch_identity", r)
		if !strings.Contains(txt, "Logged in as "+first.npub) || !strings.Contains(txt, "previous identity "+old+" was logged out") {
			t.Errorf("switch_identity = %q, want %s in and %s out", txt, first.npub, old)
		}
		if s := structured(t, r); s["previous_npub"] != old || s["pubkey"] != first.pubkey {
			t.Errorf("switch_identity structured = %v", s)
		}
		wantStatus(t, c, nil, "local", first.pubkey)
		current, currentMethod = first, "local"
	})
	site := startSite(t)
	t.Run("window.nostr", func(t *testing.T) {
		wantOK(t, "open", lcall(t, c, "open", map[string]any{"url": site}))
		r := lcall(t, c, "eval", map[string]any{"script": "window.nostr.getPublicKey()"})
		if txt := wantOK(t, "getPublicKey", r); !strings.Contains(txt, first.pubkey) {
			t.Errorf("window.nostr.getPublicKey() = %q, want %s", txt, first.pubkey)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		// One character changed: the bech32 checksum no longer matches.
		last, repl := first.nsec[len(first.nsec)-1], byte('q')
		if last == 'q' {
			repl = 'p'
		}
		badNsec := first.nsec[:len(first.nsec)-1] + string(repl)
		badWords := strings.Replace(nip06Words, "parrot", "parot", 1)
		tests := []struct {
			name    string
			args    map[string]any
			want    string
			secrets []string
		}{
			{"bad nsec checksum", map[string]any{"method": "local", "nsec": badNsec}, "checksum", []string{badNsec}},
			{"wrong mnemonic word", map[string]any{"method": "seed", "mnemonic": badWords}, "word 3 of 12", []string{badWords, "parot"}},
			{"unreachable device", map[string]any{"method": "nsigner", "transport": "unix", "device": filepath.Join(dir, "none.sock")}, "unreachable", nil},
			{"seed without mnemonic", map[string]any{"method": "seed"}, `argument "mnemonic" is required for method seed`, nil},
			{"local without key", map[string]any{"method": "local"}, "method local needs a private key", nil},
			{"nsigner without device", map[string]any{"method": "nsigner", "transport": "tcp"}, `argument "device" is required`, nil},
			{"key for another method", map[string]any{"method": "readonly", "nsec": first.nsec}, `argument "nsec" is for method local, not readonly`, []string{first.nsec}},
			// No bunker listens there: whatever the signer says, it fails.
			{"unreachable bunker", map[string]any{"method": "nip46", "bunker_url": bunkerURL}, "login", []string{"s3cr3t-bunker"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := wantErr(t, "login", lcall(t, c, "login", tt.args), tt.want, tt.secrets...)
				if strings.Contains(got, "signer logged") {
					t.Errorf("login error = %q", got)
				}
				wantStatus(t, c, nil, currentMethod, current.pubkey) // nothing half-logged-in
			})
		}
	})
	t.Run("logout", func(t *testing.T) {
		r := lcall(t, c, "logout", nil)
		if txt := wantOK(t, "logout", r); !strings.HasPrefix(txt, "Logged out") || structured(t, r)["was_logged_in"] != true {
			t.Errorf("logout = %q %v", txt, structured(t, r))
		}
		wantStatus(t, c, nil, "", "")
		wantOK(t, "open", lcall(t, c, "open", map[string]any{"url": site}))
		if txt := wantOK(t, "eval", lcall(t, c, "eval", map[string]any{"script": "typeof window.nostr"})); !strings.Contains(txt, "undefined") {
			t.Errorf("after logout, typeof window.nostr = %q, want undefined", txt)
		}
		r = lcall(t, c, "logout", nil)
		if txt := wantOK(t, "logout again", r); !strings.HasPrefix(txt, "Not logged in") || structured(t, r)["was_logged_in"] != false {
			t.Errorf("second logout = %q %v", txt, structured(t, r))
		}
	})
	t.Run("scope", func(t *testing.T) {
		r := lcall(t, c, "login", map[string]any{"method": "local", "nsec": first.nsec})
		wantOK(t, "login", r)
		// Another MCP session has its own browser session, without identity.
		other := legacyClient(t, url, nil)
		wantStatus(t, other, nil, "", "")
		// A 2026 client: its login opens a session whose handle carries it.
		m := modernClient(t, url, nil)
		r = lcall(t, m, "login", map[string]any{"method": "local", "nsec": second.nsec})
		txt := wantOK(t, "modern login", r)
		h := metaSession(r)
		if h == "" || !strings.HasPrefix(txt, "session: "+h) || structured(t, r)["session"] != h || structured(t, r)["pubkey"] != second.pubkey {
			t.Fatalf("modern login = %q %v, want a new handle announced", txt, structured(t, r))
		}
		wantStatus(t, m, map[string]any{"session": h}, "local", second.pubkey)
		wantStatus(t, m, nil, "", "") // a new handle, a new session
		wantStatus(t, c, nil, "local", first.pubkey)
	})
	t.Run("require login", func(t *testing.T) {
		s := legacyClient(t, strict, nil)
		wantErr(t, "get_url before login", lcall(t, s, "get_url", nil), loginHint)
		if r := lcall(t, s, "secrets_list", nil); r.IsError {
			t.Errorf("secrets_list refused: %s", text(r))
		}
		wantStatus(t, s, nil, "", "")
		wantOK(t, "login", lcall(t, s, "login", map[string]any{"method": "seed", "mnemonic": nip06Words, "account": 1}))
		if txt := wantOK(t, "get_url after login", lcall(t, s, "get_url", nil)); !strings.Contains(txt, "about:blank") {
			t.Errorf("get_url = %q", txt)
		}
		wantOK(t, "logout", lcall(t, s, "logout", nil))
		wantErr(t, "get_url after logout", lcall(t, s, "get_url", nil), loginHint)
		// The gateway without --require-login runs browser tools anyway.
		other := legacyClient(t, url, nil)
		wantOK(t, "get_url", lcall(t, other, "get_url", nil))
	})
	t.Run("audit", func(t *testing.T) {
		recs := auditRecords(t, srv, int(loginCalls.Load()))
		secrets := []string{first.nsec, second.nsec, nip19Hex, nip06Words, "parot", "monkey parrot", "s3cr3t-bunker"}
		logins, denied, bunkers := 0, 0, 0
		for _, r := range recs {
			all := r.String()
			for _, s := range secrets {
				if strings.Contains(all, s) {
					t.Errorf("audit record of %s holds a secret: %s", r.GetTool(), r.GetArguments())
				}
			}
			switch r.GetTool() {
			case "login", "switch_identity":
				logins++
				if !strings.Contains(r.GetArguments(), `"method":`) {
					t.Errorf("login record lost its method: %s", r.GetArguments())
				}
				var args map[string]any
				if err := json.Unmarshal([]byte(r.GetArguments()), &args); err != nil {
					t.Fatalf("record arguments %q: %v", r.GetArguments(), err)
				}
				// Hidden by the gateway, or redacted by name too.
				for _, k := range []string{"nsec", "privkey_hex", "mnemonic"} {
					if v, ok := args[k]; ok && v != audit.Hidden && v != "[redacted]" {
						t.Errorf("record %s = %v, want it hidden", k, v)
					}
				}
				if u, ok := args["bunker_url"]; ok {
					bunkers++
					if u != bunkerHidden {
						t.Errorf("record bunker_url = %v, want %s", u, bunkerHidden)
					}
				}
				if r.GetOutcome() == historyv1.Outcome_OUTCOME_OK && args["method"] == "nsigner" && args["device"] != sock {
					t.Errorf("nsigner record lost its device: %s", r.GetArguments())
				}
			case "get_url":
				if strings.Contains(r.GetResult(), "requires a Nostr login first") {
					denied++
					if r.GetOutcome() != historyv1.Outcome_OUTCOME_DENIED {
						t.Errorf("refused get_url recorded as %v, want denied", r.GetOutcome())
					}
				}
			}
			if r.GetOutcome() == historyv1.Outcome_OUTCOME_OK && strings.Contains(r.GetTool(), "login") && r.GetBrowserSession() == "" {
				t.Errorf("%s record names no browser session", r.GetTool())
			}
		}
		if logins < 10 || denied != 2 || bunkers != 1 {
			t.Errorf("audit: %d login records, %d refused calls and %d with a bunker URL, want ≥ 10, 2 and 1", logins, denied, bunkers)
		}
	})
	// nip46 through the real signer, a real relay and a real bunker that
	// first answers with an auth_url: the MCP client is told to open it, and
	// the login completes once the bunker answers.
	t.Run("nip46 bunker with auth_url", func(t *testing.T) {
		relay := nip46test.NewRelay(t)
		const authURL = "https://bunker.example/approve?req=7"
		bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{Relays: []string{relay.URL()}, Secret: "s3cr3t-bunker",
			AuthURL: authURL, AuthFor: []string{"connect"}})
		p := legacyClient(t, url, nil)
		var mu sync.Mutex
		var got []mcp.JSONRPCNotification
		p.OnNotification(func(n mcp.JSONRPCNotification) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
			if n.Method == string(mcp.MethodNotificationProgress) {
				bunker.Approve() // the person opened the URL and approved
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
			t.Fatal(err)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "login"
		req.Params.Arguments = map[string]any{"method": "nip46", "bunker_url": bunker.URL()}
		req.Params.Meta = &mcp.Meta{ProgressToken: "login-1"}
		res, err := p.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		npub, _ := nostr.EncodeNpub(bunker.UserPubkey())
		if txt := wantOK(t, "nip46 login", res); !strings.HasPrefix(txt, "Logged in as "+npub+" (method: nip46)") || strings.Contains(txt, "s3cr3t-bunker") {
			t.Errorf("nip46 login = %q", txt)
		}
		want := "Open " + authURL + " to approve this login in your bunker; waiting…"
		mu.Lock()
		var progress, message bool
		for _, n := range got {
			f := n.Params.AdditionalFields
			switch n.Method {
			case string(mcp.MethodNotificationProgress):
				progress = progress || f["progressToken"] == "login-1" && f["message"] == want
			case string(mcp.MethodNotificationMessage):
				message = message || f["level"] == "warning" && f["data"] == want
			}
		}
		mu.Unlock()
		if !progress || !message {
			t.Errorf("notifications = %+v, want a progress notification and a warning saying %q", got, want)
		}
		s := wantStatus(t, p, nil, "nip46", bunker.UserPubkey())
		if s["link_state"] != "connected" {
			t.Errorf("login_status link_state = %v, want connected", s["link_state"])
		}
		// A page signs through the bunker; the event verifies.
		wantOK(t, "open", lcall(t, p, "open", map[string]any{"url": site}))
		r := lcall(t, p, "eval", map[string]any{"script": `window.nostr.signEvent({kind: 1, created_at: 1700000000, tags: [], content: "via bunker"}).then(JSON.stringify)`})
		var raw string
		if err := json.Unmarshal([]byte(wantOK(t, "signEvent", r)), &raw); err != nil {
			t.Fatal(err)
		}
		var ev nostr.Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil || nostr.VerifyEvent(&ev) != nil || ev.PubKey != bunker.UserPubkey() {
			t.Errorf("event signed through the bunker: %s (%v)", raw, err)
		}
		wantOK(t, "logout", lcall(t, p, "logout", nil))
	})
	t.Run("signer stopped", func(t *testing.T) {
		if err := sig.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		const down = "the signer service is not running (sov.signer.* has no responders): start `sovereign signer` or use `sovereign up`"
		wantErr(t, "login_status", callTool(t, c, "login_status", nil), down)
		wantErr(t, "login", callTool(t, c, "login", map[string]any{"method": "local", "nsec": first.nsec}), down, first.nsec)
		s := legacyClient(t, strict, nil)
		wantErr(t, "get_url", callTool(t, s, "get_url", nil), down)
	})
	// Gateway timeouts against a signer that misbehaves (a stand-in: the
	// real signer cannot be made to hang on purpose).
	stand := startStandInSigner(t, srv)
	t.Run("login timeout", func(t *testing.T) {
		quick := startGateway(t, srv, gateway.Config{LoginConfig: gateway.LoginConfig{LoginTimeout: 5 * time.Second}})
		q := legacyClient(t, quick, nil)
		tests := []struct {
			secret, want string
			loggedOut    bool
		}{
			// The signer gave up at the deadline: it holds nothing new.
			{"slow", "the browser session's identity is unchanged", false},
			// No answer: the gateway logs the session out behind it.
			{"stuck", "logged out, so that no login completes unseen", true},
		}
		for _, tt := range tests {
			t.Run(tt.secret, func(t *testing.T) {
				start := time.Now()
				r := callTool(t, q, "login", map[string]any{"method": "nip46", "bunker_url": strings.Replace(bunkerURL, "s3cr3t-bunker", tt.secret, 1)})
				got := wantErr(t, "login", r, "login did not finish within 5s")
				for _, w := range []string{"the bunker asked for approval at " + standInAuthURL, tt.want} {
					if !strings.Contains(got, w) {
						t.Errorf("login error = %q, want %q in it", got, w)
					}
				}
				if d := time.Since(start); d > 20*time.Second {
					t.Errorf("login took %s", d)
				}
				if got := stand.loggedOut(stand.scopeOf(tt.secret), time.Second); got != tt.loggedOut {
					t.Errorf("the session was logged out at the signer: %v, want %v", got, tt.loggedOut)
				}
			})
		}
	})
}

// standInAuthURL is what the stand-in signer's bunker asks a person to open.
const standInAuthURL = "https://bunker.example/approve/42"

// standIn is a stand-in signer: its nip46 login publishes an auth_url
// challenge, then logs in readonlyHex; when the bunker URL's secret is
// "slow" it answers TIMEOUT just before the deadline, when "stuck" not at
// all.
type standIn struct {
	logouts chan string   // the scopes logged out (workers log out sessions they close too)
	stuck   chan struct{} // closed at cleanup

	mu     sync.Mutex
	scopes map[string]string // by the bunker URL's secret
}

// scopeOf is the scope of the last login with secret.
func (s *standIn) scopeOf(secret string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes[secret]
}

// loggedOut reports whether scope is logged out within d.
func (s *standIn) loggedOut(scope string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case got := <-s.logouts:
			if got == scope {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func startStandInSigner(t *testing.T, srv *natsrv.Server) *standIn {
	t.Helper()
	c := connect(t, srv)
	s := &standIn{logouts: make(chan string, 64), stuck: make(chan struct{}), scopes: map[string]string{}}
	t.Cleanup(func() { close(s.stuck) })
	svc, err := c.AddService("stand-in-signer", "0.0.1", "test stand-in", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	g := svc.AddGroup(c.Subject("signer"))
	login := func(ctx context.Context, r *signerv1.Login) (*signerv1.LoginResponse, error) {
		if r.GetMethod() != signerv1.Method_METHOD_NIP46 || r.GetProgressSubject() == "" || r.GetScope() == "" {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "stand-in: unexpected login")
		}
		if _, q, ok := strings.Cut(r.GetBunkerUrl(), "secret="); ok {
			s.mu.Lock()
			s.scopes[q] = r.GetScope()
			s.mu.Unlock()
		}
		b, _ := proto.Marshal(&signerv1.LoginProgress{AuthUrl: standInAuthURL, Message: "approve in the bunker"})
		if err := c.NATS().Publish(r.GetProgressSubject(), b); err != nil {
			return nil, err
		}
		if strings.Contains(r.GetBunkerUrl(), "secret=slow") {
			// Gives up shortly before the deadline, as a signer whose own
			// copy of it runs out first does: within the 250 ms before it
			// that the gateway takes for its own deadline
			// (signerErrorText), as early as that allows. 100 ms before
			// it was too close: on a loaded machine the answer reached the
			// gateway after its deadline, which took the signer for stuck
			// and logged the session out (1 run in 5).
			deadline, _ := ctx.Deadline()
			time.Sleep(time.Until(deadline) - 230*time.Millisecond)
			return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "login (nip46): the bunker did not answer in time")
		}
		if strings.Contains(r.GetBunkerUrl(), "secret=stuck") {
			select { // does not answer at all
			case <-s.stuck:
			case <-time.After(10 * time.Second):
			}
			return nil, ctx.Err()
		}
		time.Sleep(200 * time.Millisecond) // a stand-in's delay, not a wait: the person takes a moment to approve
		return &signerv1.LoginResponse{Pubkey: readonlyHex, Npub: readonlyNpb, Method: signerv1.Method_METHOD_NIP46}, nil
	}
	logout := func(_ context.Context, r *signerv1.Logout) (*signerv1.LogoutResponse, error) {
		select {
		case s.logouts <- r.GetScope():
		default: // nobody looks
		}
		return &signerv1.LogoutResponse{}, nil
	}
	status := func(_ context.Context, r *signerv1.Status) (*signerv1.StatusResponse, error) {
		return &signerv1.StatusResponse{State: signerv1.LoginState_LOGIN_STATE_LOGGED_OUT}, nil
	}
	for name, h := range map[string]micro.Handler{"login": bus.Handle(c, login), "logout": bus.Handle(c, logout), "status": bus.Handle(c, status)} {
		if err := g.AddEndpoint(name, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLoginFlags: --require-login and --login-timeout with their
// environment fallbacks and bounds.
func TestLoginFlags(t *testing.T) {
	t.Setenv("SOVEREIGN_REQUIRE_LOGIN", "true")
	t.Setenv("SOVEREIGN_LOGIN_TIMEOUT", "90s")
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var errs []error
	cfg := gateway.RegisterFlags(fs, &errs)
	if err := fs.Parse(nil); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if !cfg.RequireLogin || cfg.LoginTimeout != 90*time.Second {
		t.Errorf("from env: RequireLogin %v, LoginTimeout %s", cfg.RequireLogin, cfg.LoginTimeout)
	}
	if err := fs.Parse([]string{"--require-login=false", "--login-timeout=2m"}); err != nil {
		t.Fatal(err)
	}
	if cfg.RequireLogin || cfg.LoginTimeout != 2*time.Minute {
		t.Errorf("from flags: RequireLogin %v, LoginTimeout %s", cfg.RequireLogin, cfg.LoginTimeout)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}

	t.Setenv("SOVEREIGN_REQUIRE_LOGIN", "maybe")
	errs = nil
	gateway.RegisterFlags(flag.NewFlagSet("gateway", flag.ContinueOnError), &errs)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "SOVEREIGN_REQUIRE_LOGIN") {
		t.Errorf("SOVEREIGN_REQUIRE_LOGIN=maybe: errors %v", errs)
	}

	for _, d := range []time.Duration{time.Second, 2 * time.Hour} {
		err := gateway.Config{LoginConfig: gateway.LoginConfig{LoginTimeout: d}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "--login-timeout") {
			t.Errorf("Validate(LoginTimeout %s) = %v, want a --login-timeout error", d, err)
		}
	}
}

// TestRememberedPerToken: an identity one token remembers is listed and
// loaded by that token's sessions only.
func TestRememberedPerToken(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 4)
	startSignerWith(t, srv, signer.Config{DataDir: t.TempDir(), Passphrase: "a passphrase for the test", RememberLogN: 4})
	alice, _ := newToken(t, srv, tokens.Spec{Name: "alice"})
	bob, _ := newToken(t, srv, tokens.Spec{Name: "bob"})
	url := startGateway(t, srv, gateway.Config{AuthConfig: gateway.AuthConfig{RequireAuth: true}})
	id := newIdentity(t)

	a1 := legacyClient(t, url, map[string]string{"Authorization": alice})
	wantOK(t, "login remember", callTool(t, a1, "login", map[string]any{"method": "local", "nsec": id.nsec, "remember": true}))

	b := legacyClient(t, url, map[string]string{"Authorization": bob})
	if s := wantStatus(t, b, nil, "", ""); len(s["remembered"].([]any)) != 0 {
		t.Errorf("bob sees alice's remembered identities: %v", s["remembered"])
	}
	wantErr(t, "bob loads alice's identity", callTool(t, b, "login", map[string]any{"method": "local", "npub": id.npub}), "no remembered identity "+id.npub)

	a2 := legacyClient(t, url, map[string]string{"Authorization": alice})
	if s := wantStatus(t, a2, nil, "", ""); fmt.Sprint(s["remembered"]) != "["+id.npub+"]" {
		t.Errorf("alice's second session lists %v, want [%s]", s["remembered"], id.npub)
	}
	wantOK(t, "alice loads her identity", callTool(t, a2, "login", map[string]any{"method": "local", "npub": id.npub}))
	wantStatus(t, a2, nil, "local", id.pubkey)
}
