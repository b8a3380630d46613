package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
)

// TestAuditNoLoss runs the trail's delivery promise against both backends:
// with gateway and worker up and history stopped, 200 tool calls from 4
// clients wait in the stream and are stored exactly once when history
// starts; then history is killed with SIGKILL in the middle of a backlog
// and, after a restart, every record is still there exactly once.
func TestAuditNoLoss(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // each backend has a fleet of its own
			dsn := ""
			if backend == "postgres" {
				dsn = pgtest.Start(t)
			}
			testAuditNoLoss(t, dsn)
		})
	}
}

func testAuditNoLoss(t *testing.T, dsn string) {
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 8})
	ctx := callCtx(t, 4*time.Minute)
	dataDir := filepath.Join(f.Dir, "history")
	since := time.Now().UnixNano()

	clients := make([]*harness.MCPClient, 4)
	for i := range clients {
		clients[i] = initClient(t, ctx, f.Gateways[0].MCP)
	}
	calls := func(n int) {
		each(t, "get_title", clients, func(i int, c *harness.MCPClient) error {
			for range n {
				if _, err := c.Tool(ctx, "get_title", nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// stored returns the get_title records, checking each is there once.
	stored := func() []*historyv1.AuditRecord {
		t.Helper()
		recs, err := f.AuditAll(ctx, &historyv1.AuditQuery{Tool: "get_title", SinceUnixNano: since})
		if err != nil {
			t.Fatalf("audit query: %v", err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[r.GetId()] {
				t.Fatalf("record %s stored twice", r.GetId())
			}
			seen[r.GetId()] = true
		}
		return recs
	}
	waitStored := func(want int) []*historyv1.AuditRecord {
		t.Helper()
		return kittest.EventuallyValue(t, 60*time.Second, func() ([]*historyv1.AuditRecord, error) {
			recs := stored()
			if len(recs) > want {
				t.Fatalf("audit holds %d get_title records, want %d", len(recs), want)
			}
			return recs, kittest.Check(len(recs) == want, "audit holds %d get_title records, want %d", len(recs), want)
		})
	}

	// 1. History down: the calls go on, their records wait in the stream.
	calls(50)
	js, err := jetstream.New(f.Bus().NATS())
	if err != nil {
		t.Fatal(err)
	}
	waitStream(t, ctx, js, 200)
	h, err := f.StartHistory(ctx, dataDir, dsn)
	if err != nil {
		t.Fatal(err)
	}
	recs := waitStored(200)
	perSession := map[string]int{}
	for _, r := range recs {
		perSession[r.GetMcpSession()]++
		if r.GetOutcome() != historyv1.Outcome_OUTCOME_OK || r.GetBrowserSession() == "" || r.GetDurationMicros() <= 0 {
			t.Fatalf("record lacks what the trail promises: %v", r)
		}
	}
	if len(perSession) != 4 {
		t.Errorf("records spread over %d MCP sessions, want 4: %v", len(perSession), perSession)
	}

	// A call made now shows within about a second.
	began := time.Now()
	tool(t, ctx, clients[0], "get_url", nil)
	kittest.Eventually(t, 30*time.Second, func() error {
		r, err := f.Audit(ctx, &historyv1.AuditQuery{Tool: "get_url", SinceUnixNano: since})
		if err != nil {
			t.Fatal(err)
		}
		return kittest.Check(len(r.GetRecords()) == 1, "the get_url call has not reached the trail (%d records)", len(r.GetRecords()))
	})
	t.Logf("a tool call reached the trail %s after it was made", time.Since(began).Round(time.Millisecond))

	// 2. SIGKILL in the middle of a backlog.
	if err := h.Stop(5 * time.Second); err != nil {
		t.Logf("history stop: %v", err)
	}
	calls(250)
	backlog := waitStream(t, ctx, js, 1000)
	h, err = f.StartHistory(ctx, dataDir, dsn, "--audit-batch", "10")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, audit.Stream, audit.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.AckFloor.Consumer > 0 || ci.NumAckPending > 0 {
			break
		}
		// A tight poll, not kittest.Eventually and its backoff: the kill
		// must land as soon as history starts on the backlog, in its middle.
		time.Sleep(time.Millisecond)
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	left := streamMsgs(t, ctx, js)
	t.Logf("killed history with %d of %d backlog records not yet acknowledged", left, backlog)
	if left == 0 {
		t.Log("(history had finished the backlog before the kill landed; the restart below still checks exactly once)")
	}
	if _, err := f.StartHistory(ctx, dataDir, dsn); err != nil {
		t.Fatal(err)
	}
	waitStored(1200)
	// History acknowledges a batch after storing it (and the server then
	// removes it from the work queue), so the stream empties a moment
	// after the records can be read.
	kittest.Eventually(t, 30*time.Second, func() error {
		n := streamMsgs(t, ctx, js)
		return kittest.Check(n == 0, "the audit stream still holds %d records after history caught up", n)
	})
	if out := h.Output(); strings.Contains(out, "panic") {
		t.Errorf("history panicked:\n%s", out)
	}
}

func streamMsgs(t *testing.T, ctx context.Context, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, audit.Stream)
	if err != nil {
		t.Fatalf("audit stream: %v", err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return si.State.Msgs
}

// waitStream waits until the stream holds at least n records (publishing
// is asynchronous) and returns how many it holds.
func waitStream(t *testing.T, ctx context.Context, js jetstream.JetStream, n uint64) uint64 {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (uint64, error) {
		got := streamMsgs(t, ctx, js)
		return got, kittest.Check(got >= n, "the audit stream holds %d records, want at least %d", got, n)
	})
}
