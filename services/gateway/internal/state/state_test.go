package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	nc := natstest.Conn(t, natstest.Server(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, nc, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	id := NewSessionID()

	if _, err := s.Get(ctx, MCP, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(unknown) error = %v, want ErrNotFound", err)
	}
	e, err := s.Create(ctx, MCP, id, Record{Owner: "anonymous"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, MCP, id, Record{Owner: "anonymous"}); !errors.Is(err, ErrConflict) {
		t.Errorf("second Create error = %v, want ErrConflict", err)
	}
	if _, err := s.Get(ctx, Handle, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("kinds share a key: Get(Handle, mcp id) error = %v", err)
	}

	bound := *e
	bound.WorkerID, bound.SessionID = "w1", "s1"
	up, err := s.Update(ctx, &bound)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, e); !errors.Is(err, ErrConflict) {
		t.Errorf("Update at a stale revision error = %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, MCP, id)
	if err != nil || !got.Bound() || got.Revision != up.Revision || got.Owner != "anonymous" {
		t.Fatalf("Get = %+v, %v; want the bound record at revision %d", got, err, up.Revision)
	}

	ctxW, cancel := context.WithCancel(ctx)
	defer cancel()
	ended, err := s.Ended(ctxW, MCP, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Modify(ctx, MCP, id, func(r *Record) bool { r.Touched = time.Time{}; return true }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
		t.Fatal("Ended fired on a write that did not terminate the session")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := s.Modify(ctx, MCP, id, func(r *Record) bool { r.Terminated = true; return true }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Ended did not fire when the session was terminated")
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		h := NewHandle()
		if !ValidHandle(h) || !ValidID(h) || seen[h] {
			t.Fatalf("NewHandle() = %q: invalid or repeated", h)
		}
		seen[h] = true
		if id := NewSessionID(); !ValidID(id) || ValidHandle(id) {
			t.Fatalf("NewSessionID() = %q", id)
		}
	}
	for _, bad := range []string{"", "short", "sov_a.b.c.d.e", "sov_*>" + strings.Repeat("a", 10), strings.Repeat("a", 201)} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
	if ValidHandle("mcp-abcdefghijkl") {
		t.Error("an MCP session id passes as a handle")
	}
}

// TestMirror: two replicas on one bucket. A write on one reaches the other's
// mirror through the watch; a replica whose mirror is behind gets a conflict
// on its stale write and reads the bucket afterwards.
func TestMirror(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	replica := func() *Store {
		s, err := Open(context.Background(), natstest.Conn(t, srv), "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := replica(), replica()
	ctx := context.Background()
	id := NewSessionID()
	if _, err := a.Create(ctx, MCP, id, Record{Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	eb, err := b.Get(ctx, MCP, id) // a miss on b: read from the bucket
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Modify(ctx, MCP, id, func(r *Record) bool { r.Terminated = true; return true }); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		got, err := b.Get(ctx, MCP, id)
		if err != nil {
			t.Fatal(err)
		}
		return kittest.Check(got.Terminated, "b's mirror has not seen a's termination")
	})
	// eb is stale: writing it conflicts, and the retry in Modify succeeds.
	if _, err := b.Update(ctx, eb); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale Update error = %v, want ErrConflict", err)
	}
	out, err := b.Modify(ctx, MCP, id, func(r *Record) bool { r.WorkerID, r.SessionID = "w", "s"; return true })
	if err != nil || !out.Terminated || out.WorkerID != "w" {
		t.Fatalf("Modify after conflict = %+v, %v", out, err)
	}
}

// TestNATSRestart: the bucket lives in memory, so a NATS restart loses it.
// The store re-creates it on the next operation and its mirror watches the
// new bucket, so a gateway recovers without a restart of its own.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.Listening(t, "") // a store of its own each start: the restart loses the bucket
	nc := natstest.Reconnecting(t, srv.URL())
	a, err := Open(context.Background(), nc, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := context.Background()
	if _, err := a.Create(ctx, MCP, NewSessionID(), Record{Owner: "o"}); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Start("")
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(nc.IsConnected(), "client has not reconnected") })

	id := NewSessionID()
	kittest.Eventually(t, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := a.Create(cctx, MCP, id, Record{Owner: "o"}); err != nil {
			return fmt.Errorf("Create after the NATS restart: %w", err)
		}
		return nil
	})
	// Another replica's write reaches a's mirror: its watch is live again.
	nc2, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	b, err := Open(ctx, nc2, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := b.Modify(ctx, MCP, id, func(r *Record) bool { r.Terminated = true; return true }); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		e, err := a.Get(ctx, MCP, id)
		if err != nil {
			return err
		}
		return kittest.Check(e.Terminated, "a's mirror has not seen b's write after the restart: %+v", e)
	})
}

// TestNoJetStream: a NATS without JetStream is refused with advice.
func TestNoJetStream(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Open(ctx, nc, "", time.Hour); err == nil || !strings.Contains(err.Error(), "start nats-server with -js") {
		t.Fatalf("Open on a NATS without JetStream = %v, want advice to start it with -js", err)
	}
}

// TestPingAfterNATSRestart: once the connection is back, Ping answers at
// once: it re-creates the bucket the restart lost instead of failing until
// the mirror's watch notices.
func TestPingAfterNATSRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.Listening(t, "") // a store of its own each start: the restart loses the bucket
	nc := natstest.Reconnecting(t, srv.URL())
	a, err := Open(context.Background(), nc, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	srv.Stop()
	srv.Start("")
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(nc.IsConnected(), "client has not reconnected") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Ping(ctx); err != nil {
		t.Fatalf("Ping right after the reconnect: %v", err)
	}
}
