package kittest

import "net"

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago, for a server a test must start on a known address (a NATS
// server it restarts on the same port). The port is released before it is
// returned, so another process may take it first: a server that fails to
// listen on it should be started again on a new one.
func FreeAddr(tb TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free address: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
