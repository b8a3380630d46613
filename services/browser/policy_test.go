package browser_test

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// origin is a test server that records the paths it served, and answers
// WebSocket handshakes on /ws.
type origin struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newOrigin(t *testing.T, pages map[string]string) *origin {
	t.Helper()
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits = append(o.hits, r.URL.Path)
		o.mu.Unlock()
		if r.URL.Path == "/ws" {
			acceptWebSocket(w, r)
			return
		}
		if to := r.URL.Query().Get("to"); r.URL.Path == "/redirect" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript")
		}
		body, ok := pages[r.URL.Path]
		if !ok {
			body = "<!doctype html><title>page " + r.URL.Path + "</title>"
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) served(path string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range o.hits {
		if h == path {
			return true
		}
	}
	return false
}

// port is the server's port; "http://localhost:"+port reaches it under
// another host name than its URL (127.0.0.1).
func (o *origin) port() string { return o.URL[strings.LastIndex(o.URL, ":")+1:] }

// acceptWebSocket completes a WebSocket handshake and holds the
// connection open for a while.
func acceptWebSocket(w http.ResponseWriter, r *http.Request) {
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, bw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	fmt.Fprintf(bw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
	_ = bw.Flush()
	time.AfterFunc(5*time.Second, func() { _ = conn.Close() })
}

func (f *fleet) openWith(p *browserv1.UrlPolicy) *browserv1.OpenSessionResponse {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var res browserv1.OpenSessionResponse
	if err := f.c.Request(ctx, f.c.Subject("browser", "open"), &browserv1.OpenSessionRequest{Owner: "test", Policy: p}, &res); err != nil {
		f.t.Fatalf("open session with a policy: %v", err)
	}
	return &res
}

// openUnder opens a session under policy p and returns a call that sends p
// with every request, as the gateway does.
func (f *fleet) openUnder(p *browserv1.UrlPolicy) func(*browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	f.t.Helper()
	s := f.openWith(p)
	return func(req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		req.Policy = p
		return f.call(s, req)
	}
}

func blockedReq() *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_BlockedRequests{BlockedRequests: &browserv1.NoArgs{}}}
}

type blockedList struct {
	Blocked []struct {
		URL          string `json:"url"`
		ResourceType string `json:"resource_type"`
		Rule         string `json:"rule"`
		TimeMs       int64  `json:"time_ms"`
	} `json:"blocked"`
}

func (f *fleet) blocked(s *browserv1.OpenSessionResponse) (string, blockedList) {
	f.t.Helper()
	res, err := f.call(s, blockedReq())
	if err != nil {
		f.t.Fatalf("blocked_requests: %v", err)
	}
	var l blockedList
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), &l); err != nil {
		f.t.Fatalf("blocked_requests JSON %q: %v", string(structured.JSON(res.GetStructured())), err)
	}
	return res.GetContent()[0].GetText(), l
}

// waitBlocked waits until blocked_requests lists a request whose URL
// contains what, and returns it.
func (f *fleet) waitBlocked(s *browserv1.OpenSessionResponse, what, resourceType string) string {
	f.t.Helper()
	return kittest.EventuallyValue(f.t, 30*time.Second, func() (string, error) {
		text, l := f.blocked(s)
		for _, b := range l.Blocked {
			if strings.Contains(b.URL, what) && b.ResourceType == resourceType {
				if b.Rule == "" || b.TimeMs == 0 {
					f.t.Fatalf("blocked request %+v lacks its rule or time", b)
				}
				return b.Rule, nil
			}
		}
		return "", fmt.Errorf("blocked_requests does not list a %s request to %s:\n%s", resourceType, what, text)
	})
}

func enforced(blockPrivate bool, tiers ...*browserv1.UrlRules) *browserv1.UrlPolicy {
	return &browserv1.UrlPolicy{Enforced: true, BlockPrivate: blockPrivate, Tiers: tiers}
}

