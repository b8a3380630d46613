package secrets

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
)

// TestCacheSurvivesRestart restarts the NATS server (same store, same
// port) under a cache: changes made afterwards still reach it.
func TestCacheSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := natsrv.Start(natsrv.Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().(*net.TCPAddr)
	listen := net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
		}
	})
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, c := cacheOn(t, nc, testKey(t), map[string]string{"BEFORE": "before-value", "GOES": "goes-away"})

	srv.Stop()
	stopped = true
	srv, err = natsrv.Start(natsrv.Options{Listen: listen, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stopped = false
	ctx := context.Background()
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(nc.IsConnected(), "not yet: the reconnect") })
	if err := s.Set(ctx, "AFTER", []byte("after-value")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "GOES"); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		names := c.Names()
		return kittest.Check(slices.Equal(names, []string{"AFTER", "BEFORE"}), "cache names %q, want [AFTER BEFORE] after the restart", names)
	})
	if out, _, err := c.Substitute("{{secrets.AFTER}} {{secrets.BEFORE}}"); err != nil || out != "after-value before-value" {
		t.Errorf("Substitute = %q, %v", out, err)
	}
}
