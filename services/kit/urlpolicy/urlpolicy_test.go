package urlpolicy

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

func TestParsePatternErrors(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"", "it is empty"},
		{"ftp://example.com", `scheme "ftp" is not one of`},
		{"example.com/path", "rules match hosts, not paths"},
		{"user@example.com", "rules match hosts"},
		{"exa*mple.com", "a wildcard may only stand alone"},
		{"*example.com", "a wildcard may only stand alone"},
		{"example.com:0", `port "0" is not a number`},
		{"example.com:99999", `port "99999"`},
		{"example.com:http", `port "http"`},
		{"10.0.0.1/8", "has host bits set; did you mean 10.0.0.0/8?"},
		{"10.0.0.0/33", "not a valid CIDR block"},
		{"[::1", "missing ]"},
		{"10.0.0.0/x", "rules match hosts, not paths"},
		{"[example.com]", "is not an IPv6 address"},
		{"a..b", "empty label"},
		{"exa mple.com", "contains a space"},
		{"ex!ample.com", `holds '!'`},
		{"https://", "names no host"},
	} {
		_, err := ParsePattern(tc.pattern)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "url pattern") {
			t.Errorf("ParsePattern(%q) = %v, want an error with %q", tc.pattern, err, tc.want)
		}
	}
}

func TestParsePatternForms(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		kind    kind
		scheme  string
		port    int
		host    string
	}{
		{"example.com", kindHost, "", 0, "example.com"},
		{"EXAMPLE.com.", kindHost, "", 0, "example.com"},
		{"*.example.com", kindWildcard, "", 0, "example.com"},
		{"https://example.com", kindHost, "https", 0, "example.com"},
		{"*://example.com/", kindHost, "", 0, "example.com"},
		{"example.com:8443", kindHost, "", 8443, "example.com"},
		{"wss://*.example.com:444", kindWildcard, "wss", 444, "example.com"},
		{"*", kindAny, "", 0, ""},
		{"http://*", kindAny, "http", 0, ""},
		{"10.1.2.3", kindIP, "", 0, ""},
		{"10.1.2.3:8080", kindIP, "", 8080, ""},
		{"::1", kindIP, "", 0, ""},
		{"[::1]", kindIP, "", 0, ""},
		{"[::1]:8080", kindIP, "", 8080, ""},
		{"10.0.0.0/8", kindCIDR, "", 0, ""},
		{"fc00::/7", kindCIDR, "", 0, ""},
	} {
		r, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tc.pattern, err)
			continue
		}
		if r.kind != tc.kind || r.Scheme != tc.scheme || r.Port != tc.port || r.host != tc.host {
			t.Errorf("ParsePattern(%q) = kind %d scheme %q port %d host %q, want %d %q %d %q",
				tc.pattern, r.kind, r.Scheme, r.Port, r.host, tc.kind, tc.scheme, tc.port, tc.host)
		}
	}
}

func TestParseRulesNamesEveryBadPattern(t *testing.T) {
	_, err := ParseRules([]string{"ok.com", "bad/path", "x:0"})
	if err == nil || !strings.Contains(err.Error(), `"bad/path"`) || !strings.Contains(err.Error(), `"x:0"`) {
		t.Fatalf("ParseRules: %v, want both bad patterns named", err)
	}
	err = Validate(&browserv1.UrlPolicy{Enforced: true, Tiers: []*browserv1.UrlRules{{Tier: "global", Block: []string{"a/b"}}}})
	if err == nil || !strings.Contains(err.Error(), "global block list") {
		t.Fatalf("Validate: %v, want the tier and list named", err)
	}
}

func policy(t *testing.T, blockPrivate bool, tiers ...*browserv1.UrlRules) *Policy {
	t.Helper()
	p, err := Compile(&browserv1.UrlPolicy{Enforced: true, Tiers: tiers, BlockPrivate: blockPrivate})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rules(tier string, allow, block []string) *browserv1.UrlRules {
	return &browserv1.UrlRules{Tier: tier, Allow: allow, Block: block}
}

type checkCase struct {
	url  string
	ips  []string
	want string // "" allowed, else a substring of the rule
}

func runChecks(t *testing.T, p *Policy, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.url, err)
		}
		var ips []net.IP
		for _, s := range tc.ips {
			ips = append(ips, net.ParseIP(s))
		}
		d := p.Check(u, ips)
		switch {
		case tc.want == "" && !d.Allowed:
			t.Errorf("%s (ips %v): blocked by %s, want allowed", tc.url, tc.ips, d.Rule)
		case tc.want != "" && d.Allowed:
			t.Errorf("%s (ips %v): allowed, want blocked by %s", tc.url, tc.ips, tc.want)
		case tc.want != "" && !strings.Contains(d.Rule, tc.want):
			t.Errorf("%s (ips %v): blocked by %q, want %q", tc.url, tc.ips, d.Rule, tc.want)
		}
	}
}

