package kittest

import "net"

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago. The port is released before it is returned, so another
// socket may take it first: a server that fails to listen on it should be
// started again on a new one. Prefer a server that binds port 0 and says
// where it listens (httptest, natstest.Listening, a listener handed on);
// FreeAddr is for the one server that cannot yet: browser.Serve, which
// reports the health listener it bound only in the process-wide log
// (`sovereign up` writes its addresses to --addr-file).
func FreeAddr(tb TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free address: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
