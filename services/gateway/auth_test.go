package gateway_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// tokenStore opens srv's API token bucket, as `sovereign token` does.
func tokenStore(t *testing.T, srv *natsrv.Server) *tokens.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := tokens.Open(ctx, natstest.Conn(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newToken creates an API token named name on srv and returns its
// Authorization header value ("Bearer svt_…") and the token. A gateway
// started afterwards knows it at once; one already running learns of it
// within milliseconds (see awaitStatus).
func newToken(t *testing.T, srv *natsrv.Server, spec tokens.Spec) (string, tokens.Token) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	plain, tok, err := tokenStore(t, srv).Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + plain, tok
}

// owner is the session owner identity of an API token.
func owner(tok tokens.Token) string { return "token:" + tok.ID }

// post sends initialize to url with the given Authorization (none when
// "") and returns the status, the WWW-Authenticate header and the body.
func post(t *testing.T, url, auth string, extra http.Header) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(body)
}

// awaitStatus posts until the gateway answers want (a token change reaches
// a running gateway through its KV watch) and fails after 15 s: well short
// of the store's 5-minute resync, so a change that arrives in time came
// through the watch.
func awaitStatus(t *testing.T, url, auth string, want int) time.Duration {
	t.Helper()
	start := time.Now()
	kittest.Eventually(t, 15*time.Second, func() error {
		status, _, body := post(t, url, auth, nil)
		return kittest.Check(status == want, "status %d (%s), want %d", status, body, want)
	})
	return time.Since(start)
}

const (
	challenge        = `Bearer realm="sovereign"`
	challengeInvalid = `Bearer realm="sovereign", error="invalid_token"`
)

// TestAuthOnLoopback: on loopback a request without credentials is
// anonymous, but one with an Authorization header must carry a valid
// token; the Host and Origin guard answers first, and nothing reads the
// body of a refused request.
func TestAuthOnLoopback(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	good, tok := newToken(t, srv, tokens.Spec{Name: "ci-agent"})
	revokeMe, _ := newToken(t, srv, tokens.Spec{Name: "short-lived"})
	url := startGateway(t, srv, gateway.Config{MaxBody: 4096})
	secret := strings.TrimPrefix(good, "Bearer svt_"+tok.ID+"_")
	wrong := "Bearer svt_" + tok.ID + "_" + strings.Repeat("0", 64)
	if strings.HasSuffix(good, strings.Repeat("0", 64)) {
		wrong = "Bearer svt_" + tok.ID + "_" + strings.Repeat("1", 64)
	}

	tests := []struct {
		name, auth string
		header     http.Header
		want       int
		challenge  string
		body       string
	}{
		{name: "no credentials", want: http.StatusOK},
		{name: "valid token", auth: good, want: http.StatusOK},
		{name: "lower-case scheme", auth: "bearer " + strings.TrimPrefix(good, "Bearer "), want: http.StatusOK},
		{name: "wrong secret", auth: wrong, want: http.StatusUnauthorized, challenge: challengeInvalid, body: "invalid or revoked token"},
		{name: "unknown id", auth: "Bearer svt_0123456789abcdef_" + secret, want: http.StatusUnauthorized, challenge: challengeInvalid, body: "invalid or revoked token"},
		{name: "malformed token", auth: "Bearer svt_nonsense", want: http.StatusUnauthorized, challenge: challengeInvalid, body: "invalid or revoked token"},
		{name: "not a token (no OAuth)", auth: "Bearer alice", want: http.StatusUnauthorized, challenge: challengeInvalid, body: "invalid or revoked token"},
		{name: "other scheme", auth: "Basic YWxpY2U6cHc=", want: http.StatusUnauthorized, challenge: `Bearer realm="sovereign", error="invalid_request"`, body: "Bearer <token>"},
		{name: "empty bearer", auth: "Bearer ", want: http.StatusUnauthorized, challenge: `Bearer realm="sovereign", error="invalid_request"`},
		{name: "guard first: foreign host", auth: wrong, header: http.Header{"Host": {"evil.example"}}, want: http.StatusForbidden},
		{name: "guard first: foreign origin", auth: wrong, header: http.Header{"Origin": {"https://evil.example"}}, want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if h := tt.header.Get("Host"); h != "" {
				req.Host = h
			}
			if o := tt.header.Get("Origin"); o != "" {
				req.Header.Set("Origin", o)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.challenge)
			}
			if !strings.Contains(string(body), tt.body) {
				t.Errorf("body %q, want it to contain %q", body, tt.body)
			}
			if strings.Contains(string(body), secret) || strings.Contains(resp.Header.Get("WWW-Authenticate"), secret) {
				t.Error("the answer shows the token's secret")
			}
		})
	}

	// A refused request's body is never read: an oversized one gets 401,
	// not 413.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(strings.Repeat("x", 10000)))
	req.Header.Set("Authorization", wrong)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("oversized body with a wrong token: status %d, want 401", resp.StatusCode)
	}

	// Revocation takes effect without a restart.
	awaitStatus(t, url, revokeMe, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tokenStore(t, srv).Revoke(ctx, "short-lived"); err != nil {
		t.Fatal(err)
	}
	// awaitStatus fails if the revocation has not arrived within its
	// deadline, far below the token store's 5-minute resync.
	took := awaitStatus(t, url, revokeMe, http.StatusUnauthorized)
	t.Logf("revocation reached the gateway after %s", took)
}

