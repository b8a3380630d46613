package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// TestReserveConcurrent: 20 openers at once on two replicas (two stores
// on one NATS) take at most the limit of one owner's slots; a slot comes
// back when its opener gives up, stays taken while its record is bound,
// and comes back when the record is unbound; another owner is unaffected.
func TestReserveConcurrent(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var replicas []*Store
	for range 2 {
		s, err := Open(ctx, natstest.Conn(t, srv), "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		replicas = append(replicas, s)
	}
	const owner, limit, openers = "token:abcdef0000000001", 3, 20

	var mu sync.Mutex
	var releases []func()
	var keys []string
	var wg sync.WaitGroup
	for i := range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := NewHandle()
			release, err := replicas[i%2].Reserve(ctx, owner, KeyOf(Handle, h), limit, time.Minute)
			var le *LimitError
			switch {
			case err == nil:
				mu.Lock()
				releases, keys = append(releases, release), append(keys, h)
				mu.Unlock()
			case !errors.As(err, &le) || le.Held != limit:
				t.Errorf("Reserve = %v, want a slot or a LimitError at %d", err, limit)
			}
		}()
	}
	wg.Wait()
	if len(releases) != limit {
		t.Fatalf("%d concurrent openers on two replicas took %d slots, want %d", openers, len(releases), limit)
	}
	if _, err := replicas[0].Reserve(ctx, "anonymous", KeyOf(Handle, NewHandle()), limit, time.Minute); err != nil {
		t.Errorf("another owner's Reserve = %v, want a slot", err)
	}
	// A second first call of a record reserved already (an MCP session's
	// calls at once) takes no other slot: it is let through.
	if release, err := replicas[1].Reserve(ctx, owner, KeyOf(Handle, keys[2]), limit, time.Minute); err != nil {
		t.Errorf("Reserve at the limit for a record reserved already = %v, want it let through", err)
	} else {
		release()
	}

	// The first opener gave up: its slot is free. The second wrote its
	// record: its slot stays taken after the release.
	releases[0]()
	if _, err := replicas[1].Create(ctx, Handle, keys[1], Record{Owner: owner, WorkerID: "w1", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	releases[1]()
	if _, err := replicas[1].Reserve(ctx, owner, KeyOf(Handle, NewHandle()), limit, time.Minute); err != nil {
		t.Fatalf("Reserve after an opener gave up = %v, want its slot", err)
	}
	if _, err := replicas[0].Reserve(ctx, owner, KeyOf(Handle, NewHandle()), limit, time.Minute); !errors.Is(err, ErrLimit) {
		t.Fatalf("Reserve with a bound record and two reservations = %v, want ErrLimit", err)
	}
	// The bound record's session is given back (idle, reclaimed, lost):
	// its slot is free again, on the other replica too.
	if _, err := replicas[1].Modify(ctx, Handle, keys[1], func(r *Record) bool { r.WorkerID, r.SessionID = "", ""; return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := replicas[0].Reserve(ctx, owner, KeyOf(Handle, NewHandle()), limit, time.Minute); err != nil {
		t.Errorf("Reserve after the bound record was released = %v, want its slot", err)
	}
}

// TestReserveLapses: a reservation never released (its gateway died)
// frees its slot at its deadline.
func TestReserveLapses(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()
	if _, err := s.Reserve(ctx, "anonymous", KeyOf(Handle, NewHandle()), 1, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, "anonymous", KeyOf(Handle, NewHandle()), 1, time.Minute); !errors.Is(err, ErrLimit) {
		t.Fatalf("second Reserve at limit 1 = %v, want ErrLimit", err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		_, err := s.Reserve(ctx, "anonymous", KeyOf(Handle, NewHandle()), 1, time.Minute)
		if err != nil && !errors.Is(err, ErrLimit) {
			t.Fatalf("Reserve after the first reservation's deadline = %v, want a slot", err)
		}
		if err != nil {
			return fmt.Errorf("Reserve after the first reservation's deadline = %w, want a slot", err)
		}
		return nil
	})
}