// TestPolicyEnforced drives one session whose policy allows 127.0.0.1
// (named explicitly, which lifts block_private for it) and nothing else,
// so that the same servers reached as "localhost" are refused.
func TestPolicyEnforced(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "policy", MaxSessions: 2})
	other := newOrigin(t, nil)
	evil := "http://localhost:" + other.port()
	home := newOrigin(t, map[string]string{
		"/frames": `<!doctype html><title>frames</title><iframe src="` + evil + `/framed"></iframe>
<script>
window.fetchResult = fetch("` + evil + `/data").then(() => "loaded", e => "rejected: " + e.name);
window.sameResult = fetch("/same").then(r => "loaded " + r.status, e => "rejected");
</script>`,
		"/sockets": `<!doctype html><title>sockets</title><script>
function ws(u) { return new Promise(ok => { const s = new WebSocket(u); s.onopen = () => ok("open"); s.onerror = () => ok("error"); }); }
window.wsBlocked = ws("ws://localhost:` + other.port() + `/ws");
</script>`,
		"/popup": `<!doctype html><title>popup</title><a id=blank target=_blank href="` + evil + `/blank">x</a>
<script>window.open("` + evil + `/opened")</script>`,
		"/link": `<!doctype html><title>link</title><a id=go href="` + evil + `/clicked">go</a>`,
		"/sw-page": `<!doctype html><title>sw</title><script>
window.swState = navigator.serviceWorker.register("/sw.js").then(r => "registered", e => "failed: " + e);
</script>`,
		"/sw.js":       `fetch("` + evil + `/from-sw").catch(() => {});`,
		"/worker-page": `<!doctype html><title>worker</title><script>new Worker("/worker.js")</script>`,
		"/worker.js":   `fetch("` + evil + `/from-worker").catch(() => {});`,
	})
	s := f.openWith(enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}))

	if got, _ := f.blocked(s); got != "no requests were blocked" {
		t.Fatalf("blocked_requests before any load = %q", got)
	}
	if got := f.mustCall(s, openReq(home.URL+"/a")); !strings.Contains(got, `title "page /a"`) {
		t.Fatalf("open an allowed page = %q", got)
	}

	// A blocked navigation is FORBIDDEN and names the URL and the rule.
	_, err := f.call(s, openReq(evil+"/x"))
	wantCode(t, "open a blocked host", err, commonv1.ErrorCode_FORBIDDEN, evil+"/x is blocked by not in the allow list of the global tier")
	if other.served("/x") {
		t.Fatal("the blocked page was requested from its server")
	}

	// A redirect from an allowed host to a blocked one fails with the rule.
	_, err = f.call(s, openReq(home.URL+"/redirect?to="+evil+"/target"))
	wantCode(t, "open a redirect to a blocked host", err, commonv1.ErrorCode_FORBIDDEN, evil+"/target is blocked by not in the allow list")
	if !home.served("/redirect") || other.served("/target") {
		t.Fatal("the redirect hop went out, or its blocked target was requested")
	}

	// tab_new to a blocked URL fails the same way and leaves no tab.
	_, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Url: evil + "/tab"}}})
	wantCode(t, "tab_new to a blocked host", err, commonv1.ErrorCode_FORBIDDEN, evil+"/tab is blocked")

	// A click that navigates to a blocked host is FORBIDDEN too.
	f.mustCall(s, openReq(home.URL+"/link"))
	_, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#go"}}}}})
	wantCode(t, "click to a blocked host", err, commonv1.ErrorCode_FORBIDDEN, evil+"/clicked is blocked")

	// A blocked iframe and fetch: the page loads, the fetch rejects, and
	// the same-origin fetch goes through.
	if got := f.mustCall(s, openReq(home.URL+"/frames")); !strings.Contains(got, `title "frames"`) {
		t.Fatalf("open a page with a blocked frame = %q", got)
	}
	if got := f.mustCall(s, evalReq("window.fetchResult")); !strings.Contains(got, "rejected: TypeError") {
		t.Fatalf("blocked fetch = %q, want a rejected promise", got)
	}
	if got := f.mustCall(s, evalReq("window.sameResult")); !strings.Contains(got, "loaded 200") {
		t.Fatalf("allowed fetch = %q", got)
	}
	f.waitBlocked(s, evil+"/framed", "Document")
	f.waitBlocked(s, evil+"/data", "XHR") // Chromium's type for fetch()

	// A WebSocket to a blocked host fails; one to an allowed host opens.
	f.mustCall(s, openReq(home.URL+"/sockets"))
	if got := f.mustCall(s, evalReq("window.wsBlocked")); !strings.Contains(got, "error") {
		t.Fatalf("blocked websocket = %q, want error", got)
	}
	if got := f.mustCall(s, evalReq(`new Promise(ok => { const s = new WebSocket("ws://127.0.0.1:`+home.port()+`/ws"); s.onopen = () => ok("open"); s.onerror = () => ok("error"); })`)); !strings.Contains(got, "open") {
		t.Fatalf("allowed websocket = %q, want open", got)
	}
	if other.served("/ws") || !home.served("/ws") {
		t.Fatal("websocket handshakes: the blocked one reached its server, or the allowed one did not")
	}
	if rule := f.waitBlocked(s, "localhost:"+other.port(), "WebSocket"); !strings.Contains(rule, "not in the allow list of the global tier") {
		t.Fatalf("websocket rule = %q", rule)
	}

	// Popups (window.open and target=_blank) are held until the policy
	// covers them: their blocked first requests never go out.
	f.mustCall(s, openReq(home.URL+"/popup"))
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#blank"}}}}})
	f.waitBlocked(s, evil+"/opened", "Document")
	f.waitBlocked(s, evil+"/blank", "Document")
	if other.served("/opened") || other.served("/blank") {
		t.Fatal("a popup's blocked page was requested from its server")
	}

	// A dedicated worker's requests go through its page's target.
	f.mustCall(s, openReq(home.URL+"/worker-page"))
	f.waitBlocked(s, evil+"/from-worker", "XHR")

	// A service worker is a target of its own: its requests are checked
	// too.
	f.mustCall(s, openReq(home.URL+"/sw-page"))
	if got := f.mustCall(s, evalReq("window.swState")); !strings.Contains(got, "registered") {
		t.Fatalf("service worker registration = %q", got)
	}
	f.waitBlocked(s, evil+"/from-sw", "XHR")
	if other.served("/from-sw") {
		t.Fatal("the service worker's blocked fetch reached its server")
	}

	text, l := f.blocked(s)
	if !strings.HasPrefix(text, fmt.Sprintf("%d blocked requests", len(l.Blocked))) || !strings.Contains(text, "XHR "+evil+"/data — not in the allow list") {
		t.Fatalf("blocked_requests text = %q", text)
	}
	if first := l.Blocked[0]; first.URL != evil+"/x" || first.ResourceType != "Document" {
		t.Fatalf("oldest blocked request = %+v, want the first blocked open", first)
	}
	if other.served("/framed") || other.served("/data") {
		t.Fatal("a blocked subresource was requested from its server")
	}
}

