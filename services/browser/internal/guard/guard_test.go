package guard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

func compile(t *testing.T, p *browserv1.UrlPolicy) *urlpolicy.Policy {
	t.Helper()
	pol, err := urlpolicy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// socksConnect opens a SOCKS5 CONNECT through the proxy at addr to
// host:port (a name) and returns the connection and the reply code.
func socksConnect(t *testing.T, addr, host string, port int) (net.Conn, byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var hello [2]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil || hello != [2]byte{5, 0} {
		t.Fatalf("greeting reply %v: %v", hello, err)
	}
	req := []byte{5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("connect reply: %v", err)
	}
	return c, rep[1]
}

// TestWebSocketProxy: the proxy passes what the policy allows (as a real
// TCP tunnel), refuses the rest with "not allowed by ruleset", and records
// each refusal; a policy change applies to the next connection.
func TestWebSocketProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "through") }))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])

	c := NewContext(compile(t, &browserv1.UrlPolicy{Enforced: true, BlockPrivate: true,
		Tiers: []*browserv1.UrlRules{{Tier: "global", Allow: []string{"127.0.0.1"}, Block: []string{"*.evil.example"}}}}))
	defer c.Close()
	server, bypass, err := c.WebSocketProxy()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(server, "http=direct://;https=direct://;socks=socks5://127.0.0.1:") || bypass != "<-loopback>" {
		t.Fatalf("proxy settings %q %q", server, bypass)
	}
	addr := strings.TrimPrefix(server, "http=direct://;https=direct://;socks=socks5://")

	conn, code := socksConnect(t, addr, "127.0.0.1", port)
	if code != socksOK {
		t.Fatalf("allowed connect: reply %d", code)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "through" {
		t.Fatalf("body through the proxy = %q", body)
	}

	for _, tc := range []struct {
		host string
		rule string
	}{
		{"localhost", "not in the allow list of the global tier"},
		{"a.evil.example", `block rule "*.evil.example" (global)`},
	} {
		if _, code := socksConnect(t, addr, tc.host, port); code != socksNotAllowed {
			t.Errorf("connect to %s: reply %d, want %d (not allowed)", tc.host, code, socksNotAllowed)
		}
		b := c.Blocked()
		last := b[len(b)-1]
		if last.GetUrl() != net.JoinHostPort(tc.host, strconv.Itoa(port)) || last.GetResourceType() != "WebSocket" || last.GetRule() != tc.rule {
			t.Errorf("recorded %v, want %s:%d WebSocket %q", last, tc.host, port, tc.rule)
		}
	}

	// The policy in force decides each new connection.
	c.SetPolicy(compile(t, &browserv1.UrlPolicy{Enforced: true, BlockPrivate: true,
		Tiers: []*browserv1.UrlRules{{Tier: "global", Allow: []string{"*"}}}}))
	if _, code := socksConnect(t, addr, "127.0.0.1", port); code != socksNotAllowed {
		t.Errorf("connect after the policy change: reply %d, want not allowed", code)
	}
	if r := c.Blocked()[len(c.Blocked())-1].GetRule(); !strings.Contains(r, "private address 127.0.0.1") {
		t.Errorf("rule = %q", r)
	}
	c.SetPolicy(nil)
	if _, code := socksConnect(t, addr, "127.0.0.1", port); code != socksOK {
		t.Errorf("connect with no policy: reply %d, want ok", code)
	}
}

// TestRing: the context keeps the last RingSize blocked requests, oldest
// first, and remembers a tab's blocked main-frame navigations (a
// document request of its main frame, whose id is the target's).
func TestRing(t *testing.T) {
	c := NewContext(nil)
	for i := range RingSize + 5 {
		c.record("T1", "F2", &browserv1.BlockedRequest{Url: fmt.Sprintf("https://x.example/%d", i), ResourceType: "Script", Rule: "r"})
	}
	b := c.Blocked()
	if len(b) != RingSize || b[0].GetUrl() != "https://x.example/5" || b[RingSize-1].GetUrl() != fmt.Sprintf("https://x.example/%d", RingSize+4) {
		t.Fatalf("ring holds %d, first %s, last %s", len(b), b[0].GetUrl(), b[len(b)-1].GetUrl())
	}
	if nb := c.LastNav("T1"); nb.Seq != 0 {
		t.Fatalf("a script counted as a navigation: %+v", nb)
	}
	c.record("T1", "F2", &browserv1.BlockedRequest{Url: "https://frame.example/", ResourceType: "Document"})
	if nb := c.LastNav("T1"); nb.Seq != 0 {
		t.Fatalf("a subframe document counted as a navigation: %+v", nb)
	}
	c.record("T1", "T1", &browserv1.BlockedRequest{Url: "https://main.example/", ResourceType: "Document"})
	nb := c.LastNav("T1")
	if nb.Seq == 0 || nb.Request.GetUrl() != "https://main.example/" {
		t.Fatalf("main-frame navigation not remembered: %+v", nb)
	}
	if other := c.LastNav("T2"); other.Seq != 0 {
		t.Fatalf("another tab has a navigation: %+v", other)
	}
}
