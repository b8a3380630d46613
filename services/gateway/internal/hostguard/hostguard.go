// Package hostguard checks the Host and Origin of requests to the MCP
// endpoint against allow lists, so that a web page cannot drive the gateway
// (DNS rebinding, cross-site requests).
package hostguard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Guard checks Host and Origin on every /mcp request: a web page must not
// be able to drive the gateway (DNS rebinding, cross-site requests).
type Guard struct {
	hosts   []hostPattern
	origins []originPattern
}

// New returns the guard of the allowed hosts (host, host:port, *.domain or
// *) and origins (the same, or scheme://host[:port]).
func New(hosts, origins []string) (*Guard, error) {
	g := &Guard{}
	for _, h := range hosts {
		p, err := ParseHost(h)
		if err != nil {
			return nil, fmt.Errorf("allowed hosts: %w", err)
		}
		g.hosts = append(g.hosts, p)
	}
	for _, o := range origins {
		p, err := ParseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origins: %w", err)
		}
		g.origins = append(g.origins, p)
	}
	return g, nil
}

func splitHost(hostport string) (host, port string) {
	host = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), port
}

func (g *Guard) hostAllowed(hostport string) bool {
	if hostport == "" {
		return false
	}
	host, port := splitHost(hostport)
	for _, p := range g.hosts {
		if p.match(host, port) {
			return true
		}
	}
	return false
}

func (g *Guard) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes "null" (sandboxed frames, file://)
	}
	host, port := splitHost(u.Host)
	for _, p := range g.origins {
		if (p.scheme == "" || p.scheme == u.Scheme) && p.match(host, port) {
			return true
		}
	}
	return false
}

// Wrap answers 403 to a request whose Host, or Origin when it has one, is
// not allowed, naming the flag that allows it.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not allowed on this gateway; "+
				"add it with --allowed-hosts or SOVEREIGN_ALLOWED_HOSTS", r.Host), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !g.originAllowed(origin) {
			http.Error(w, fmt.Sprintf("forbidden: Origin %q is not allowed on this gateway; "+
				"add it with --allowed-origins or SOVEREIGN_ALLOWED_ORIGINS", origin), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostPattern matches a host and, when port is set, a port.
type hostPattern struct {
	any    bool   // "*"
	suffix string // "*.example.com" → ".example.com"
	host   string // lower case, IPv6 without brackets
	port   string // "" = any
}

// ParseHost parses an allowed-host pattern: host, host:port, *.domain or *.
func ParseHost(s string) (hostPattern, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "*":
		return hostPattern{any: true}, nil
	case strings.HasPrefix(s, "*."):
		if !ValidHostName(s[2:]) {
			return hostPattern{}, fmt.Errorf("%q: %q is not a host name", s, s[2:])
		}
		return hostPattern{suffix: s[1:]}, nil
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return hostPattern{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if net.ParseIP(host) == nil && !ValidHostName(host) {
		return hostPattern{}, fmt.Errorf("%q is not a host, host:port, *.domain or *", s)
	}
	return hostPattern{host: host, port: port}, nil
}

func (p hostPattern) match(host, port string) bool {
	switch {
	case p.any:
		return true
	case p.suffix != "":
		return strings.HasSuffix(host, p.suffix)
	}
	return host == p.host && (p.port == "" || p.port == port)
}

// originPattern is a host pattern, optionally tied to one scheme.
type originPattern struct {
	scheme string // "" = any
	hostPattern
}

// ParseOrigin parses an allowed-origin pattern: a host pattern, or
// scheme://host[:port].
func ParseOrigin(s string) (originPattern, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		hp, err := ParseHost(s)
		return originPattern{hostPattern: hp}, err
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return originPattern{}, fmt.Errorf("%q is not an origin like https://app.example.com", s)
	}
	hp, err := ParseHost(u.Host)
	if err != nil {
		return originPattern{}, err
	}
	return originPattern{scheme: strings.ToLower(u.Scheme), hostPattern: hp}, nil
}

// ValidHostName reports whether h is a DNS host name (letters, digits and
// hyphens in dot-separated labels).
func ValidHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}
