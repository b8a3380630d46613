// Package natstest starts in-process NATS servers (JetStream on) and
// connections to them for tests, cleaned up when the test ends.
package natstest

import (
	"testing"

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
