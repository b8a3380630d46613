package browser_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// httpSecret is the value of the secret API_KEY in the HTTP tool tests.
const httpSecret = "sk-live-4f1c9a7e2b8d6035"

// echoServer is an endpoint that tells what it received, secrets and all.
type echoServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "<host> <method> <path>?<query> | <X-Api-Key> | <Authorization> | <body>"
}

func (e *echoServer) last() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		return ""
	}
	return e.seen[len(e.seen)-1]
}

func (e *echoServer) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	e := &echoServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		line := fmt.Sprintf("%s %s %s | %s | %s | %s", r.Host, r.Method, r.URL.RequestURI(), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), body)
		e.mu.Lock()
		e.seen = append(e.seen, line)
		e.mu.Unlock()
		// The echo shows the secret plain, in JSON and in base64.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"got":%q,"b64":%q}`, line, base64.StdEncoding.EncodeToString([]byte(r.Header.Get("X-Api-Key"))))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		// 995 bytes, then the secret across the 1000-byte cap.
		body := strings.Repeat("a", 995) + httpSecret + strings.Repeat("b", 5000)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("é", (1<<20)/2+100) // 2 bytes each: more than 1 MiB
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0xff, 0xfe, 0x00})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	})
	e.Server = httptest.NewServer(mux)
	t.Cleanup(e.Server.Close)
	return e
}

// storeSecret puts an operator secret into the fleet's store and returns
// the key that reads it.
func storeSecret(t *testing.T, f *fleet, name, value string) *secrets.Key {
	t.Helper()
	keyText, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	storeSecretWith(t, f, key, name, value)
	return key
}

// storeSecretWith stores a secret under key.
func storeSecretWith(t *testing.T, f *fleet, key *secrets.Key, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := secrets.Open(ctx, f.c.NATS(), f.c.Prefix(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, name, []byte(value)); err != nil {
		t.Fatal(err)
	}
}

// httpFleet is a worker with a secret key and the secret API_KEY.
func httpFleet(t *testing.T) *fleet {
	t.Helper()
	f := newFleet(t)
	key := storeSecret(t, f, "API_KEY", httpSecret)
	f.worker(browser.Config{ID: "hw", MaxSessions: 1, SecretKey: key})
	return f
}

func (f *fleet) httpCall(req *browserv1.HTTPToolRequest) (*browserv1.HTTPToolResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if req.Tool == "" {
		req.Tool = "Test"
	}
	if req.Method == "" {
		req.Method = "GET"
	}
	var res browserv1.HTTPToolResponse
	err := f.c.Request(ctx, f.c.Subject("browser", "http"), req, &res)
	return &res, err
}

// noSecret fails the test when any part of s shows the secret (or a
// piece of it long enough to matter).
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, form := range []string{httpSecret[:8], httpSecret[len(httpSecret)-8:], base64.StdEncoding.EncodeToString([]byte(httpSecret))[:12]} {
		if strings.Contains(s, form) {
			t.Errorf("%s shows the secret (%q): %s", what, form, s)
		}
	}
}

