package kvmirror_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/kvmirror"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually waits with kittest.Eventually until f returns nil (30 s).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

func openBucket(t *testing.T, nc *nats.Conn) *kvbucket.Bucket {
	t.Helper()
	b, err := kvbucket.Open(ctxT(t), nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{Bucket: "test_mirror", History: 1},
		Keeps:  "the test keeps numbers",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// number decodes "n.*" values as integers.
func number(_ string, val []byte) (int, error) { return strconv.Atoi(string(val)) }

func put(t *testing.T, b *kvbucket.Bucket, k, v string) uint64 {
	t.Helper()
	rev, err := b.KV().Put(ctxT(t), k, []byte(v))
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	return rev
}

func want(m *kvmirror.Mirror[int], w map[string]int) func() error {
	return func() error {
		if got := m.All(); !maps.Equal(got, w) || m.Len() != len(w) {
			return fmt.Errorf("All() = %v (Len %d), want %v", got, m.Len(), w)
		}
		return nil
	}
}

// TestMirror: the mirror holds the initial values when New returns, then
// follows puts, deletes and purges made elsewhere, leaves out keys outside
// its filter and values Decode refuses, and tells OnChange of each change.
func TestMirror(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	b := openBucket(t, natstest.Conn(t, srv))
	put(t, b, "n.one", "1")
	put(t, b, "n.two", "2")
	put(t, b, "other", "9")

	var mu sync.Mutex
	var changes []string
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{
		Filter: "n.*",
		Decode: number,
		OnChange: func(k string, v int, ok bool) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, fmt.Sprintf("%s=%d,%v", k, v, ok))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := want(m, map[string]int{"n.one": 1, "n.two": 2})(); err != nil {
		t.Fatalf("when New returns: %v", err)
	}

	// Another connection writes.
	other := openBucket(t, natstest.Conn(t, srv))
	put(t, other, "n.three", "3")
	put(t, other, "n.one", "11")
	if err := other.KV().Delete(ctxT(t), "n.two"); err != nil {
		t.Fatal(err)
	}
	put(t, other, "n.bad", "not a number")
	put(t, other, "other", "10")
	eventually(t, "the mirror follows", want(m, map[string]int{"n.one": 11, "n.three": 3}))
	if v, ok := m.Get("n.one"); !ok || v != 11 {
		t.Errorf("Get(n.one) = %d, %v; want 11, true", v, ok)
	}
	if err := other.KV().Purge(ctxT(t), "n.three"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror sees the purge", want(m, map[string]int{"n.one": 11}))

	mu.Lock()
	got := slices.Clone(changes)
	mu.Unlock()
	wantChanges := []string{"n.one=1,true", "n.two=2,true", "n.three=3,true", "n.one=11,true", "n.two=0,false", "n.three=0,false"}
	if !slices.Equal(got, wantChanges) {
		t.Errorf("OnChange calls = %q, want %q", got, wantChanges)
	}
}

// TestMirrorRemember: a value the caller wrote is readable at once, and an
// older one from the watch does not replace it.
func TestMirrorRemember(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	b := openBucket(t, natstest.Conn(t, srv))
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{Decode: number})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	rev := put(t, b, "k", "1")
	m.Remember("k", rev+1, 5) // as if the caller wrote again meanwhile
	if v, ok := m.Get("k"); !ok || v != 5 {
		t.Fatalf("Get(k) after Remember = %d, %v; want 5, true", v, ok)
	}
	put(t, b, "k2", "2") // once it arrives, k's put (older) has too
	eventually(t, "the watch delivered k2", func() error {
		if _, ok := m.Get("k2"); !ok {
			return errors.New("k2 missing")
		}
		return nil
	})
	if v, _ := m.Get("k"); v != 5 {
		t.Errorf("Get(k) = %d: an older revision from the watch replaced a newer remembered one", v)
	}
}

// TestMirrorClose: New gives up when ctx ends before the initial values;
// Close ends the mirror's goroutine and hands every value to Discard, as
// it does a replaced or deleted one.
func TestMirrorClose(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	b := openBucket(t, natstest.Conn(t, srv))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := kvmirror.New(done, b, kvmirror.Options[int]{Decode: number}); !errors.Is(err, context.Canceled) {
		t.Errorf("New with an ended ctx = %v, want context.Canceled", err)
	}
	put(t, b, "a", "1")
	put(t, b, "b", "2")
	var mu sync.Mutex
	var discarded []int
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{Decode: number, Discard: func(v int) {
		mu.Lock()
		discarded = append(discarded, v)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "a", "10")
	eventually(t, "the replaced value is discarded", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(discarded, []int{1}) {
			return fmt.Errorf("discarded %v, want [1]", discarded)
		}
		return nil
	})
	m.Close()
	mu.Lock()
	slices.Sort(discarded)
	if !slices.Equal(discarded, []int{1, 2, 10}) {
		t.Errorf("after Close, discarded %v; want [1 2 10]", discarded)
	}
	mu.Unlock()
	put(t, b, "late", "1")
	// Another mirror sees it; the closed one never does.
	m2, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{Decode: number})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, ok := m2.Get("late"); !ok {
		t.Fatal("a new mirror lacks the key")
	}
	if m.Len() != 0 {
		t.Errorf("a closed mirror applied a change: %v", m.All())
	}
}

// TestMirrorReconnect: after NATS restarts, the mirror watches again, gets
// what changed meanwhile (a put, a delete) and drops what is gone; and
// after NATS comes back without its store, the bucket is made again.
func TestMirrorReconnect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.Listening(t, dir)
	nc := natstest.Reconnecting(t, srv.URL())
	b := openBucket(t, nc)
	put(t, b, "a", "1")
	put(t, b, "b", "2")
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{Decode: number})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)

	// Changes made while this connection is away: stop the server, let
	// another connection change the bucket, then this one reconnects.
	srv.Stop()
	if err := want(m, map[string]int{"a": 1, "b": 2})(); err != nil {
		t.Errorf("while NATS is down the mirror keeps its values: %v", err)
	}
	srv.Start(dir)
	other := openBucket(t, natstest.Conn(t, srv.Server()))
	put(t, other, "c", "3")
	if err := other.KV().Delete(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror catches up after the reconnect", want(m, map[string]int{"b": 2, "c": 3}))

	// A new NATS without the store: the mirror keeps its values, makes the
	// bucket again and follows it.
	srv.Stop()
	srv.Start(t.TempDir())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror makes the bucket again", func() error {
		_, err := js.KeyValue(ctxT(t), "test_mirror")
		return err
	})
	other = openBucket(t, natstest.Conn(t, srv.Server()))
	put(t, other, "d", "4")
	eventually(t, "the mirror follows the new bucket", want(m, map[string]int{"d": 4}))
}

