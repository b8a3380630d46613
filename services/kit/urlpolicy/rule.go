// Package urlpolicy parses and evaluates the URL rules of a browser
// session (browserv1.UrlPolicy): which hosts its pages may load.
//
// A pattern names hosts, optionally with a scheme and a port:
//
//	example.com          only that host (case-insensitive, a trailing dot ignored)
//	*.example.com        its subdomains at any depth, not example.com itself
//	https://example.com  only over https (schemes: http, https, ws, wss, *)
//	example.com:8443     only on that port (the default port of the scheme otherwise)
//	10.1.2.3, [::1]      an IP address
//	10.0.0.0/8, fc00::/7 a CIDR block
//	*                    any host
//
// Rules match hosts, not paths. The gateway checks patterns with
// ParseRules or Validate when it loads its configuration; the browser
// worker evaluates a compiled Policy on every request.
package urlpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Rule is one parsed pattern.
type Rule struct {
	// Pattern is the text as written, for messages.
	Pattern string
	// Scheme is "" (any) or a lower-case network scheme.
	Scheme string
	// Port is 0 (any) or the port the rule names.
	Port int

	kind   kind
	host   string       // kindHost: the name; kindWildcard: the suffix without "*."
	prefix netip.Prefix // kindIP (a single address) and kindCIDR
}

type kind int

const (
	kindAny      kind = iota // "*"
	kindHost                 // example.com
	kindWildcard             // *.example.com
	kindIP                   // 10.1.2.3, ::1
	kindCIDR                 // 10.0.0.0/8
)

// networkSchemes are the schemes a rule may name and the ones Check looks
// at; other URLs (data:, blob:, about:) make no network request.
var networkSchemes = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443}

// ParsePattern parses one pattern; its error says what is wrong with it.
func ParsePattern(pattern string) (Rule, error) {
	r := Rule{Pattern: pattern}
	s := strings.TrimSpace(pattern)
	fail := func(format string, args ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("url pattern %q: %s", pattern, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("it is empty; write a host such as example.com, *.example.com or *")
	}
	if i := strings.Index(s, "://"); i >= 0 {
		r.Scheme = strings.ToLower(s[:i])
		s = s[i+3:]
		if r.Scheme == "*" {
			r.Scheme = ""
		} else if _, ok := networkSchemes[r.Scheme]; !ok {
			return fail("scheme %q is not one of http, https, ws, wss or *", r.Scheme)
		}
	}
	s = strings.TrimSuffix(s, "/")
	if strings.ContainsAny(s, "/?#@") && !isCIDR(s) {
		return fail("rules match hosts, not paths, queries or user names; write only the host (and port), such as example.com:8443")
	}
	if strings.ContainsAny(s, " \t") {
		return fail("it contains a space")
	}
	if s == "" {
		return fail("it names no host")
	}
	// CIDR and bare IPv6 addresses hold colons that are not a port.
	if isCIDR(s) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fail("not a valid CIDR block (%v); write it like 10.0.0.0/8 or fc00::/7", err)
		}
		if p != p.Masked() {
			return fail("the CIDR block has host bits set; did you mean %s?", p.Masked())
		}
		r.kind, r.prefix = kindCIDR, unmapPrefix(p)
		return r, nil
	}
	if a, err := netip.ParseAddr(s); err == nil && strings.Contains(s, ":") {
		r.kind, r.prefix = kindIP, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return fail("missing ] after the IPv6 address")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return fail("unexpected %q after the IPv6 address", rest)
			}
			if err := r.setPort(rest[1:]); err != nil {
				return fail("%v", err)
			}
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return fail("%q in brackets is not an IPv6 address", host)
		}
		r.kind, r.prefix = kindIP, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		host = s[:i]
		if err := r.setPort(s[i+1:]); err != nil {
			return fail("%v", err)
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "*":
		r.kind = kindAny
		return r, nil
	case strings.HasPrefix(host, "*."):
		r.kind, r.host = kindWildcard, host[2:]
	case strings.Contains(host, "*"):
		return fail("a wildcard may only stand alone (*) or at the start (*.example.com)")
	default:
		if a, ok := parseIPv4(host); ok {
			r.kind, r.prefix = kindIP, netip.PrefixFrom(a, 32)
			return r, nil
		}
		r.kind, r.host = kindHost, host
	}
	if err := checkHostName(r.host); err != nil {
		return fail("%v", err)
	}
	return r, nil
}

