package app

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// TestNATSCounters restarts the NATS server (same port) under a Connect
// connection: one disconnect and one reconnect are counted, and the
// connection's own close at shutdown is not a disconnect. It is not
// parallel: the counters are the process's.
func TestNATSCounters(t *testing.T) {
	srv := natstest.Listening(t, "")
	disc0, reco0 := testutil.ToFloat64(natsDisconnects), testutil.ToFloat64(natsReconnects)
	// nats.go runs its handlers in order on one goroutine: once the closed
	// handler ran, the disconnect handler of the close has run too.
	closed := make(chan struct{})
	c, closeConn, err := Connect(srv.URL(), "counters-test", "", nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	nc := c.NATS()

	srv.Stop()
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(testutil.ToFloat64(natsDisconnects) == disc0+1, "not yet: the disconnect to be counted")
	})
	srv.Start("")
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(nc.IsConnected(), "not yet: the reconnect") })
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(testutil.ToFloat64(natsReconnects) == reco0+1, "not yet: the reconnect to be counted")
	})

	closeConn()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection's closed handler did not run within 30s")
	}
	if got := testutil.ToFloat64(natsDisconnects); got != disc0+1 {
		t.Errorf("sovereign_nats_disconnects_total = %v after closing, want %v (a close is not a disconnect)", got, disc0+1)
	}
	if got := testutil.ToFloat64(natsReconnects); got != reco0+1 {
		t.Errorf("sovereign_nats_reconnects_total = %v, want %v", got, reco0+1)
	}
}
