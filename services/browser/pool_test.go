package browser_test

import (
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// waitWarm waits until w holds n warm browser contexts.
func waitWarm(t *testing.T, w *browser.Worker, n int) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		got := w.WarmSessions()
		return kittest.Check(got == n, "worker %s holds %d warm contexts, want %d", w.ID(), got, n)
	})
}

// TestWarmPool: the pool fills to its size, an open takes a warm context
// (with the caller's policy in force, not the pool's allow-everything
// one) and the pool refills in the background, never beyond the slots
// the open sessions leave; a closed session frees a slot for it again.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ts := site(t)
	w := f.worker(browser.Config{ID: "warm", MaxSessions: 3, WarmSessions: 2})
	waitWarm(t, w, 2)
	pol := enforced(false, &browserv1.UrlRules{Tier: "global", Block: []string{"blocked.example"}})
	a := f.openWith(pol)
	if got := f.mustCall(a, openReq(ts.URL+"/a")); got == "" {
		t.Fatal("open answered nothing")
	}
	_, err := f.call(a, openReq("http://blocked.example/"))
	wantCode(t, "open a blocked host on a warm session", err, commonv1.ErrorCode_FORBIDDEN, "blocked.example")
	waitWarm(t, w, 2) // 1 open + 2 warm = 3 slots
	b := f.openWith(pol)
	waitWarm(t, w, 1) // 2 open + 1 warm
	c := f.openWith(pol)
	waitWarm(t, w, 0) // full
	for i, s := range []*browserv1.OpenSessionResponse{a, b, c} {
		if got := f.mustCall(s, evalReq("location.href")); got == "" {
			t.Fatalf("session %d: eval answered nothing", i)
		}
	}
	if err := f.close(b); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, w, 1)
	if n := w.WarmTaken(); n != 3 {
		t.Fatalf("%d opens took a warm context, want 3", n)
	}
	// An open without an enforced policy cannot use a context made under
	// the guard: it starts cold, and the pool turns to its kind (the
	// guarded context is closed; the slot freed next is warmed without
	// the guard), so the next such open is warm.
	d := f.mustOpen()
	f.mustCall(d, openReq(ts.URL+"/d"))
	if n := w.WarmSessions(); n != 0 {
		t.Fatalf("warm contexts = %d with 3 sessions open on 3 slots, want 0", n)
	}
	if n := w.WarmTaken(); n != 3 {
		t.Fatalf("%d opens took a warm context after an open of the other kind, want still 3", n)
	}
	if err := f.close(d); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, w, 1)
	e := f.mustOpen()
	if n := w.WarmTaken(); n != 4 {
		t.Fatalf("%d opens took a warm context, want 4 (the pool should have turned to unguarded contexts)", n)
	}
	if got := f.mustCall(e, openReq(ts.URL+"/e")); got == "" {
		t.Fatal("open on an unguarded warm context answered nothing")
	}
}