// TestRequireAuth: with --require-auth a request without credentials gets
// 401 on loopback too.
func TestRequireAuth(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	good, _ := newToken(t, srv, tokens.Spec{Name: "agent"})
	url := startGateway(t, srv, gateway.Config{AuthConfig: gateway.AuthConfig{RequireAuth: true}})
	status, chal, body := post(t, url, "", nil)
	if status != http.StatusUnauthorized || chal != challenge || !strings.Contains(body, "missing bearer token") {
		t.Errorf("no credentials: %d %q %q, want 401, %q, missing bearer token", status, chal, body, challenge)
	}
	if status, _, body := post(t, url, good, nil); status != http.StatusOK {
		t.Errorf("valid token: %d (%s)", status, body)
	}
	// Health stays open for probes.
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz with auth required: %d", resp.StatusCode)
	}
}

// logBuffer captures the default logger's output while a test runs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// take returns what was logged since the last take.
func (b *logBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf.String()
	b.buf.Reset()
	return out
}

func captureLogs(t *testing.T) *logBuffer {
	b := &logBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(b, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return b
}

// serve runs g on ln until the test ends; it returns the error channel.
func serve(t *testing.T, g *gateway.Gateway, ln net.Listener) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- g.ServeListener(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("ServeListener did not stop")
		}
		_ = g.Close(context.Background())
	})
	return done
}

// listenAll listens on every interface (reached below through loopback).
func listenAll(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, fmt.Sprintf("http://127.0.0.1:%d/mcp", ln.Addr().(*net.TCPAddr).Port)
}