func TestHostAndWildcardMatching(t *testing.T) {
	p := policy(t, false, rules("global", []string{"example.com", "*.example.org"}, []string{"*.evil.com", "bad.example.com"}))
	runChecks(t, p, []checkCase{
		{"https://example.com/", nil, ""},
		{"https://EXAMPLE.COM/x", nil, ""},
		{"https://example.com./", nil, ""},
		{"http://example.com:8080/", nil, ""},
		{"https://a.example.com/", nil, "not in the allow list of the global tier"},
		{"https://evil-example.com/", nil, "not in the allow list"},
		{"https://example.com.evil.net/", nil, "not in the allow list"},
		{"https://a.example.org/", nil, ""},
		{"https://a.b.c.example.org/", nil, ""},
		{"https://A.Example.Org./", nil, ""},
		{"https://example.org/", nil, "not in the allow list"},
		{"https://evil-example.org/", nil, "not in the allow list"},
		{"https://xexample.org/", nil, "not in the allow list"},
		{"https://example.org.evil.net/", nil, "not in the allow list"},
		{"https://x.evil.com/", nil, `block rule "*.evil.com" (global)`},
		{"https://bad.example.com/", nil, `block rule "bad.example.com" (global)`},
		{"data:text/html,hi", nil, ""},
		{"blob:https://x.evil.com/uuid", nil, ""},
		{"about:blank", nil, ""},
		{"wss://example.com/socket", nil, ""},
		{"ws://x.evil.com/socket", nil, `block rule "*.evil.com"`},
	})
}

func TestSchemesAndPorts(t *testing.T) {
	p := policy(t, false, rules("global", []string{"https://secure.com", "site.com:8443", "*://any.com", "http://*.plain.com:8080"}, nil))
	runChecks(t, p, []checkCase{
		{"https://secure.com/", nil, ""},
		{"http://secure.com/", nil, "not in the allow list"},
		{"wss://secure.com/", nil, "not in the allow list"},
		{"https://site.com:8443/", nil, ""},
		{"http://site.com:8443/", nil, ""},
		{"https://site.com/", nil, "not in the allow list"},
		{"https://site.com:443/", nil, "not in the allow list"},
		{"ws://any.com/", nil, ""},
		{"http://a.plain.com:8080/", nil, ""},
		{"http://a.plain.com/", nil, "not in the allow list"},
		{"https://a.plain.com:8080/", nil, "not in the allow list"},
	})
	p = policy(t, false, rules("global", []string{"example.com:443"}, nil))
	runChecks(t, p, []checkCase{
		{"https://example.com/", nil, ""}, // the default port counts
		{"http://example.com/", nil, "not in the allow list"},
		{"http://example.com:443/", nil, ""},
	})
}

func TestIPAndCIDRRules(t *testing.T) {
	p := policy(t, false, rules("global", []string{"93.184.216.34", "[2001:db8::1]", "198.51.100.0/24", "2001:db8:1::/48"}, []string{"198.51.100.66", "203.0.113.0/24"}))
	runChecks(t, p, []checkCase{
		{"http://93.184.216.34/", nil, ""},
		{"http://93.184.216.35/", nil, "not in the allow list"},
		{"http://[2001:db8::1]/", nil, ""},
		{"http://[2001:DB8:0::1]:8080/", nil, ""},
		{"http://[::ffff:93.184.216.34]/", nil, ""}, // IPv4-mapped IPv6
		{"http://198.51.100.7/", nil, ""},
		{"http://198.51.100.66/", nil, `block rule "198.51.100.66"`},
		{"http://[2001:db8:1:2::5]/", nil, ""},
		{"http://[2001:db8:2::5]/", nil, "not in the allow list"},
		// A name is not an address: IP allow rules match addresses only,
		// but block rules also match the resolved addresses.
		{"http://host.example/", []string{"198.51.100.7"}, "not in the allow list"},
		{"http://203.0.113.9/", nil, `block rule "203.0.113.0/24"`},
	})
	p = policy(t, false, rules("global", nil, []string{"203.0.113.0/24"}))
	runChecks(t, p, []checkCase{
		{"http://host.example/", []string{"203.0.113.9"}, `block rule "203.0.113.0/24"`},
		{"http://host.example/", []string{"198.51.100.1"}, ""},
	})
	u, _ := url.Parse("http://host.example/")
	if !p.NeedsIPs(u) {
		t.Error("NeedsIPs: false with a CIDR block rule, want true")
	}
}

