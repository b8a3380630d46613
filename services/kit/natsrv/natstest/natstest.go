// Package natstest starts NATS servers (JetStream on) and connections to
// them for tests, cleaned up when the test ends: in-process only (Server),
// or on a loopback port for a test that restarts NATS (Listening).
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
)

// Server starts a server with no listener (in-process connections only).
func Server(tb testing.TB) *natsrv.Server {
	tb.Helper()
	s, err := natsrv.Start(natsrv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Conn opens an in-process connection to s.
func Conn(tb testing.TB, s *natsrv.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Bus opens an in-process connection to s wrapped in a bus with the default
// prefix.
func Bus(tb testing.TB, s *natsrv.Server) *bus.Conn {
	tb.Helper()
	c, err := bus.New(Conn(tb, s), "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Restartable is an embedded NATS server on a loopback TCP port that a
// test stops and starts again, as an outage looks to its clients. The
// first start binds a port of the kernel's choosing; every later start
// listens there again, so that clients reconnect to the URL they know.
type Restartable struct {
	tb   testing.TB
	addr string         // host:port the first start bound
	srv  *natsrv.Server // nil while stopped
}

// Listening starts a Restartable with its JetStream store in dir; it is
// stopped when the test ends.
func Listening(tb testing.TB, dir string) *Restartable {
	tb.Helper()
	r := &Restartable{tb: tb, addr: "127.0.0.1:0"}
	r.Start(dir)
	r.addr = r.srv.Addr().String()
	tb.Cleanup(func() {
		if r.srv != nil {
			r.srv.Stop()
		}
	})
	return r
}

// Server returns the running server (nil while it is stopped).
func (r *Restartable) Server() *natsrv.Server { return r.srv }

// URL is the client URL, the same across restarts.
func (r *Restartable) URL() string { return "nats://" + r.addr }

// Addr is the host:port the server listens on, the same across restarts.
func (r *Restartable) Addr() string { return r.addr }

// Stop stops the server.
func (r *Restartable) Stop() {
	r.srv.Stop()
	r.srv = nil
}

// Start starts the server (again) with its store in dir: the same dir to
// come back with its data, another to come back without it. A restart
// takes the port the first start bound, free since Stop: the one port a
// test names, because a server that came back elsewhere would not be the
// outage its clients must survive.
func (r *Restartable) Start(dir string) {
	r.tb.Helper()
	srv, err := natsrv.Start(natsrv.Options{Listen: r.addr, DataDir: dir})
	if err != nil {
		r.tb.Fatal(err)
	}
	r.srv = srv
}

// Reconnecting connects to url with a connection that tries again every
// 20 ms for as long as it takes (a server being restarted), closed when
// the test ends.
func Reconnecting(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}