// TestMirrorBucketMadeAgain: a bucket deleted and made again counts
// revisions from 1: a new listing replaces values of the old bucket even
// at lower revisions, and drops keys it lacks.
func TestMirrorBucketMadeAgain(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	b := openBucket(t, natstest.Conn(t, srv))
	put(t, b, "a", "1")
	put(t, b, "b", "2")
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{Decode: number})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	nc := natstest.Conn(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctxT(t), "test_mirror"); err != nil {
		t.Fatal(err)
	}
	other := openBucket(t, nc)
	if rev := put(t, other, "b", "20"); rev != 1 {
		t.Fatalf("the new bucket's first revision is %d, want 1", rev)
	}
	m.Rewatch()
	eventually(t, "the mirror follows the new bucket", want(m, map[string]int{"b": 20}))
}

// TestMirrorSkipExpireDelivered: ErrSkip leaves a key out, Expired hides
// (and Sweep drops) values, and Delivered sees every revision, mirrored or
// not.
func TestMirrorSkipExpireDelivered(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	b := openBucket(t, natstest.Conn(t, srv))
	var mu sync.Mutex
	var last uint64
	m, err := kvmirror.New(ctxT(t), b, kvmirror.Options[int]{
		Decode: func(k string, val []byte) (int, error) {
			if k == "skip" {
				return 0, kvmirror.ErrSkip
			}
			return number(k, val)
		},
		Expired:   func(v int) bool { return v < 0 },
		Sweep:     10 * time.Millisecond,
		Delivered: func(rev uint64) { mu.Lock(); last = rev; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	put(t, b, "keep", "1")
	put(t, b, "old", "-1")
	rev := put(t, b, "skip", "2")
	eventually(t, "Delivered sees the skipped key's revision", func() error {
		mu.Lock()
		defer mu.Unlock()
		if last != rev {
			return fmt.Errorf("last delivered %d, want %d", last, rev)
		}
		return nil
	})
	if err := want(m, map[string]int{"keep": 1})(); err != nil {
		t.Error(err)
	}
	if _, ok := m.Get("old"); ok {
		t.Error("Get returned an expired value")
	}
}