func TestNumericIPv4Forms(t *testing.T) {
	p := policy(t, true)
	for _, host := range []string{"127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "0x7F.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[64:ff9b::7f00:1]", "0.0.0.0", "0", "[::]"} {
		runChecks(t, p, []checkCase{{"http://" + host + "/", nil, "private address"}})
	}
	for _, host := range []string{"1.2.3.4", "0x01020304", "16909060", "1.2.0x304"} {
		runChecks(t, p, []checkCase{{"http://" + host + "/", nil, ""}})
	}
	if a, ok := parseIPv4("0x7f.1"); !ok || a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("parseIPv4(0x7f.1) = %v %v", a, ok)
	}
	for _, bad := range []string{"256.1.1.1", "1.2.3.4.5", "1.2.3.256", "example.com", "0x", "09"} {
		if a, ok := parseIPv4(bad); ok && bad != "0x" {
			t.Errorf("parseIPv4(%q) = %v, want no address", bad, a)
		}
	}
}

func TestBlockPrivate(t *testing.T) {
	p := policy(t, true, rules("global", []string{"*"}, nil))
	runChecks(t, p, []checkCase{
		{"http://127.0.0.1:8080/", nil, "private address 127.0.0.1 (block_private; allow the host explicitly to reach it)"},
		{"http://10.1.2.3/", nil, "private address 10.1.2.3"},
		{"http://172.16.0.1/", nil, "private address"},
		{"http://172.31.255.255/", nil, "private address"},
		{"http://172.32.0.1/", nil, ""},
		{"http://192.168.1.1/", nil, "private address"},
		{"http://169.254.169.254/latest/meta-data", nil, "private address 169.254.169.254"},
		{"http://100.64.0.1/", nil, "private address"},
		{"http://100.128.0.1/", nil, ""},
		{"http://[::1]/", nil, "private address ::1"},
		{"http://[fd00:ec2::254]/", nil, "private address"},
		{"http://[fe80::1]/", nil, "private address"},
		{"http://[2606:4700::1111]/", nil, ""},
		{"http://localhost/", nil, "private host localhost"},
		{"http://LOCALHOST./", nil, "private host localhost"},
		{"http://app.localhost/", nil, "private host app.localhost"},
		{"http://metadata.google.internal/", nil, "private host metadata.google.internal"},
		{"http://metadata/", nil, "private host metadata"},
		{"http://intranet.example/", []string{"10.9.8.7"}, "private address 10.9.8.7 of intranet.example"},
		{"http://mixed.example/", []string{"93.184.216.34", "192.168.0.9"}, "private address 192.168.0.9"},
		{"http://public.example/", []string{"93.184.216.34"}, ""},
		{"http://public.example/", []string{"::ffff:10.0.0.1"}, "private address 10.0.0.1"},
		{"https://example.com/", nil, ""},
	})
	u, _ := url.Parse("http://intranet.example/")
	if !p.NeedsIPs(u) {
		t.Error("NeedsIPs(intranet.example) = false, want true")
	}
	for _, s := range []string{"http://10.0.0.1/", "http://localhost/", "data:,x"} {
		u, _ := url.Parse(s)
		if p.NeedsIPs(u) {
			t.Errorf("NeedsIPs(%s) = true, want false: the host decides alone", s)
		}
	}
}

