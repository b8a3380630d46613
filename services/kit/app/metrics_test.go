package app

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
)

// TestNATSCounters restarts the NATS server (same port) under a Connect
// connection: one disconnect and one reconnect are counted, and the
// connection's own close at shutdown is not a disconnect.
func TestNATSCounters(t *testing.T) {
	srv, err := natsrv.Start(natsrv.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().(*net.TCPAddr)
	listen := net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port))
	running := srv
	t.Cleanup(func() {
		if running != nil {
			running.Stop()
		}
	})
	disc0, reco0 := testutil.ToFloat64(natsDisconnects), testutil.ToFloat64(natsReconnects)
	c, closeConn, err := Connect(srv.ClientURL(), "counters-test", "")
	if err != nil {
		t.Fatal(err)
	}
	nc := c.NATS()

	srv.Stop()
	running = nil
	eventually(t, "the disconnect to be counted", func() bool { return testutil.ToFloat64(natsDisconnects) == disc0+1 })
	if srv, err = natsrv.Start(natsrv.Options{Listen: listen}); err != nil {
		t.Fatal(err)
	}
	running = srv
	eventually(t, "the reconnect", nc.IsConnected)
	eventually(t, "the reconnect to be counted", func() bool { return testutil.ToFloat64(natsReconnects) == reco0+1 })

	closeConn()
	time.Sleep(100 * time.Millisecond) // the handlers run asynchronously
	if got := testutil.ToFloat64(natsDisconnects); got != disc0+1 {
		t.Errorf("sovereign_nats_disconnects_total = %v after closing, want %v (a close is not a disconnect)", got, disc0+1)
	}
	if got := testutil.ToFloat64(natsReconnects); got != reco0+1 {
		t.Errorf("sovereign_nats_reconnects_total = %v, want %v", got, reco0+1)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
