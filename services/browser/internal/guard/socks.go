package guard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// socksProxy is a SOCKS5 proxy on the loopback interface that a protected
// browser context sends its WebSockets through (and nothing else: its
// proxy rules send http and https direct). Chromium hands it the host name
// (remote DNS), so the proxy resolves the name, checks the host, port and
// addresses with the context's policy, and connects to the address it
// checked: no DNS rebinding for WebSockets.
type socksProxy struct {
	ln  net.Listener
	c   *Context
	dns *resolver

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// WebSocketProxy starts the context's WebSocket proxy and returns the
// proxy settings for Target.createBrowserContext: ProxyServer sends ws
// and wss to the proxy and everything else direct; ProxyBypassList makes
// loopback hosts use it too (Chromium bypasses proxies for them by
// default). Close stops it.
func (c *Context) WebSocketProxy() (proxyServer, bypassList string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", fmt.Errorf("start the WebSocket proxy: %w", err)
	}
	p := &socksProxy{ln: ln, c: c, dns: &resolver{}, conns: make(map[net.Conn]struct{})}
	c.mu.Lock()
	c.proxy = p
	c.mu.Unlock()
	go p.serve()
	// Chromium proxies ws/wss with the "socks=" (fallback) list when no
	// list names their scheme; http and https have their own, direct.
	return "http=direct://;https=direct://;socks=socks5://" + ln.Addr().String(), "<-loopback>", nil
}

// Close stops the context's WebSocket proxy and its connections.
func (c *Context) Close() {
	c.mu.Lock()
	p := c.proxy
	c.proxy = nil
	c.mu.Unlock()
	if p != nil {
		p.close()
	}
}

func (p *socksProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

func (p *socksProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.done {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *socksProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// SOCKS5 reply codes (RFC 1928).
const (
	socksOK          = 0x00
	socksFailure     = 0x01
	socksNotAllowed  = 0x02
	socksUnreachable = 0x04
	socksBadCommand  = 0x07
	socksBadAddress  = 0x08
)

func (p *socksProxy) handle(c net.Conn) {
	if !p.track(c, true) {
		_ = c.Close()
		return
	}
	defer p.track(c, false)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	host, port, err := readSocksRequest(c)
	if err != nil {
		var code byte = socksFailure
		if errors.Is(err, errBadCommand) {
			code = socksBadCommand
		} else if errors.Is(err, errBadAddress) {
			code = socksBadAddress
		}
		socksReply(c, code)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pol := p.c.Policy()
	refuse := func(rule string) {
		p.c.record("", "", &browserv1.BlockedRequest{
			Url:          hostPort(host, port),
			ResourceType: "WebSocket",
			Rule:         rule,
			TimeMs:       time.Now().UnixMilli(),
		})
		socksReply(c, socksNotAllowed)
	}
	// The rules first: a blocked host is refused (and recorded) whether
	// or not it resolves.
	if d := pol.CheckHostPort(host, port, nil); !d.Allowed {
		refuse(d.Rule)
		return
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = p.dns.lookup(ctx, host); err != nil || len(ips) == 0 {
		socksReply(c, socksUnreachable)
		return
	}
	if d := pol.CheckHostPort(host, port, ips); !d.Allowed {
		refuse(d.Rule)
		return
	}
	var up net.Conn
	var d net.Dialer
	for _, ip := range ips {
		up, err = d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if err == nil {
			break
		}
	}
	if up == nil {
		socksReply(c, socksUnreachable)
		return
	}
	if !p.track(up, true) {
		_ = up.Close()
		return
	}
	defer p.track(up, false)
	defer up.Close()
	_ = c.SetDeadline(time.Time{})
	socksReply(c, socksOK)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

var (
	errBadCommand = errors.New("only CONNECT is supported")
	errBadAddress = errors.New("unknown address type")
)

// readSocksRequest reads the greeting (answering "no authentication") and
// the CONNECT request.
func readSocksRequest(c net.Conn) (host string, port int, err error) {
	var hdr [2]byte
	if _, err = io.ReadFull(c, hdr[:]); err != nil {
		return "", 0, err
	}
	if hdr[0] != 5 {
		return "", 0, fmt.Errorf("not SOCKS5")
	}
	methods := make([]byte, hdr[1])
	if _, err = io.ReadFull(c, methods); err != nil {
		return "", 0, err
	}
	if _, err = c.Write([]byte{5, 0}); err != nil {
		return "", 0, err
	}
	var req [4]byte
	if _, err = io.ReadFull(c, req[:]); err != nil {
		return "", 0, err
	}
	if req[0] != 5 {
		return "", 0, fmt.Errorf("not SOCKS5")
	}
	if req[1] != 1 {
		return "", 0, errBadCommand
	}
	switch req[3] {
	case 1:
		var a [4]byte
		if _, err = io.ReadFull(c, a[:]); err != nil {
			return "", 0, err
		}
		host = net.IP(a[:]).String()
	case 4:
		var a [16]byte
		if _, err = io.ReadFull(c, a[:]); err != nil {
			return "", 0, err
		}
		host = net.IP(a[:]).String()
	case 3:
		var n [1]byte
		if _, err = io.ReadFull(c, n[:]); err != nil {
			return "", 0, err
		}
		name := make([]byte, n[0])
		if _, err = io.ReadFull(c, name); err != nil {
			return "", 0, err
		}
		host = string(name)
	default:
		return "", 0, errBadAddress
	}
	var pb [2]byte
	if _, err = io.ReadFull(c, pb[:]); err != nil {
		return "", 0, err
	}
	return host, int(binary.BigEndian.Uint16(pb[:])), nil
}

func socksReply(c net.Conn, code byte) {
	_, _ = c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