func TestBlockPrivateExplicitAllow(t *testing.T) {
	p := policy(t, true,
		rules("global", []string{"*"}, nil),
		rules("token", []string{"127.0.0.1", "localhost:9000", "10.0.0.0/8", "intranet.example", "*.corp.example", "[::1]:8080"}, nil))
	runChecks(t, p, []checkCase{
		{"http://127.0.0.1:5000/", nil, ""},
		{"http://127.0.0.2/", nil, "not in the allow list of the token tier"},
		{"http://localhost:9000/", nil, ""},
		{"http://localhost:9001/", nil, "not in the allow list of the token tier"},
		{"http://10.20.30.40/", nil, ""},
		{"http://intranet.example/", []string{"10.0.0.5", "192.168.1.1"}, ""}, // the host is named
		{"http://a.corp.example/", []string{"10.1.1.1"}, ""},                  // the CIDR rule names the address
		{"http://b.corp.example/", []string{"192.168.1.1"}, "private address 192.168.1.1 of b.corp.example"},
		{"http://[::1]:8080/", nil, ""},
		{"http://[::1]:8081/", nil, "not in the allow list"},
	})
	// "localhost" names the loopback addresses; a wildcard names nothing.
	p = policy(t, true, rules("global", []string{"localhost", "*.localhost", "*"}, nil))
	runChecks(t, p, []checkCase{
		{"http://127.0.0.1/", nil, ""},
		{"http://[::1]/", nil, ""},
		{"http://localhost/", nil, ""},
		{"http://app.localhost/", nil, "private host app.localhost"},
		{"http://10.0.0.1/", nil, "private address 10.0.0.1"},
		{"http://name.example/", []string{"127.0.0.1"}, ""}, // localhost names 127.0.0.1
	})
	p = policy(t, true, rules("global", []string{"*"}, nil))
	runChecks(t, p, []checkCase{{"http://127.0.0.1/", nil, "private address"}})
	// Without block_private loopback is an address like any other.
	p = policy(t, false)
	runChecks(t, p, []checkCase{{"http://127.0.0.1/", nil, ""}, {"http://localhost/", nil, ""}})
}

func TestTiers(t *testing.T) {
	p := policy(t, false,
		rules("global", []string{"*.corp.example", "public.example"}, []string{"*.evil.example"}),
		rules("token", []string{"docs.corp.example", "public.example"}, nil),
		rules("session", []string{"granted.example"}, []string{"secret.corp.example"}))
	runChecks(t, p, []checkCase{
		{"https://docs.corp.example/", nil, ""},
		{"https://wiki.corp.example/", nil, "not in the allow list of the token tier"},
		{"https://public.example/", nil, ""},
		{"https://other.example/", nil, "not in the allow list of the global tier"},
		{"https://granted.example/", nil, ""}, // a session grant satisfies every tier
		{"https://x.evil.example/", nil, `block rule "*.evil.example" (global)`},
		{"https://secret.corp.example/", nil, `block rule "secret.corp.example" (session)`},
	})
	// A session grant does not lift a block rule.
	p = policy(t, false, rules("global", nil, []string{"blocked.example"}), rules("session", []string{"blocked.example"}, nil))
	runChecks(t, p, []checkCase{{"https://blocked.example/", nil, `block rule "blocked.example" (global)`}, {"https://else.example/", nil, ""}})
	// A tier with only block rules restricts nothing else.
	p = policy(t, false, rules("global", nil, []string{"*.ads.example"}), rules("token", nil, nil))
	runChecks(t, p, []checkCase{{"https://anything.example/", nil, ""}, {"https://x.ads.example/", nil, "block rule"}})
}

func TestNotEnforced(t *testing.T) {
	for _, up := range []*browserv1.UrlPolicy{nil, {Enforced: false, Tiers: []*browserv1.UrlRules{rules("global", nil, []string{"*"})}}} {
		p, err := Compile(up)
		if err != nil || p != nil {
			t.Fatalf("Compile(%v) = %v, %v; want nil, nil", up, p, err)
		}
		u, _ := url.Parse("https://example.com/")
		if d := p.Check(u, nil); !d.Allowed {
			t.Fatalf("nil policy blocked %s: %s", u, d.Rule)
		}
	}
	if _, err := Compile(&browserv1.UrlPolicy{Tiers: []*browserv1.UrlRules{rules("global", []string{"a/b"}, nil)}}); err == nil {
		t.Fatal("Compile of a policy that is not enforced skipped validation")
	}
}

