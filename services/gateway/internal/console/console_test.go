package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

const testToken = "0123456789abcdef-admin"

// clock is a settable test clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is a console on a real HTTP server, with sources that record
// what the console asked of them.
type fixture struct {
	t      *testing.T
	srv    *httptest.Server
	clock  *testClock
	mu     sync.Mutex
	closed []string
}

func newFixture(t *testing.T, src Sources) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: &testClock{now: time.Now()}}
	if src.CloseSession == nil {
		src.CloseSession = func(_ context.Context, id string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if id != "mcp.1" {
				return ErrNotFound
			}
			f.closed = append(f.closed, id)
			return nil
		}
	}
	c, err := New(Config{Token: testToken, Hosts: []string{"admin.internal"}, Sources: src, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(c)
	t.Cleanup(f.srv.Close)
	return f
}

// client is an HTTP client that does not follow redirects.
func (f *fixture) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type resp struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(c *http.Client, method, path string, body io.Reader, header map[string]string) resp {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	r, err := c.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{status: r.StatusCode, header: r.Header, body: string(b)}
}

// login posts the login form from the console's own origin.
func (f *fixture) login(c *http.Client, token string) resp {
	f.t.Helper()
	form := url.Values{"token": {token}, "name": {"Ada Lovelace"}, "next": {"/sessions"}}
	return f.do(c, http.MethodPost, "/login", strings.NewReader(form.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL})
}

func TestNewRefusesShortToken(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Token: "short-token"})
	if err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("New with an 11-character token: err = %v, want one saying at least 16", err)
	}
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{})
	c := f.client()
	for _, path := range []string{"/", "/approvals", "/audit", "/sessions", "/tokens", "/secrets", "/audit/x?t=1"} {
		r := f.do(c, http.MethodGet, path, nil, nil)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without login: %d Location %q, want 303 to /login", path, r.status, r.header.Get("Location"))
		}
	}
	for _, path := range []string{"/api/approvals", "/api/audit", "/api/sessions", "/api/approvals/events", "/api/nope"} {
		r := f.do(c, http.MethodGet, path, nil, nil)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Bearer realm="sovereign-admin"` {
			t.Errorf("GET %s without token: %d %q, want 401 with the Bearer realm", path, r.status, r.header.Get("WWW-Authenticate"))
		}
	}
	if r := f.do(c, http.MethodPost, "/sessions/mcp.1/close", nil, map[string]string{"Origin": f.srv.URL}); r.status != http.StatusSeeOther {
		t.Errorf("POST close without login: %d, want 303 to /login", r.status)
	}
	if len(f.closed) != 0 {
		t.Errorf("a session was closed without login: %v", f.closed)
	}
	// The login page and its stylesheet need no login.
	if r := f.do(c, http.MethodGet, "/login", nil, nil); r.status != 200 || !strings.Contains(r.body, `name="token"`) {
		t.Errorf("GET /login: %d, want the form", r.status)
	}
	if r := f.do(c, http.MethodGet, "/static/console.css", nil, nil); r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "text/css") {
		t.Errorf("GET /static/console.css: %d %s", r.status, r.header.Get("Content-Type"))
	}
}

func TestBearer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{Secrets: func(context.Context) ([]Secret, error) {
		return []Secret{{Name: "GITHUB_PASSWORD"}}, nil
	}})
	c := f.client()
	r := f.do(c, http.MethodGet, "/api/secrets", nil, map[string]string{"Authorization": "Bearer wrong-token-wrong-token"})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("wrong Bearer: %d %q, want 401 invalid_token", r.status, r.header.Get("WWW-Authenticate"))
	}
	r = f.do(c, http.MethodGet, "/api/secrets", nil, map[string]string{"Authorization": "Bearer " + testToken})
	if r.status != 200 || !strings.Contains(r.body, `"GITHUB_PASSWORD"`) {
		t.Fatalf("right Bearer: %d %s", r.status, r.body)
	}
	// Bearer requests carry no ambient credential: a script's POST needs no Origin.
	r = f.do(c, http.MethodPost, "/api/sessions/mcp.1/close", nil, map[string]string{"Authorization": "Bearer " + testToken})
	if r.status != 200 || len(f.closed) != 1 {
		t.Fatalf("Bearer POST close: %d %s, closed %v", r.status, r.body, f.closed)
	}
	r = f.do(c, http.MethodPost, "/api/sessions/mcp.2/close", nil, map[string]string{"Authorization": "Bearer " + testToken})
	if r.status != http.StatusNotFound {
		t.Errorf("closing an unknown session: %d, want 404", r.status)
	}
	// Routes that change state are POST only.
	r = f.do(c, http.MethodGet, "/api/sessions/mcp.1/close", nil, map[string]string{"Authorization": "Bearer " + testToken})
	if r.status == 200 || len(f.closed) != 1 {
		t.Errorf("GET of a POST route: %d, closed %v", r.status, f.closed)
	}
}

func TestLoginCookieAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{Sessions: func(context.Context) ([]Session, error) {
		return []Session{{ID: "mcp.1", Kind: "mcp", Owner: "anonymous", Worker: "w1", BrowserSession: "s1",
			URL: `https://x.example/<script>alert(1)</script>`, Created: time.Now(), Touched: time.Now()}}, nil
	}})
	c := f.client()
	if r := f.login(c, "not-the-admin-token"); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "not the admin token") {
		t.Fatalf("login with a wrong token: %d, want 401 and a message", r.status)
	}
	r := f.login(c, testToken)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/sessions" {
		t.Fatalf("login: %d to %q, want 303 to /sessions", r.status, r.header.Get("Location"))
	}
	ck := r.header.Get("Set-Cookie")
	for _, want := range []string{"sov_console=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(ck, want) {
			t.Errorf("Set-Cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, testToken) {
		t.Fatalf("the cookie holds the admin token: %s", ck)
	}
	r = f.do(c, http.MethodGet, "/sessions", nil, nil)
	if r.status != 200 {
		t.Fatalf("GET /sessions with the cookie: %d", r.status)
	}
	if strings.Contains(r.body, "<script>alert") || !strings.Contains(r.body, "&lt;script&gt;alert(1)") {
		t.Errorf("the session's URL is not escaped:\n%s", r.body)
	}
	if !strings.Contains(r.body, "Ada_Lovelace") {
		t.Errorf("the page does not name the operator of the login")
	}

	// A cross-site POST rides on the cookie but must be refused, and so
	// must one that says nowhere where it comes from.
	for name, h := range map[string]map[string]string{
		"other origin":  {"Origin": "http://evil.example"},
		"other referer": {"Referer": "http://evil.example/page"},
		"null origin":   {"Origin": "null"},
		"no origin":     {},
	} {
		if r := f.do(c, http.MethodPost, "/sessions/mcp.1/close", nil, h); r.status != http.StatusForbidden {
			t.Errorf("%s POST with the cookie: %d, want 403", name, r.status)
		}
		if r := f.do(c, http.MethodPost, "/api/sessions/mcp.1/close", nil, h); r.status != http.StatusForbidden {
			t.Errorf("%s API POST with the cookie: %d, want 403", name, r.status)
		}
	}
	if len(f.closed) != 0 {
		t.Fatalf("a cross-site POST closed a session: %v", f.closed)
	}
	r = f.do(c, http.MethodPost, "/sessions/mcp.1/close", nil, map[string]string{"Referer": f.srv.URL + "/sessions"})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/sessions?done=closed" || len(f.closed) != 1 {
		t.Fatalf("same-origin POST close: %d %q, closed %v", r.status, r.header.Get("Location"), f.closed)
	}

	// Logging out ends the cookie, even replayed.
	saved := c.Jar.Cookies(mustURL(t, f.srv.URL))
	if r := f.do(c, http.MethodPost, "/logout", nil, map[string]string{"Origin": f.srv.URL}); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	replay := f.client()
	replay.Jar.SetCookies(mustURL(t, f.srv.URL), saved)
	if r := f.do(replay, http.MethodGet, "/sessions", nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("a logged-out cookie still works: %d", r.status)
	}
}

func TestCookieTamperingAndExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{})
	c := f.client()
	if r := f.login(c, testToken); r.status != http.StatusSeeOther {
		t.Fatalf("login: %d", r.status)
	}
	u := mustURL(t, f.srv.URL)
	ck := c.Jar.Cookies(u)[0]
	i := strings.LastIndexByte(ck.Value, '.')
	parts := strings.Split(ck.Value[:i], ".")
	parts[1] = "9999999999" // a later expiry, same signature
	forged := f.client()
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: strings.Join(parts, ".") + ck.Value[i:]}})
	if r := f.do(forged, http.MethodGet, "/tokens", nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("a cookie with a changed expiry was accepted: %d", r.status)
	}
	if r := f.do(c, http.MethodGet, "/tokens", nil, nil); r.status != 200 || !strings.Contains(r.body, "not configured") {
		t.Fatalf("GET /tokens: %d, want 200 saying not configured", r.status)
	}
	f.clock.Add(DefaultSessionTTL + time.Second)
	if r := f.do(c, http.MethodGet, "/tokens", nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("a cookie past 12 h was accepted: %d", r.status)
	}
	// A console with another admin token does not take this one's cookies.
	other, err := New(Config{Token: "another-admin-token-0000", Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.cookies.parse(ck.Value, time.Now()); ok {
		t.Error("a cookie signed under one admin token is valid under another")
	}
}

func TestHostCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{})
	c := f.client()
	auth := "Bearer " + testToken
	for host, want := range map[string]int{
		"evil.example":        http.StatusForbidden, // DNS rebinding
		"evil.example:8086":   http.StatusForbidden,
		"localhost:8086":      200,
		"127.0.0.1:8086":      200,
		"[::1]:8086":          200,
		"admin.internal:8086": 200, // the configured host
	} {
		r := f.do(c, http.MethodGet, "/api/secrets", nil, map[string]string{"Host": host, "Authorization": auth})
		if want == 200 && r.status == http.StatusForbidden || want == http.StatusForbidden && r.status != want {
			t.Errorf("Host %s: %d, want %d", host, r.status, want)
		}
	}
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Sources{})
	c := f.client()
	for i := range loginLimit {
		if r := f.login(c, "wrong-wrong-wrong-wrong"); r.status != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d, want 401", i+1, r.status)
		}
	}
	r := f.login(c, testToken)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many failed logins") || r.header.Get("Retry-After") == "" {
		t.Fatalf("login after %d failures: %d, want 429 with a message and Retry-After", loginLimit, r.status)
	}
	if r := f.do(c, http.MethodGet, "/api/secrets", nil, map[string]string{"Authorization": "Bearer " + testToken}); r.status != http.StatusTooManyRequests {
		t.Errorf("Bearer while limited: %d, want 429", r.status)
	}
	f.clock.Add(time.Minute)
	if r := f.login(c, testToken); r.status != http.StatusSeeOther {
		t.Fatalf("login a minute later: %d, want 303", r.status)
	}
}