// TestHTTPToolWorker: sov.browser.http fills in secrets, enforces the URL
// policy on the URL and each redirect, caps the body and scrubs every
// secret value out of what it answers.
func TestHTTPToolWorker(t *testing.T) {
	f := httpFleet(t)
	e := newEchoServer(t)
	host := strings.TrimPrefix(e.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	localhost := "http://localhost:" + port

	t.Run("secrets in, scrubbed out", func(t *testing.T) {
		res, err := f.httpCall(&browserv1.HTTPToolRequest{
			Method:  "POST",
			Url:     e.URL + "/echo/x?key={{secrets.API_KEY}}&city=Oslo",
			Headers: map[string]string{"X-Api-Key": "{{ secrets.API_KEY }}", "Authorization": "Bearer {{secrets.API_KEY}}"},
			Body:    []byte(`{"q":"{{secrets.API_KEY}}"}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s POST /echo/x?key=%s&city=Oslo | %s | Bearer %s | {\"q\":\"{{secrets.API_KEY}}\"}", host, httpSecret, httpSecret, httpSecret)
		if got := e.last(); got != want {
			t.Errorf("the endpoint received\n%s\nwant\n%s", got, want)
		}
		if res.GetStatusCode() != 200 || res.GetStatus() != "200 OK" || res.GetContentType() != "application/json" || res.GetClipped() {
			t.Errorf("response = %v", res)
		}
		if !strings.Contains(res.GetBody(), `| {{secrets.API_KEY}} | Bearer {{secrets.API_KEY}} |`) || !strings.Contains(res.GetBody(), `"b64":"{{secrets.API_KEY}}"`) {
			t.Errorf("body = %s, want the secret's placeholders", res.GetBody())
		}
		noSecret(t, "the response", res.String())
	})

	t.Run("missing secret", func(t *testing.T) {
		n := e.count()
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/echo/", Headers: map[string]string{"Authorization": "Bearer {{secrets.NOPE}}"}})
		wantCode(t, "missing secret", err, commonv1.ErrorCode_INVALID_ARGUMENT, `header Authorization: unknown secret "NOPE"`)
		if e.count() != n {
			t.Error("the request went out")
		}
	})

	t.Run("secret in the host", func(t *testing.T) {
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: "http://{{secrets.API_KEY}}.example/"})
		wantCode(t, "secret in host", err, commonv1.ErrorCode_INVALID_ARGUMENT, "not in its host")
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			req  *browserv1.HTTPToolRequest
			want string
		}{
			{&browserv1.HTTPToolRequest{Method: "TRACE", Url: e.URL}, `method "TRACE" is not one of`},
			{&browserv1.HTTPToolRequest{Url: "ftp://example.com/"}, "is not an absolute http or https URL"},
			{&browserv1.HTTPToolRequest{Url: e.URL, MaxBodyBytes: 17 << 20}, "max_body_bytes 17825792: must be from 1 to 16777216"},
			{&browserv1.HTTPToolRequest{Url: e.URL, TimeoutMs: -1}, "timeout_ms -1: must be from 1"},
		} {
			_, err := f.httpCall(tc.req)
			wantCode(t, tc.req.String(), err, commonv1.ErrorCode_INVALID_ARGUMENT, tc.want)
		}
	})

	t.Run("policy blocks the endpoint", func(t *testing.T) {
		n := e.count()
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/echo/?k={{secrets.API_KEY}}",
			Policy: enforced(true, &browserv1.UrlRules{Tier: "global", Block: []string{"127.0.0.1"}})})
		wantCode(t, "blocked endpoint", err, commonv1.ErrorCode_FORBIDDEN, e.URL+`/echo/ is blocked by block rule "127.0.0.1" (global)`)
		noSecret(t, "the error", err.Error())
		_, err = f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/echo/", Policy: enforced(true)})
		wantCode(t, "private endpoint", err, commonv1.ErrorCode_FORBIDDEN, "private address")
		if e.count() != n {
			t.Error("a blocked request went out")
		}
	})

	t.Run("redirect to a blocked host", func(t *testing.T) {
		n := e.count()
		_, err := f.httpCall(&browserv1.HTTPToolRequest{
			Url:    e.URL + "/redirect?to=" + url.QueryEscape(localhost+"/echo/"),
			Policy: enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}),
		})
		wantCode(t, "redirect", err, commonv1.ErrorCode_FORBIDDEN, "redirect to "+localhost+"/echo/ refused: "+localhost+"/echo/ is blocked by not in the allow list of the global tier")
		if e.count() != n {
			t.Error("the redirect was followed")
		}
		// Allowed, the redirect is followed.
		res, err := f.httpCall(&browserv1.HTTPToolRequest{
			Url:    e.URL + "/redirect?to=" + url.QueryEscape(e.URL+"/echo/back"),
			Policy: enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}),
		})
		if err != nil || !strings.Contains(res.GetBody(), "GET /echo/back") {
			t.Errorf("allowed redirect: %v, %v", res, err)
		}
	})

	t.Run("secret headers stay on the endpoint's host", func(t *testing.T) {
		hdr := map[string]string{"X-Api-Key": "{{secrets.API_KEY}}"}
		if _, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/redirect?to=/echo/same", Headers: hdr}); err != nil {
			t.Fatal(err)
		}
		if got := e.last(); !strings.Contains(got, "/echo/same | "+httpSecret+" |") {
			t.Errorf("same-host redirect: the endpoint received %s, want the header", got)
		}
		if _, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/redirect?to=" + url.QueryEscape(localhost+"/echo/other"), Headers: hdr}); err != nil {
			t.Fatal(err)
		}
		if got := e.last(); !strings.HasPrefix(got, "localhost:"+port+" GET /echo/other |  |") {
			t.Errorf("redirect to another host: it received %s, want no X-Api-Key", got)
		}
	})

	t.Run("body cap", func(t *testing.T) {
		res, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/big", MaxBodyBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		body := res.GetBody()
		if !res.GetClipped() || !strings.HasPrefix(body, strings.Repeat("a", 995)) || !strings.HasSuffix(body, "\n[clipped: this is the first 1000 bytes of 6019]") {
			t.Errorf("clipped body = %q (clipped %v)", body, res.GetClipped())
		}
		// The cap cut the secret: no piece of it may show.
		if strings.Contains(body, httpSecret[:4]) {
			t.Errorf("the clipped body shows a piece of the secret: %q", body[990:])
		}
		res, err = f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/huge"})
		if err != nil {
			t.Fatal(err)
		}
		text, note, _ := strings.Cut(res.GetBody(), "\n[clipped: ")
		if !res.GetClipped() || len(text) != 1<<20 || note != "this is the first 1048576 bytes of 1048776]" {
			t.Errorf("default cap: clipped %v, %d bytes, note %q", res.GetClipped(), len(text), note)
		}
	})

	t.Run("binary body", func(t *testing.T) {
		res, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/binary"})
		if err != nil || res.GetBody() != "[binary content (image/png), not shown]" {
			t.Errorf("binary: %v, %v", res, err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/slow", TimeoutMs: 300})
		wantCode(t, "slow endpoint", err, commonv1.ErrorCode_TIMEOUT, "GET "+e.URL+"/slow did not finish within 300ms")
	})
}
