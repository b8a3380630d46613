package urlpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// SessionTier is the tier of grants made for one session (by approvals).
// Its allow rules satisfy every other tier's allow list.
const SessionTier = "session"

// Policy is a compiled UrlPolicy. A nil *Policy enforces nothing. It is
// safe for concurrent use.
type Policy struct {
	tiers        []tier
	session      []Rule // allow rules of the session tier
	blockPrivate bool
}

type tier struct {
	name  string
	allow []Rule
	block []Rule
}

// Decision is the verdict on one URL.
type Decision struct {
	Allowed bool
	// Grantable: the URL is refused only because no allow list names it,
	// so a session grant of its host (an approval) would let it through.
	// Block rules and private addresses are never grantable.
	Grantable bool
	// Rule says why a URL is blocked, in words fit for an error message:
	// `block rule "*.evil.com" (global)`, `not in the allow list of the
	// token tier`, `private address 10.1.2.3 (block_private; …)`. Empty
	// when allowed.
	Rule string
}

// Validate checks every pattern of p; the error names the tier and each bad
// pattern.
func Validate(p *browserv1.UrlPolicy) error {
	_, err := compile(p)
	return err
}

// Compile compiles p. It returns nil (enforce nothing) when p is nil or not
// enforced.
func Compile(p *browserv1.UrlPolicy) (*Policy, error) {
	if !p.GetEnforced() {
		if err := Validate(p); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return compile(p)
}

func compile(p *browserv1.UrlPolicy) (*Policy, error) {
	out := &Policy{blockPrivate: p.GetBlockPrivate()}
	var errs []error
	for i, t := range p.GetTiers() {
		name := t.GetTier()
		if name == "" {
			name = fmt.Sprintf("tier %d", i+1)
		}
		allow, err := ParseRules(t.GetAllow())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s allow list: %w", name, err))
		}
		block, err := ParseRules(t.GetBlock())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s block list: %w", name, err))
		}
		out.tiers = append(out.tiers, tier{name: name, allow: allow, block: block})
		if name == SessionTier {
			out.session = append(out.session, allow...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// IsNetworkScheme reports whether URLs of the scheme make network requests
// that the policy checks: http, https, ws and wss.
func IsNetworkScheme(scheme string) bool {
	_, ok := networkSchemes[strings.ToLower(scheme)]
	return ok
}

func newTarget(u *url.URL) target {
	t := target{scheme: strings.ToLower(u.Scheme)}
	t.host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, ok := hostAddr(t.host); ok {
		t.addr = a
		t.host = a.String()
	}
	t.port = networkSchemes[t.scheme]
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			t.port = n
		}
	}
	return t
}

// Check decides whether a request to u may go out. ips are the addresses
// the host resolves to, when the caller resolved it (see NeedsIPs); block
// rules naming IPs or CIDR blocks and block_private look at them. URLs of
// other schemes than http, https, ws and wss are allowed: they make no
// network request.
func (p *Policy) Check(u *url.URL, ips []net.IP) Decision {
	if p == nil || !IsNetworkScheme(u.Scheme) {
		return Decision{Allowed: true}
	}
	t := newTarget(u)
	if t.host == "" {
		return Decision{Rule: "the URL has no host"}
	}
	return p.check(t, toAddrs(ips))
}

// CheckHostPort decides on a connection to host:port whose scheme is not
// known, such as a WebSocket seen by a SOCKS proxy: it is allowed when
// the policy allows it as ws or as wss.
func (p *Policy) CheckHostPort(host string, port int, ips []net.IP) Decision {
	if p == nil {
		return Decision{Allowed: true}
	}
	first, second := "ws", "wss"
	if port == 443 {
		first, second = second, first
	}
	var d Decision
	for _, scheme := range []string{first, second} {
		u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))}
		if d2 := p.Check(u, ips); d2.Allowed {
			return d2
		} else if d.Rule == "" {
			d = d2
		}
	}
	return d
}

// NeedsIPs reports whether Check needs the addresses of u's host to
// decide: its host is a name (not an address), and block_private is on
// with no allow rule naming the host, or a block rule names an IP address
// or CIDR block.
func (p *Policy) NeedsIPs(u *url.URL) bool {
	if p == nil || !IsNetworkScheme(u.Scheme) {
		return false
	}
	t := newTarget(u)
	if t.addr.IsValid() || t.host == "" {
		return false
	}
	for _, tr := range p.tiers {
		for _, r := range tr.block {
			if r.kind == kindIP || r.kind == kindCIDR {
				return true
			}
		}
	}
	return p.blockPrivate && !isPrivateName(t.host) && !p.namesHost(t)
}

func (p *Policy) check(t target, ips []netip.Addr) Decision {
	for _, tr := range p.tiers {
		for _, r := range tr.block {
			if r.matches(t, ips) {
				return Decision{Rule: fmt.Sprintf("block rule %q (%s)", r.Pattern, tr.name)}
			}
		}
	}
	granted := matchAny(p.session, t)
	for _, tr := range p.tiers {
		if tr.name == SessionTier || len(tr.allow) == 0 || granted {
			continue
		}
		if !matchAny(tr.allow, t) {
			d := Decision{Rule: fmt.Sprintf("not in the allow list of the %s tier", tr.name)}
			d.Grantable = !p.blockPrivate || p.checkPrivate(t, ips).Allowed
			return d
		}
	}
	if p.blockPrivate {
		if d := p.checkPrivate(t, ips); !d.Allowed {
			return d
		}
	}
	return Decision{Allowed: true}
}

const privateHint = "(block_private; allow the host explicitly to reach it)"

func (p *Policy) checkPrivate(t target, ips []netip.Addr) Decision {
	switch {
	case t.addr.IsValid():
		if IsPrivateAddr(t.addr) && !p.namesAddr(t, t.addr) {
			return Decision{Rule: fmt.Sprintf("private address %s %s", t.addr, privateHint)}
		}
	case isPrivateName(t.host):
		if !p.namesHost(t) {
			return Decision{Rule: fmt.Sprintf("private host %s %s", t.host, privateHint)}
		}
	default:
		if p.namesHost(t) {
			return Decision{Allowed: true}
		}
		for _, a := range ips {
			if IsPrivateAddr(a) && !p.namesAddr(t, a) {
				return Decision{Rule: fmt.Sprintf("private address %s of %s %s", a, t.host, privateHint)}
			}
		}
	}
	return Decision{Allowed: true}
}

// namesHost reports whether an allow rule names t's host itself (not "*"
// nor a wildcard), on t's scheme and port.
func (p *Policy) namesHost(t target) bool {
	for _, tr := range p.tiers {
		if tr.name == SessionTier {
			continue // a session grant never opens a private address
		}
		for _, r := range tr.allow {
			if r.explicit() && r.matchesLiteral(t) {
				return true
			}
		}
	}
	return false
}

// namesAddr reports whether an allow rule names the address a explicitly.
func (p *Policy) namesAddr(t target, a netip.Addr) bool {
	for _, tr := range p.tiers {
		if tr.name == SessionTier {
			continue // a session grant never opens a private address
		}
		for _, r := range tr.allow {
			if r.namesAddr(t, a) {
				return true
			}
		}
	}
	return false
}

func matchAny(rules []Rule, t target) bool {
	for _, r := range rules {
		if r.matchesLiteral(t) {
			return true
		}
	}
	return false
}