func TestLoginRedirectStaysLocal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/audit?tool=eval":  "/audit?tool=eval",
		"//evil.example/":   "/",
		"/\\evil.example":   "/",
		"https://evil.test": "/",
		"":                  "/",
		"/login":            "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAuditPages(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []*historyv1.AuditQuery
	rec := &historyv1.AuditRecord{Id: "rec-1", TimeUnixNano: 1_700_000_000_123_456_789, Tool: "eval", Caller: "ci-bot",
		Arguments: `{"expression":"document.title + '<b>'"}`, Result: "Example <b>", Outcome: historyv1.Outcome_OUTCOME_OK,
		DurationMicros: 12_500, TraceId: "0af7651916cd43dd8448eb211c80319c", Source: "gateway",
		Approval: &historyv1.Approval{State: "approved", Scope: "session", DecidedBy: "console:ada",
			DecidedAtUnixMilli: 1_700_000_003_000, WaitedMs: 2500, RequestId: "req7"}}
	f := newFixture(t, Sources{Audit: func(_ context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
		mu.Lock()
		asked = append(asked, q)
		mu.Unlock()
		if q.GetText() == "ab" {
			return nil, errors.New("text filter: at least 3 characters")
		}
		if q.GetCursor() != "" || (q.GetSinceUnixNano() != 0 && q.GetSinceUnixNano() != rec.TimeUnixNano) {
			return &historyv1.AuditPage{}, nil
		}
		return &historyv1.AuditPage{Records: []*historyv1.AuditRecord{rec}, NextCursor: "c2"}, nil
	}})
	c := f.client()
	f.login(c, testToken)
	r := f.do(c, http.MethodGet, "/audit?tool=eval&errors=1&text=title", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "/audit/rec-1?t=1700000000123456789") || !strings.Contains(r.body, "cursor=c2") {
		t.Fatalf("audit page: %d\n%s", r.status, r.body)
	}
	mu.Lock()
	q := asked[len(asked)-1]
	mu.Unlock()
	if q.GetTool() != "eval" || !q.GetErrorsOnly() || q.GetText() != "title" || q.GetLimit() != auditPageSize {
		t.Errorf("the page asked %v", q)
	}
	if r := f.do(c, http.MethodGet, "/audit?text=ab", nil, nil); !strings.Contains(r.body, "at least 3 characters") {
		t.Errorf("a failed query's error is not shown")
	}
	r = f.do(c, http.MethodGet, "/audit/rec-1?t=1700000000123456789", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "\n  &#34;expression&#34;: &#34;document.title &#43; &#39;&lt;b&gt;&#39;&#34;\n") {
		t.Fatalf("detail page: %d\n%s", r.status, r.body)
	}
	for _, want := range []string{"approved · session", "console:ada", "2.5s", "req7", "2023-11-14T22:13:23Z"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the detail's approval lacks %q", want)
		}
	}
	if !strings.Contains(r.body, rec.TraceId) || !strings.Contains(r.body, "Example &lt;b&gt;") {
		t.Errorf("the detail lacks the trace id or the escaped result")
	}
	if r := f.do(c, http.MethodGet, "/audit/rec-2?t=1700000000123456789", nil, nil); r.status != http.StatusNotFound {
		t.Errorf("unknown record: %d, want 404", r.status)
	}
	r = f.do(c, http.MethodGet, "/api/audit?tool=eval", nil, map[string]string{"Authorization": "Bearer " + testToken})
	var page struct {
		Records []struct {
			ID   string `json:"id"`
			Tool string `json:"tool"`
		} `json:"records"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Records) != 1 || page.Records[0].ID != "rec-1" || page.NextCursor != "c2" {
		t.Errorf("GET /api/audit: %d %s (%v)", r.status, r.body, err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestApprovalsLive runs the console on a real approval queue: the event
// stream announces a new request, the page shows it, and the form decides
// it.
func TestApprovalsLive(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := approval.Open(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Sources{Approvals: q})
	c := f.client()
	f.login(c, testToken)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/approvals/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("event stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := bufio.NewScanner(resp.Body)
	events.Scan() // the retry line: the stream is open, so the watch is on

	asked, err := q.Submit(ctx, approval.Request{Tool: "eval", Arguments: `{"expression":"1+1"}`, Caller: "ci-agent",
		Owner: "token:secret-owner-digest", Scope: "binding-digest", Grant: "tool:eval"})
	if err != nil {
		t.Fatal(err)
	}
	var data string
	for events.Scan() {
		if d, ok := strings.CutPrefix(events.Text(), "data: "); ok {
			data = d
			break
		}
	}
	var got approval.Request
	if err := json.Unmarshal([]byte(data), &got); err != nil || got.ID != asked.ID || got.State != approval.Pending {
		t.Fatalf("first event = %q (%v), want the pending request %s", data, err, asked.ID)
	}
	if strings.Contains(data, "secret-owner-digest") {
		t.Errorf("the event shows the request's owner: %s", data)
	}

	r := f.do(c, http.MethodGet, "/approvals", nil, nil)
	if !strings.Contains(r.body, `action="/approvals/`+asked.ID+`"`) || !strings.Contains(r.body, `id="pending-count" class="badge hot">1<`) {
		t.Fatalf("approvals page lacks the request or the count:\n%s", r.body)
	}
	form := url.Values{"decision": {"session"}, "note": {"looks fine"}}
	r = f.do(c, http.MethodPost, "/approvals/"+asked.ID, strings.NewReader(form.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/approvals?done=session" {
		t.Fatalf("decide: %d %s", r.status, r.header.Get("Location"))
	}
	cur, err := q.Get(ctx, asked.ID)
	if err != nil || cur.State != approval.Approved || cur.Decision != approval.Session || cur.DecidedBy != "console:Ada_Lovelace" || cur.Note != "looks fine" {
		t.Fatalf("after the decision: %+v, %v", cur, err)
	}
	r = f.do(c, http.MethodPost, "/approvals/"+asked.ID, strings.NewReader(url.Values{"decision": {"deny"}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL})
	if r.header.Get("Location") != "/approvals?done=already" {
		t.Errorf("deciding twice: %d %s, want a redirect saying it was decided", r.status, r.header.Get("Location"))
	}
	if r := f.do(c, http.MethodGet, "/approvals?done=already", nil, nil); !strings.Contains(r.body, "already decided") {
		t.Errorf("the page does not say the request was already decided")
	}
}

func TestPrettyJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"b":1,"a":"x\u003cy\u003e\u0026"}`: "{\n  \"b\": 1,\n  \"a\": \"x<y>&\"\n}",
		`{"a":"\\u003c"}`:                    "{\n  \"a\": \"\\\\u003c\"\n}", // an escaped backslash, then text
		`{"a":"\u00e9\n"}`:                   "{\n  \"a\": \"\\u00e9\\n\"\n}",
		`{"a":"trunc`:                        `{"a":"trunc`, // not JSON: as it is
	} {
		if got := prettyJSON(in); got != want {
			t.Errorf("prettyJSON(%s) = %q, want %q", in, got, want)
		}
	}
}
