package guard

import (
	"context"
	"net"
	"sync"
	"time"
)

// resolver looks host names up for block_private, with a short timeout
// and a cache of a few seconds.
//
// DNS rebinding: the guard resolves a name, and Chromium resolves it
// again to connect. A name whose records change in between (a short TTL
// served by a hostile DNS server) can pass the check with a public address
// and then reach a private one. WebSockets are not affected: the SOCKS
// proxy connects to the very address it checked. For HTTP the limit stays.
type resolver struct {
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	ips []net.IP
	err error
	exp time.Time
}

const (
	resolveTimeout = 3 * time.Second
	cacheFor       = 5 * time.Second
	cacheMax       = 1024
)

func (r *resolver) lookup(ctx context.Context, host string) ([]net.IP, error) {
	now := time.Now()
	r.mu.Lock()
	if c, ok := r.cache[host]; ok && now.Before(c.exp) {
		r.mu.Unlock()
		return c.ips, c.err
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, a.IP)
	}
	r.mu.Lock()
	if r.cache == nil || len(r.cache) >= cacheMax {
		r.cache = make(map[string]cached)
	}
	r.cache[host] = cached{ips: ips, err: err, exp: now.Add(cacheFor)}
	r.mu.Unlock()
	return ips, err
}