func (r *Rule) setPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	r.Port = n
	return nil
}

// isCIDR reports whether s looks like address/bits (and not host/path).
func isCIDR(s string) bool {
	i := strings.LastIndexByte(s, '/')
	if i < 0 || i == len(s)-1 {
		return false
	}
	for _, c := range s[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	_, err := netip.ParseAddr(s[:i])
	return err == nil
}

// checkHostName accepts DNS names: letters, digits, hyphens and
// underscores in dot-separated labels.
func checkHostName(h string) error {
	if h == "" {
		return fmt.Errorf("it names no host")
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" {
			return fmt.Errorf("host %q has an empty label (two dots in a row)", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c > 127) {
				return fmt.Errorf("host %q holds %q, which no host name can", h, c)
			}
		}
	}
	return nil
}

// ParseRules parses patterns, as for one tier's allow or block list. The
// error names every bad pattern.
func ParseRules(patterns []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(patterns))
	var bad []string
	for _, p := range patterns {
		r, err := ParsePattern(p)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		rules = append(rules, r)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return rules, nil
}

// ValidatePatterns checks patterns, as for one allow or block list; the
// error names every bad pattern.
func ValidatePatterns(patterns []string) error {
	_, err := ParseRules(patterns)
	return err
}

// String returns the pattern as written.
func (r Rule) String() string { return r.Pattern }

// explicit reports whether the rule names a host or address itself, not
// through "*" or a wildcard: only such an allow rule lifts block_private.
func (r Rule) explicit() bool { return r.kind == kindHost || r.kind == kindIP || r.kind == kindCIDR }

// Exact reports whether the rule names one host or one address (no
// wildcard, no "*", no CIDR block, no scheme or port): the only kind of
// rule a person may grant a session.
func (r Rule) Exact() bool {
	return (r.kind == kindHost || r.kind == kindIP) && r.Scheme == "" && r.Port == 0
}

// target is a URL's parts that rules look at.
type target struct {
	scheme string
	host   string     // lower case, no trailing dot, no brackets
	addr   netip.Addr // valid when host is an IP address (unmapped)
	port   int
}

// matches reports whether the rule covers the URL t; ips are the host's
// resolved addresses, which IP and CIDR rules also match when given.
func (r Rule) matches(t target, ips []netip.Addr) bool {
	if r.Scheme != "" && r.Scheme != t.scheme {
		return false
	}
	if r.Port != 0 && r.Port != t.port {
		return false
	}
	switch r.kind {
	case kindAny:
		return true
	case kindHost:
		return t.host == r.host
	case kindWildcard:
		return !t.addr.IsValid() && strings.HasSuffix(t.host, "."+r.host)
	case kindIP, kindCIDR:
		if t.addr.IsValid() {
			return r.prefix.Contains(t.addr)
		}
		for _, a := range ips {
			if r.prefix.Contains(a) {
				return true
			}
		}
	}
	return false
}

// MatchesURL reports whether the rule covers u's scheme, host and port,
// as written (a host name is not resolved: IP and CIDR rules match only
// a URL whose host is an address).
func (r Rule) MatchesURL(u *url.URL) bool { return r.matches(newTarget(u), nil) }

// SameOrigin reports whether a and b have one origin: scheme, host
// (case-insensitive, a trailing dot ignored) and port (the scheme's
// default port when none is written).
func SameOrigin(a, b *url.URL) bool { return newTarget(a) == newTarget(b) }

// matchesLiteral is matches without resolved addresses.
func (r Rule) matchesLiteral(t target) bool { return r.matches(t, nil) }

// namesAddr reports whether an explicit rule names the address a (an IP
// or CIDR rule holding it, or "localhost" for a loopback address), on the
// URL's scheme and port.
func (r Rule) namesAddr(t target, a netip.Addr) bool {
	if r.Scheme != "" && r.Scheme != t.scheme || r.Port != 0 && r.Port != t.port {
		return false
	}
	switch r.kind {
	case kindIP, kindCIDR:
		return r.prefix.Contains(a)
	case kindHost:
		return r.host == "localhost" && a.IsLoopback()
	}
	return false
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// toAddrs converts net.IP values to unmapped netip addresses.
func toAddrs(ips []net.IP) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}
