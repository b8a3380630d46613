package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

func testUpgrade(t *testing.T, open func(version int) (store.Store, error)) {
	ctx := ctxT(t)
	at := func(v int) store.Store {
		t.Helper()
		s, err := open(v)
		if err != nil {
			t.Fatalf("open at version %d: %v", v, err)
		}
		return s
	}
	old := at(1)
	if v, err := old.SchemaVersion(ctx); err != nil || v != 1 {
		t.Fatalf("old schema version %d, %v", v, err)
	}
	recs := dataset()
	insert(t, old, recs)
	// A schema before the approval column stores records without it and
	// reads them back without one.
	withApproval := &historyv1.AuditRecord{Id: "approved-old", TimeUnixNano: base.Add(-time.Hour).UnixNano(), Tool: "eval",
		Approval: &historyv1.Approval{State: "approved", DecidedBy: "console:admin"}}
	insert(t, old, []*historyv1.AuditRecord{withApproval})
	recs = append(recs, withApproval)
	for _, q := range []*historyv1.AuditQuery{{}, {Session: "m1"}} {
		for _, r := range walk(t, old, q) {
			if r.GetApproval() != nil {
				t.Errorf("old schema, query %v: record %s has approval %v", q, r.GetId(), r.GetApproval())
			}
		}
	}
	if _, err := old.CreateChatSession(ctx, "c", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := at(store.LatestSchema)
	if v, err := s.SchemaVersion(ctx); err != nil || v != store.LatestSchema {
		t.Fatalf("schema version after upgrade %d, %v", v, err)
	}
	for _, q := range []*historyv1.AuditQuery{{Text: "alpha"}, {Session: "m1"}, {Session: "b2", Text: "DELTA"}} {
		equalIDs(t, fmt.Sprintf("old records, %v", q), ids(walk(t, s, q)), reference(recs, q))
	}
	fresh := &historyv1.AuditRecord{Id: "fresh", TimeUnixNano: base.Add(time.Hour).UnixNano(), BrowserSession: "m1", Result: "alphabet",
		Approval: &historyv1.Approval{State: "denied", DecidedBy: "console:admin", RequestId: "r1"}}
	insert(t, s, []*historyv1.AuditRecord{fresh})
	for _, r := range walk(t, s, &historyv1.AuditQuery{}) {
		if want := fresh.GetApproval(); r.GetId() == "fresh" && !proto.Equal(r.GetApproval(), want) ||
			r.GetId() != "fresh" && r.GetApproval() != nil {
			t.Errorf("after the upgrade, record %s has approval %v", r.GetId(), r.GetApproval())
		}
	}
	equalIDs(t, "old and new records", ids(query(t, s, &historyv1.AuditQuery{Text: "alpha", Limit: 100}).GetRecords()),
		reference(append(recs, fresh), &historyv1.AuditQuery{Text: "alpha"}))
	if cs, _, err := s.GetChatSession(ctx, "c", 0); err != nil || cs.GetTitle() != "kept" {
		t.Errorf("chat session after upgrade: %v, %v", cs, err)
	}
	// Opening again changes nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := at(store.LatestSchema)
	if v, err := again.SchemaVersion(ctx); err != nil || v != store.LatestSchema {
		t.Errorf("schema version on reopening %d, %v", v, err)
	}
}

// testConcurrentOpen opens one new database from several goroutines at
// once, as replicas starting together do: migrations run once.
func testConcurrentOpen(t *testing.T, open func(version int) (store.Store, error)) {
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := open(store.LatestSchema)
			if err == nil {
				_, err = s.InsertAudit(t.Context(), []*historyv1.AuditRecord{{Id: fmt.Sprint(i), TimeUnixNano: 1}})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s, err := open(store.LatestSchema)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SchemaVersion(ctxT(t)); err != nil || v != store.LatestSchema {
		t.Errorf("schema version %d, %v", v, err)
	}
	if got := walk(t, s, &historyv1.AuditQuery{}); len(got) != n {
		t.Errorf("%d records, want %d", len(got), n)
	}
}