func TestCheckHostPort(t *testing.T) {
	p := policy(t, true, rules("global", []string{"wss://chat.example", "ws.example:8080"}, []string{"*.evil.example"}))
	for _, tc := range []struct {
		host string
		port int
		ips  []string
		want string
	}{
		{"chat.example", 443, []string{"93.184.216.34"}, ""},
		// The scheme is unknown: wss on port 80 is allowed as well.
		{"chat.example", 80, []string{"93.184.216.34"}, ""},
		{"other.example", 443, []string{"93.184.216.34"}, "not in the allow list"},
		{"ws.example", 8080, []string{"93.184.216.34"}, ""},
		{"ws.example", 8080, []string{"10.0.0.1"}, ""}, // the host is named
		{"ws.example", 8081, []string{"93.184.216.34"}, "not in the allow list"},
		{"a.evil.example", 443, nil, `block rule "*.evil.example"`},
		{"127.0.0.1", 8080, nil, "not in the allow list"},
	} {
		var ips []net.IP
		for _, s := range tc.ips {
			ips = append(ips, net.ParseIP(s))
		}
		d := p.CheckHostPort(tc.host, tc.port, ips)
		if (tc.want == "") != d.Allowed || !strings.Contains(d.Rule, tc.want) {
			t.Errorf("CheckHostPort(%s, %d) = %+v, want %q", tc.host, tc.port, d, tc.want)
		}
	}
	p = policy(t, true, rules("global", []string{"*"}, nil))
	if d := p.CheckHostPort("::1", 80, nil); d.Allowed || !strings.Contains(d.Rule, "private address ::1") {
		t.Errorf("CheckHostPort(::1) = %+v, want private", d)
	}
}

// TestGrantable: only a URL refused for want of an allow rule may be
// granted for a session, and a session grant never opens a private address.
func TestGrantable(t *testing.T) {
	p := policy(t, true, rules("global", []string{"public.example", "*"}, []string{"*.evil.example"}))
	for _, c := range []struct {
		url       string
		grantable bool
	}{
		{"https://x.evil.example/", false}, // block rule
		{"http://10.1.2.3/", false},        // private address
		{"http://localhost:3000/", false},  // private name
	} {
		u, _ := url.Parse(c.url)
		if d := p.Check(u, nil); d.Allowed || d.Grantable != c.grantable {
			t.Errorf("%s: %+v, want blocked, grantable %v", c.url, d, c.grantable)
		}
	}
	p = policy(t, true, rules("global", []string{"public.example"}, nil))
	u, _ := url.Parse("https://intranet.example/")
	if d := p.Check(u, nil); d.Allowed || !d.Grantable {
		t.Errorf("allow-list miss: %+v, want grantable", d)
	}
	// Granted for the session: allowed, but not once it resolves privately
	// or as a private address literal.
	p = policy(t, true, rules("global", []string{"public.example"}, nil), rules("session", []string{"intranet.example", "10.1.2.3"}, nil))
	if d := p.Check(u, []net.IP{net.ParseIP("203.0.113.7")}); !d.Allowed {
		t.Errorf("granted host: %+v", d)
	}
	if d := p.Check(u, []net.IP{net.ParseIP("10.9.9.9")}); d.Allowed {
		t.Errorf("granted host resolving to 10.9.9.9 was allowed")
	}
	lit, _ := url.Parse("http://10.1.2.3/")
	if d := p.Check(lit, nil); d.Allowed {
		t.Errorf("granted private literal was allowed")
	}
}

func TestSameOriginAndMatchesURL(t *testing.T) {
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://API.example.com/a?k=1", "https://api.example.com./b", true},
		{"https://example.com/", "https://example.com:443/", true},
		{"http://example.com/", "https://example.com/", false},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false},
		{"http://127.0.0.1:8080/", "http://127.0.0.2:8080/", false},
		{"https://example.com/", "https://www.example.com/", false},
	} {
		if got := SameOrigin(parse(tc.a), parse(tc.b)); got != tc.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct {
		pattern, u string
		want       bool
	}{
		{"login.example.com", "https://login.example.com/x", true},
		{"login.example.com", "https://evil.example.com/x", false},
		{"*.example.com", "http://a.b.example.com:8080/", true},
		{"https://cdn.example.com", "http://cdn.example.com/", false},
		{"127.0.0.2", "http://127.0.0.2:9000/", true},
		{"*", "http://anything.test/", true},
	} {
		r, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.MatchesURL(parse(tc.u)); got != tc.want {
			t.Errorf("%q.MatchesURL(%s) = %v, want %v", tc.pattern, tc.u, got, tc.want)
		}
	}
}
