package fleet_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// TestPlacementSpread: with three workers of 12 slots, 24 opens, one
// after the other and then all at once, spread over the workers by their
// reported headroom: none gets far more than its share (8).
func TestPlacementSpread(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Chromium; skipped with -short")
	}
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	fl := fleet.New(c, 0)
	for _, id := range []string{"p1", "p2", "p3"} {
		runWorker(t, srv, browser.Config{ID: id, MaxSessions: 12, WarmSessions: -1})
	}
	// Wait for: load reports of the three workers.
	kittest.Eventually(t, 10*time.Second, func() error {
		if n := len(fl.Spread()); n != 3 {
			return fmt.Errorf("%d workers reported", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	type opened struct{ worker, session string }
	check := func(name string, all []opened) {
		t.Helper()
		per := map[string]int{}
		for _, o := range all {
			per[o.worker]++
		}
		t.Logf("%s: %v", name, per)
		for _, id := range []string{"p1", "p2", "p3"} {
			if n := per[id]; n < 6 || n > 10 {
				t.Errorf("%s: worker %s got %d of 24 sessions, want 6 to 10 (share 8); spread %v", name, id, n, per)
			}
		}
		for _, o := range all {
			if err := fl.Close(ctx, o.worker, o.session); err != nil {
				t.Fatal(err)
			}
		}
		// Wait for: the workers report their sessions closed.
		kittest.Eventually(t, 10*time.Second, func() error {
			for id, n := range fl.Spread() {
				if n != 0 {
					return fmt.Errorf("%s reports %d sessions", id, n)
				}
			}
			return nil
		})
	}

	var seq []opened
	for i := 0; i < 24; i++ {
		w, s, err := fl.Open(ctx, "spread", nil, "")
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		seq = append(seq, opened{w, s})
	}
	check("24 sequential opens", seq)

	conc := make([]opened, 24)
	errs := make([]error, 24)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			w, s, err := fl.Open(ctx, "spread", nil, "")
			conc[i], errs[i] = opened{w, s}, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent open %d: %v", i, err)
		}
	}
	check("24 concurrent opens", conc)
}