// TestExposedStart: a gateway reachable from other machines refuses to
// start while no API token exists (and no OAuth issuer is set), unless
// --insecure-no-auth, which it warns about; once a token exists it starts
// and asks every request for one.
func TestExposedStart(t *testing.T) {
	srv := startNATS(t, "")

	t.Run("refused without tokens", func(t *testing.T) {
		_, err := gateway.New(context.Background(), gateway.Config{Listen: "0.0.0.0:0"}, connect(t, srv))
		if err == nil || !strings.Contains(err.Error(), "sovereign token create --name <name>") || !strings.Contains(err.Error(), "--insecure-no-auth") {
			t.Fatalf("New on 0.0.0.0 without tokens = %v, want a refusal naming `sovereign token create` and --insecure-no-auth", err)
		}
		// New on loopback, then served on every interface: ServeListener
		// refuses too (what Run does for both `sovereign up` and
		// `sovereign gateway`).
		g, err := gateway.New(context.Background(), gateway.Config{}, connect(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := listenAll(t)
		select {
		case err := <-serve(t, g, ln):
			if err == nil || !strings.Contains(err.Error(), "refusing to serve MCP on "+ln.Addr().String()) {
				t.Errorf("ServeListener on 0.0.0.0 = %v, want the refusal", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ServeListener on 0.0.0.0 without tokens kept serving")
		}
	})

	t.Run("insecure-no-auth", func(t *testing.T) {
		logs := captureLogs(t)
		g, err := gateway.New(context.Background(), gateway.Config{Listen: "0.0.0.0:0", AuthConfig: gateway.AuthConfig{InsecureNoAuth: true}}, connect(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		ln, url := listenAll(t)
		serve(t, g, ln)
		awaitStatus(t, url, "", http.StatusOK)
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "--insecure-no-auth: serving MCP WITHOUT authentication") {
			t.Errorf("no warning about --insecure-no-auth in the log:\n%s", logs)
		}
	})

	t.Run("allowed once a token exists", func(t *testing.T) {
		good, _ := newToken(t, srv, tokens.Spec{Name: "remote-agent"})
		g, err := gateway.New(context.Background(), gateway.Config{Listen: "0.0.0.0:0"}, connect(t, srv))
		if err != nil {
			t.Fatalf("New on 0.0.0.0 with a token: %v", err)
		}
		ln, url := listenAll(t)
		serve(t, g, ln)
		awaitStatus(t, url, good, http.StatusOK)
		if status, chal, body := post(t, url, "", nil); status != http.StatusUnauthorized || chal != challenge || !strings.Contains(body, "missing bearer token") {
			t.Errorf("exposed, no credentials: %d %q %q; want 401 missing bearer token", status, chal, body)
		}
	})
}

// TestCallerIsolation: MCP sessions and session handles belong to the
// token that made them; another token, anonymous, or the same name
// re-created after a revocation cannot use them.
func TestCallerIsolation(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	alice, aliceTok := newToken(t, srv, tokens.Spec{Name: "alice"})
	bob, _ := newToken(t, srv, tokens.Spec{Name: "bob"})
	g, url := startGatewayG(t, srv, gateway.Config{})
	store := gateway.StoreOf(g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An MCP session id (2025 clients).
	a := &rpc{t: t, url: url, header: http.Header{"Authorization": {alice}}}
	r := a.call(initializeBody)
	a.session = r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || a.session == "" {
		t.Fatalf("alice's initialize: %d %s", r.status, r.body)
	}
	for name, auth := range map[string]string{"bob": bob, "anonymous": ""} {
		other := &rpc{t: t, url: url, session: a.session, header: http.Header{}}
		if auth != "" {
			other.header.Set("Authorization", auth)
		}
		if r := other.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != http.StatusNotFound {
			t.Errorf("%s with alice's MCP session: status %d, want 404", name, r.status)
		}
	}
	if r := a.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.status != http.StatusOK {
		t.Errorf("alice's own session: status %d", r.status)
	}

	// A session handle (2026 clients).
	h := state.NewHandle()
	if _, err := store.Create(ctx, state.Handle, h, state.Record{Owner: owner(aliceTok), WorkerID: "gone", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	useHandle := func(auth string) string {
		t.Helper()
		headers := map[string]string{}
		if auth != "" {
			headers["Authorization"] = auth
		}
		return text(callTool(t, modernClient(t, url, headers), "get_url", map[string]any{"session": h}))
	}
	const refused = "unknown or expired session handle"
	if got := useHandle(bob); !strings.HasPrefix(got, refused) {
		t.Errorf("bob with alice's handle: %q", got)
	}
	if got := useHandle(""); !strings.HasPrefix(got, refused) {
		t.Errorf("anonymous with alice's handle: %q", got)
	}
	if got := useHandle(alice); strings.HasPrefix(got, refused) {
		t.Errorf("alice with her own handle was refused")
	}

	// Revoke alice and create "alice" again: the new token is someone else.
	if _, err := tokenStore(t, srv).Revoke(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	alice2, _ := newToken(t, srv, tokens.Spec{Name: "alice"})
	awaitStatus(t, url, alice, http.StatusUnauthorized)
	awaitStatus(t, url, alice2, http.StatusOK)
	if got := useHandle(alice2); !strings.HasPrefix(got, refused) {
		t.Errorf("the re-created alice with the old alice's handle: %q", got)
	}
	a2 := &rpc{t: t, url: url, session: a.session, header: http.Header{"Authorization": {alice2}}}
	if r := a2.call(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Errorf("the re-created alice with the old alice's MCP session: status %d, want 404", r.status)
	}
}

// TestAuditCallerIsTokenName: the audit trail names an API token's caller
// by the token's name, and others as anonymous.
func TestAuditCallerIsTokenName(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	auth, _ := newToken(t, srv, tokens.Spec{Name: "ci-agent"})
	url := startGateway(t, srv, gateway.Config{})
	callTool(t, modernClient(t, url, map[string]string{"Authorization": auth}), "get_url", nil)
	callTool(t, modernClient(t, url, nil), "get_url", nil)
	recs := auditRecords(t, srv, 2)
	if recs[0].GetCaller() != "ci-agent" || recs[1].GetCaller() != "anonymous" {
		t.Errorf("callers = %q, %q; want ci-agent, anonymous", recs[0].GetCaller(), recs[1].GetCaller())
	}
	for _, r := range recs {
		if strings.Contains(r.String(), strings.TrimPrefix(auth, "Bearer ")) {
			t.Errorf("an audit record holds the token: %v", r)
		}
	}
}

// testIssuer is an OAuth authorization server for tests: it serves OpenID
// discovery metadata and a JWKS, and signs access tokens.
type testIssuer struct {
	*httptest.Server
	rsa      *rsa.PrivateKey
	ec       *ecdsa.PrivateKey
	jwksHits atomic.Int32
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss := &testIssuer{rsa: rk, ec: ek}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss.URL, "jwks_uri": iss.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		iss.jwksHits.Add(1)
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &rk.PublicKey, KeyID: "rsa-1", Algorithm: string(jose.RS256), Use: "sig"},
			{Key: &ek.PublicKey, KeyID: "ec-1", Algorithm: string(jose.ES256), Use: "sig"},
		}}
		_ = json.NewEncoder(w).Encode(set)
	})
	iss.Server = httptest.NewServer(mux)
	t.Cleanup(iss.Close)
	return iss
}

// sign makes a JWT with claims, signed by key under kid.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestOAuth: in resource-server mode the gateway accepts JWT access tokens
// of its issuer for its audience, refuses the others with a challenge that
// points at its RFC 9728 metadata, serves that metadata, and still takes
// API tokens.
func TestOAuth(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	srv := startNATS(t, "")
	apiToken, _ := newToken(t, srv, tokens.Spec{Name: "ci-agent"})
	const public = "https://mcp.example.test"
	audience := public + "/mcp"
	url := startGateway(t, srv, gateway.Config{AuthConfig: gateway.AuthConfig{RequireAuth: true, PublicURL: public, OAuthIssuer: iss.URL}})
	base := strings.TrimSuffix(url, "/mcp")

	now := time.Now()
	claims := func(mod func(*jwt.Claims)) jwt.Claims {
		c := jwt.Claims{Issuer: iss.URL, Subject: "user-42", Audience: jwt.Audience{"other", audience},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	resourceChallenge := `Bearer realm="sovereign", resource_metadata="` + public + `/.well-known/oauth-protected-resource"`
	tests := []struct {
		name, auth string
		want       int
	}{
		{"RS256", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(nil)), http.StatusOK},
		{"ES256", sign(t, jose.ES256, iss.ec, "ec-1", claims(nil)), http.StatusOK},
		{"API token too", strings.TrimPrefix(apiToken, "Bearer "), http.StatusOK},
		{"wrong audience", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.Audience = jwt.Audience{"https://other.example/mcp"} })), http.StatusUnauthorized},
		{"expired", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-5 * time.Minute)) })), http.StatusUnauthorized},
		{"not yet valid", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) })), http.StatusUnauthorized},
		{"no expiry", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.Expiry = nil })), http.StatusUnauthorized},
		{"bad signature", sign(t, jose.RS256, otherKey, "rsa-1", claims(nil)), http.StatusUnauthorized},
		{"unknown issuer", sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.Issuer = "https://evil.example" })), http.StatusUnauthorized},
		{"key of another algorithm", sign(t, jose.ES256, iss.ec, "rsa-1", claims(nil)), http.StatusUnauthorized},
		{"garbage", "not.a.jwt", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, chal, body := post(t, url, "Bearer "+tt.auth, nil)
			if status != tt.want {
				t.Fatalf("status %d (%s), want %d", status, body, tt.want)
			}
			if tt.want == http.StatusUnauthorized && chal != resourceChallenge+`, error="invalid_token"` {
				t.Errorf("WWW-Authenticate = %q", chal)
			}
		})
	}
	if status, chal, _ := post(t, url, "", nil); status != http.StatusUnauthorized || chal != resourceChallenge {
		t.Errorf("no credentials: %d %q, want 401 %q", status, chal, resourceChallenge)
	}

	// Made-up key ids make the gateway ask for the JWKS again at most once
	// a minute.
	before := iss.jwksHits.Load()
	for i := range 5 {
		post(t, url, "Bearer "+sign(t, jose.RS256, otherKey, fmt.Sprintf("made-up-%d", i), claims(nil)), nil)
	}
	if n := iss.jwksHits.Load() - before; n > 1 {
		t.Errorf("5 unknown key ids fetched the JWKS %d times, want at most 1", n)
	}

	// The metadata, at both well-known paths.
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d, %v", path, resp.StatusCode, err)
		}
		if meta.Resource != audience || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != iss.URL ||
			len(meta.BearerMethods) != 1 || meta.BearerMethods[0] != "header" {
			t.Errorf("%s = %+v", path, meta)
		}
	}

	// JWT callers own their sessions like token callers, and the audit
	// trail names them by subject.
	userA := "Bearer " + sign(t, jose.RS256, iss.rsa, "rsa-1", claims(nil))
	userB := "Bearer " + sign(t, jose.RS256, iss.rsa, "rsa-1", claims(func(c *jwt.Claims) { c.Subject = "user-43" }))
	a := &rpc{t: t, url: url, header: http.Header{"Authorization": {userA}}}
	a.session = a.call(initializeBody).header.Get("Mcp-Session-Id")
	b := &rpc{t: t, url: url, session: a.session, header: http.Header{"Authorization": {userB}}}
	if r := b.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Errorf("another subject with user-42's MCP session: %d, want 404", r.status)
	}
	callTool(t, modernClient(t, url, map[string]string{"Authorization": userA}), "get_url", nil)
	if recs := auditRecords(t, srv, 1); recs[0].GetCaller() != "oauth:user-42" {
		t.Errorf("audit caller = %q, want oauth:user-42", recs[0].GetCaller())
	}
}