// TestPolicyPrivateAndUpdates: block_private refuses loopback unless an
// allow rule names it ("*" does not), block rules name themselves, and a
// policy sent with a tool call takes effect on the next request, also in
// a session opened without one.
func TestPolicyPrivateAndUpdates(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "private", MaxSessions: 2})
	home := newOrigin(t, nil)

	star := enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"*"}})
	s := f.openWith(star)
	_, err := f.call(s, openReq(home.URL+"/a"))
	wantCode(t, "open 127.0.0.1 under block_private", err, commonv1.ErrorCode_FORBIDDEN,
		home.URL+"/a is blocked by private address 127.0.0.1 (block_private; allow the host explicitly to reach it)")

	// Other spellings of loopback are loopback too (Chromium canonicalizes
	// them before they reach the policy; the policy parses them as well).
	for _, host := range []string{"2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "localhost"} {
		_, err := f.call(s, openReq("http://"+host+":"+home.port()+"/spelled"))
		wantCode(t, "open "+host, err, commonv1.ErrorCode_FORBIDDEN, "(block_private; allow the host explicitly to reach it)")
	}
	if home.served("/spelled") {
		t.Fatal("a loopback spelling reached the server")
	}

	named := enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"*"}}, &browserv1.UrlRules{Tier: "token", Allow: []string{"127.0.0.1"}})
	req := openReq(home.URL + "/b")
	req.Policy = named
	if got := f.mustCall(s, req); !strings.Contains(got, `title "page /b"`) {
		t.Fatalf("open after allowing 127.0.0.1 = %q", got)
	}
	// Back under the first policy, reloading the page is blocked.
	req = &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Reload{Reload: &browserv1.NoArgs{}}, Policy: star}
	_, err = f.call(s, req)
	wantCode(t, "reload after the policy changed", err, commonv1.ErrorCode_FORBIDDEN, home.URL+"/b is blocked by private address 127.0.0.1")
	req = openReq(home.URL + "/b2")
	req.Policy = named
	f.mustCall(s, req)
	req = openReq("http://localhost:" + home.port() + "/c")
	req.Policy = enforced(false, &browserv1.UrlRules{Tier: "global", Block: []string{"localhost"}}, &browserv1.UrlRules{Tier: "session", Block: []string{"*.localhost"}})
	_, err = f.call(s, req)
	wantCode(t, "open a host a block rule names", err, commonv1.ErrorCode_FORBIDDEN, `is blocked by block rule "localhost" (global)`)
	// A request without a policy keeps the one in force.
	_, err = f.call(s, openReq("http://localhost:"+home.port()+"/d"))
	wantCode(t, "open with the policy kept", err, commonv1.ErrorCode_FORBIDDEN, `block rule "localhost"`)
	// enforced=false turns enforcement off.
	req = openReq("http://localhost:" + home.port() + "/e")
	req.Policy = &browserv1.UrlPolicy{}
	if got := f.mustCall(s, req); !strings.Contains(got, `title "page /e"`) {
		t.Fatalf("open after turning the policy off = %q", got)
	}

	// A session opened without a policy gets one with a later call.
	plain := f.mustOpen()
	f.mustCall(plain, openReq(home.URL+"/f"))
	if got, _ := f.blocked(plain); !strings.Contains(got, "no URL policy") {
		t.Fatalf("blocked_requests without a policy = %q", got)
	}
	req = openReq(home.URL + "/g")
	req.Policy = star
	_, err = f.call(plain, req)
	wantCode(t, "open after a policy arrived", err, commonv1.ErrorCode_FORBIDDEN, "private address 127.0.0.1")

	// A bad pattern is the caller's error.
	req = openReq(home.URL + "/h")
	req.Policy = enforced(false, &browserv1.UrlRules{Tier: "token", Allow: []string{"example.com/path"}})
	_, err = f.call(s, req)
	wantCode(t, "a policy with a bad pattern", err, commonv1.ErrorCode_INVALID_ARGUMENT, `url pattern "example.com/path"`)
}

