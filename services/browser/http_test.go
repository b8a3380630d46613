package browser_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
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
	mu      sync.Mutex
	seen    []string      // "<host> <method> <path>?<query> | <X-Api-Key> | <Authorization> | <body>"
	headers []http.Header // the headers of each request, in order
}

// lastHeader is the headers of the last request (nil before one).
func (e *echoServer) lastHeader() http.Header {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.headers) == 0 {
		return nil
	}
	return e.headers[len(e.headers)-1]
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

func newEchoServer(t *testing.T) *echoServer { return newEchoServerAt(t, "127.0.0.1:0") }

// newEchoServerAt is an echoServer listening on addr ("127.0.0.2:0": a
// second loopback host).
func newEchoServerAt(t *testing.T, addr string) *echoServer {
	t.Helper()
	e := &echoServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		line := fmt.Sprintf("%s %s %s | %s | %s | %s", r.Host, r.Method, r.URL.RequestURI(), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), body)
		e.mu.Lock()
		e.seen = append(e.seen, line)
		e.headers = append(e.headers, r.Header.Clone())
		e.mu.Unlock()
		// The echo shows the secret plain, in JSON and in base64.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"got":%q,"b64":%q}`, line, base64.StdEncoding.EncodeToString([]byte(r.Header.Get("X-Api-Key"))))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/redirect-with-key", func(w http.ResponseWriter, r *http.Request) {
		// Passes its own query's key on, as some endpoints do.
		http.Redirect(w, r, r.URL.Query().Get("to")+"?k="+url.QueryEscape(r.URL.Query().Get("k")), http.StatusFound)
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
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	e.Start()
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
	t.Parallel()
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
			Url:       e.URL + "/redirect?to=" + url.QueryEscape(localhost+"/echo/"),
			Policy:    enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}),
			Redirects: []string{"localhost"}, // the tool allows it; the policy does not
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
		if _, err := f.httpCall(&browserv1.HTTPToolRequest{Url: e.URL + "/redirect?to=" + url.QueryEscape(localhost+"/echo/other"), Headers: hdr, Redirects: []string{"localhost"}}); err != nil {
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

// TestHTTPToolRedirects: a redirect of an HTTP tool never carries a
// Referer, leaves the endpoint's origin only where the tool's "redirects"
// allows, then without the tool's headers and never with a secret in its
// URL, and every hop meets the URL policy. The endpoint (127.0.0.1) and
// the other host (127.0.0.2) are two real servers.
func TestHTTPToolRedirects(t *testing.T) {
	t.Parallel()
	f := httpFleet(t)
	a := newEchoServer(t)
	b := newEchoServerAt(t, "127.0.0.2:0")
	policy := func() *browserv1.UrlPolicy {
		return enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1", "127.0.0.2"}})
	}
	// The key stands in the endpoint's query, as in the report.
	to := func(target string) string {
		return a.URL + "/redirect?k={{secrets.API_KEY}}&to=" + url.QueryEscape(target)
	}
	hdr := map[string]string{"X-Api-Key": "{{secrets.API_KEY}}", "Authorization": "Bearer {{secrets.API_KEY}}", "X-Plain": "not-a-secret"}

	t.Run("no Referer on a same-origin hop", func(t *testing.T) {
		res, err := f.httpCall(&browserv1.HTTPToolRequest{Url: to("/echo/same"), Headers: hdr, Policy: policy()})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.GetBody(), "GET /echo/same") {
			t.Errorf("body = %s, want the echo of /echo/same", res.GetBody())
		}
		got := a.lastHeader()
		if ref := got.Get("Referer"); ref != "" {
			t.Errorf("the endpoint received Referer %q", ref)
		}
		if got.Get("X-Api-Key") != httpSecret || got.Get("X-Plain") != "not-a-secret" {
			t.Errorf("same-origin hop: headers %v, want the tool's", got)
		}
	})

	t.Run("another host is refused by default", func(t *testing.T) {
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: to(b.URL + "/echo/x"), Headers: hdr, Policy: policy()})
		wantCode(t, "cross-host redirect", err, commonv1.ErrorCode_FORBIDDEN,
			"redirect to "+b.URL+"/echo/x refused: it leaves the endpoint's origin "+a.URL+`, and the tool's "redirects" does not allow that host`)
		if err != nil {
			noSecret(t, "the error", err.Error())
		}
		// Another port of the same address is another origin too.
		_, err = f.httpCall(&browserv1.HTTPToolRequest{Url: to(strings.Replace(b.URL, "127.0.0.2", "127.0.0.1", 1) + "/echo/x"), Policy: policy()})
		wantCode(t, "other port", err, commonv1.ErrorCode_FORBIDDEN, "leaves the endpoint's origin")
		if n := b.count(); n != 0 {
			t.Errorf("the other host received %d requests, want none", n)
		}
	})

	t.Run("allowed by the tool, without its headers", func(t *testing.T) {
		res, err := f.httpCall(&browserv1.HTTPToolRequest{Url: to(b.URL + "/echo/y"), Headers: hdr, Policy: policy(), Redirects: []string{"127.0.0.2"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.GetBody(), "GET /echo/y") {
			t.Errorf("body = %s, want the other host's echo", res.GetBody())
		}
		got := b.lastHeader()
		for _, k := range []string{"Referer", "X-Api-Key", "Authorization", "X-Plain"} {
			if v := got.Get(k); v != "" {
				t.Errorf("the other host received %s: %q", k, v)
			}
		}
		noSecret(t, "what the other host received", fmt.Sprint(got, b.last()))
	})

	t.Run("a secret in the redirect's URL", func(t *testing.T) {
		n := b.count()
		_, err := f.httpCall(&browserv1.HTTPToolRequest{
			Url:    a.URL + "/redirect-with-key?k={{secrets.API_KEY}}&to=" + url.QueryEscape(b.URL+"/echo/z"),
			Policy: policy(), Redirects: []string{"*"},
		})
		wantCode(t, "secret in the target", err, commonv1.ErrorCode_FORBIDDEN, "redirect to "+b.URL+"/echo/z refused: its URL carries a secret value")
		if b.count() != n {
			t.Error("the other host received the request")
		}
	})

	t.Run("the policy judges every hop", func(t *testing.T) {
		n := b.count()
		_, err := f.httpCall(&browserv1.HTTPToolRequest{
			Url:       to(b.URL + "/echo/w"),
			Policy:    enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}),
			Redirects: []string{"*"},
		})
		wantCode(t, "private hop", err, commonv1.ErrorCode_FORBIDDEN, "redirect to "+b.URL+"/echo/w refused: "+b.URL+"/echo/w is blocked by")
		_, err = f.httpCall(&browserv1.HTTPToolRequest{
			Url:       to(b.URL + "/echo/w"),
			Policy:    enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1", "127.0.0.2"}, Block: []string{"127.0.0.2"}}),
			Redirects: []string{"127.0.0.2"},
		})
		wantCode(t, "blocked hop", err, commonv1.ErrorCode_FORBIDDEN, `is blocked by block rule "127.0.0.2"`)
		if b.count() != n {
			t.Error("the blocked host received the request")
		}
	})

	t.Run("bad redirects patterns", func(t *testing.T) {
		_, err := f.httpCall(&browserv1.HTTPToolRequest{Url: a.URL + "/echo/", Redirects: []string{"x.example/path"}})
		wantCode(t, "bad pattern", err, commonv1.ErrorCode_INVALID_ARGUMENT, `redirects: url pattern "x.example/path"`)
	})
}