// TestOAuthExposedStart: an exposed gateway with an OAuth issuer starts
// without API tokens; without an issuer's metadata the metadata path is
// 404.
func TestOAuthExposedStart(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	srv := startNATS(t, "")
	g, err := gateway.New(context.Background(), gateway.Config{Listen: "0.0.0.0:0", AuthConfig: gateway.AuthConfig{PublicURL: "https://mcp.example.test", OAuthIssuer: iss.URL}}, connect(t, srv))
	if err != nil {
		t.Fatalf("exposed gateway with OAuth: %v", err)
	}
	ln, url := listenAll(t)
	serve(t, g, ln)
	if status, _, _ := post(t, url, "", nil); status != http.StatusUnauthorized {
		t.Errorf("exposed OAuth gateway without credentials: %d, want 401", status)
	}

	plain := startGateway(t, srv, gateway.Config{})
	resp, err := http.Get(strings.TrimSuffix(plain, "/mcp") + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("metadata without OAuth: %d, want 404", resp.StatusCode)
	}
}

// TestAuthConfig: the auth flags' checks.
func TestAuthConfig(t *testing.T) {
	t.Parallel()
	base := gateway.Config{Listen: "127.0.0.1:8080", ToolTimeout: time.Minute, SessionTTL: time.Hour, MaxBody: 1 << 20, Bucket: "sov_sessions"}
	for _, tt := range []struct {
		name string
		mod  func(*gateway.Config)
		want string // "" = valid
	}{
		{"oauth", func(c *gateway.Config) {
			c.OAuthIssuer, c.PublicURL = "https://auth.example.com", "https://mcp.example.com"
		}, ""},
		{"loopback http issuer", func(c *gateway.Config) { c.OAuthIssuer, c.PublicURL = "http://127.0.0.1:9000", "http://localhost:8080" }, ""},
		{"issuer without public url", func(c *gateway.Config) { c.OAuthIssuer = "https://auth.example.com" }, "--oauth-issuer: needs --public-url"},
		{"plain http issuer", func(c *gateway.Config) {
			c.OAuthIssuer, c.PublicURL = "http://auth.example.com", "https://mcp.example.com"
		}, "use https"},
		{"audience without issuer", func(c *gateway.Config) { c.OAuthAudience = "x" }, "--oauth-audience: needs --oauth-issuer"},
		{"bad public url", func(c *gateway.Config) { c.PublicURL = "mcp.example.com" }, "--public-url:"},
		{"both", func(c *gateway.Config) { c.InsecureNoAuth, c.RequireAuth = true, true }, "contradicts --require-auth"},
	} {
		c := base
		tt.mod(&c)
		err := c.Validate()
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
		if tt.want == "" && err != nil {
			for _, flag := range []string{"--oauth", "--public-url", "--insecure-no-auth", "--require-auth"} {
				if strings.Contains(err.Error(), flag) {
					t.Errorf("%s: Validate() = %v, want no error about %s", tt.name, err, flag)
				}
			}
		}
	}
}
