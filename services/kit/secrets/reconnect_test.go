package secrets

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// TestCacheSurvivesRestart restarts the NATS server (same store, same
// port) under a cache: changes made afterwards still reach it.
func TestCacheSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.Listening(t, dir)
	nc := natstest.Reconnecting(t, srv.URL())
	s, c := cacheOn(t, nc, testKey(t), map[string]string{"BEFORE": "before-value", "GOES": "goes-away"})

	srv.Stop()
	srv.Start(dir)
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
