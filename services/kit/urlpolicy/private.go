package urlpolicy

import (
	"net/netip"
	"strconv"
	"strings"
)

// privatePrefixes are the addresses block_private refuses: loopback,
// private, link-local (cloud metadata 169.254.169.254 among them), CGNAT,
// "this network" (0.0.0.0 reaches the local host on Linux), and their IPv6
// counterparts (fd00:ec2::254, AWS's IPv6 metadata address, is in fc00::/7).
var privatePrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "255.255.255.255/32",
		"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// privateNames are host names that reach the local host or a cloud
// metadata service whatever DNS says.
var privateNames = map[string]bool{"localhost": true, "metadata": true, "metadata.google.internal": true}

// IsPrivateAddr reports whether a (IPv4-mapped IPv6 included) is an
// address block_private refuses.
func IsPrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	// NAT64 (64:ff9b::/96) embeds an IPv4 address.
	if a.Is6() {
		b := a.As16()
		if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && [8]byte(b[4:12]) == [8]byte{} {
			a = netip.AddrFrom4([4]byte(b[12:16]))
		}
	}
	for _, p := range privatePrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// isPrivateName reports whether the host name (lower case, no trailing
// dot) always means the local host or a metadata service.
func isPrivateName(h string) bool {
	return privateNames[h] || strings.HasSuffix(h, ".localhost")
}

// parseIPv4 parses host as the WHATWG URL standard does: one to four
// dot-separated parts, each decimal, hexadecimal (0x) or octal (leading
// 0), the last filling the remaining bytes — so 2130706433, 0x7f.1 and
// 0177.0.0.1 are all 127.0.0.1. Chromium canonicalizes URLs this way
// before they reach the policy; parsing them here too keeps the policy
// right for URLs that did not pass through Chromium.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 1<<32 {
		return 0, false
	}
	return n, true
}

// hostAddr returns the address a URL host denotes, if it is one: an IPv6
// literal (with or without brackets) or an IPv4 address in any form that
// parseIPv4 takes. Mapped addresses are unmapped.
func hostAddr(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(h, '%'); i >= 0 { // zone
		h = h[:i]
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	return parseIPv4(h)
}