// BenchmarkPolicyCost loads a page with 30 subresources (scripts, styles
// and images, none cached) in a session without a policy and in one whose
// policy checks every request.
func BenchmarkPolicyCost(b *testing.B) {
	f := newFleet(b)
	f.worker(browser.Config{ID: "bench", MaxSessions: 2})
	var page strings.Builder
	page.WriteString("<!doctype html><title>many</title>")
	for i := range 10 {
		fmt.Fprintf(&page, `<script src="/s%d.js"></script><link rel=stylesheet href="/c%d.css"><img src="/i%d.svg">`, i, i, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case strings.HasSuffix(r.URL.Path, ".js"):
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, "window.n = (window.n || 0) + 1;")
		case strings.HasSuffix(r.URL.Path, ".css"):
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "body { margin: 0 }")
		case strings.HasSuffix(r.URL.Path, ".svg"):
			w.Header().Set("Content-Type", "image/svg+xml")
			fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`)
		default:
			fmt.Fprint(w, page.String())
		}
	}))
	b.Cleanup(srv.Close)
	for _, bc := range []struct {
		name   string
		policy *browserv1.UrlPolicy
	}{
		{"no_policy", nil},
		{"enforced", enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}, Block: []string{"*.evil.example"}})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := f.openWith(bc.policy)
			defer f.close(s)
			for b.Loop() {
				f.mustCall(s, openReq(srv.URL+"/"))
				if got := f.mustCall(s, evalReq("window.n")); got != "10" {
					b.Fatalf("scripts run = %q, want 10", got)
				}
			}
		})
	}
}
