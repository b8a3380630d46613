// Package kvmirror keeps an in-memory map current with a JetStream KV bucket.
package kvmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// Options say what a mirror holds and how it follows the bucket.
type Options[T any] struct {
	// Filter selects the keys to mirror ("id.*"); every key when empty.
	Filter string
	// Decode turns a stored value into T. A value it refuses is logged and
	// left out (its key is dropped from the mirror); with [ErrSkip], quietly.
	Decode func(key string, val []byte) (T, error)
	// OnChange, when set, is called on the mirror's goroutine after each
	// change of the map: ok false when key left it (deleted, purged, or no
	// longer listed after a reconnect). A re-listing calls it again for
	// every key it lists.
	OnChange func(key string, val T, ok bool)
	// Resync, when positive, lists the bucket again this often, a safety
	// net besides the re-listing after every NATS reconnect.
	Resync time.Duration
	// Discard, when set, is called with every value the mirror lets go
	// (replaced, deleted, dropped, refused as older, and all of them at
	// Close), after OnChange and outside the mirror's lock: to zero a
	// secret, say.
	Discard func(val T)
	// Expired, when set, tells values that count as gone although the
	// bucket did not announce it (past a TTL): reads leave them out, and
	// every Sweep (when positive) drops them.
	Expired func(val T) bool
	Sweep   time.Duration
	// Delivered, when set, is called on the mirror's goroutine with the
	// revision of every entry the watch delivered, mirrored or not, once
	// it is applied.
	Delivered func(rev uint64)
	// Log receives the values Decode refuses and the watch's failures;
	// slog.Default() when nil.
	Log *slog.Logger
}

// ErrSkip from Decode leaves a key out of the mirror without a log line.
var ErrSkip = errors.New("not mirrored")

// Mirror is a map that follows a bucket: a watch applies every put and
// delete within its delivery time (milliseconds on one NATS). After a NATS
// reconnect, when the watch ends, and every Resync, it watches again
// (reopening the bucket if it is gone), applies what changed meanwhile and
// drops the keys the new watch does not list; until then it keeps what it
// had. When the bucket is reopened (by anyone, see
// [kvbucket.Bucket.OnReopen]) it starts empty and lists it again. Its
// methods are safe for concurrent use.
type Mirror[T any] struct {
	b    *kvbucket.Bucket
	opt  Options[T]
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}

	rewatch chan struct{}

	mu      sync.RWMutex
	items   map[string]item[T]
	gen     uint64 // the watch generation: a re-listing drops older items
	listing bool   // the current watch's initial values are arriving
}

type item[T any] struct {
	rev uint64
	gen uint64
	val T
}

// New starts a mirror of b and returns it once it holds the bucket's
// current values: ctx bounds that first load only. The mirror then follows
// the bucket until Close.
func New[T any](ctx context.Context, b *kvbucket.Bucket, opt Options[T]) (*Mirror[T], error) {
	if opt.Filter == "" {
		opt.Filter = jetstream.AllKeys
	}
	m := &Mirror[T]{b: b, opt: opt, log: opt.Log, items: make(map[string]item[T]),
		done: make(chan struct{}), rewatch: make(chan struct{}, 1)}
	if m.log == nil {
		m.log = slog.Default()
	}
	wctx, cancel := context.WithCancel(context.Background())
	unhook := b.OnReopen(m.Reset)
	stop := func() { unhook(); cancel() }
	m.stop = stop
	w, err := m.watch(wctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("watch kv bucket %s: %w", b.Name(), err)
	}
	ready := make(chan struct{})
	go m.run(wctx, w, ready)
	select {
	case <-ready:
		return m, nil
	case <-ctx.Done():
		m.Close()
		return nil, fmt.Errorf("load kv bucket %s: %w", b.Name(), ctx.Err())
	case <-m.done: // the connection closed
		m.Close()
		return nil, fmt.Errorf("load kv bucket %s: the watch ended before every value arrived", b.Name())
	}
}

// watch starts a watch (current values first) as a new generation. The
// watch lasts until ctx ends or it is stopped.
func (m *Mirror[T]) watch(ctx context.Context) (*watcher, error) {
	wctx, cancel := context.WithCancel(ctx) // the subscription ends with it
	var w jetstream.KeyWatcher
	err := m.b.Do(ctx, func(kv jetstream.KeyValue) (err error) {
		w, err = kv.Watch(wctx, m.opt.Filter)
		return err
	})
	if err != nil {
		cancel()
		return nil, err
	}
	m.mu.Lock()
	m.gen++
	m.listing = true
	m.mu.Unlock()
	return &watcher{KeyWatcher: w, cancel: cancel}, nil
}

type watcher struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (w *watcher) stop() {
	_ = w.Stop()
	w.cancel()
}

// run applies the bucket's changes until ctx ends; ready is closed at the
// end of the first initial values.
func (m *Mirror[T]) run(ctx context.Context, w *watcher, ready chan struct{}) {
	defer close(m.done)
	nc := m.b.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	var resync, sweep <-chan time.Time
	if m.opt.Resync > 0 {
		t := time.NewTicker(m.opt.Resync)
		defer t.Stop()
		resync = t.C
	}
	if m.opt.Expired != nil && m.opt.Sweep > 0 {
		t := time.NewTicker(m.opt.Sweep)
		defer t.Stop()
		sweep = t.C
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if w == nil {
			var err error
			if w, err = m.watch(ctx); err != nil {
				if nc.IsClosed() {
					break // for good: nothing to follow any more
				}
				if ctx.Err() == nil {
					m.log.Warn("kv mirror: watch failed; serving the last values seen", "bucket", m.b.Name(), "err", err, "retry_in", backoff.String())
				}
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-reconnected:
			w.stop()
			w = nil
		case <-m.rewatch:
			w.stop()
			w = nil
		case <-resync:
			w.stop()
			w = nil
		case <-sweep:
			m.sweep()
			continue
		case e, ok := <-w.Updates():
			if !ok {
				w.stop()
				w = nil
				continue
			}
			if m.apply(e) && ready != nil {
				close(ready)
				ready = nil
			}
			if e != nil && m.opt.Delivered != nil {
				m.opt.Delivered(e.Revision())
			}
		}
	}
	if w != nil {
		w.stop()
	}
}

// apply applies one watch entry; nil marks the end of the initial values,
// when the keys the watch did not list are dropped. It reports whether e
// was that marker.
func (m *Mirror[T]) apply(e jetstream.KeyValueEntry) bool {
	if e == nil {
		gone := map[string]T{}
		m.mu.Lock()
		for k, it := range m.items {
			if it.gen != m.gen {
				delete(m.items, k)
				gone[k] = it.val
			}
		}
		m.listing = false
		m.mu.Unlock()
		for k, v := range gone {
			m.changed(k, *new(T), false)
			m.discard(v)
		}
		return true
	}
	k := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		m.drop(k)
		return false
	}
	v, err := m.opt.Decode(k, e.Value())
	if errors.Is(err, ErrSkip) {
		m.drop(k)
		return false
	}
	if err != nil {
		m.log.Warn("kv mirror: skip an unreadable value", "bucket", m.b.Name(), "key", k, "err", err)
		m.drop(k)
		return false
	}
	if old, taken := m.put(k, e.Revision(), v, true); taken {
		m.changed(k, v, true)
		m.discard(old...)
	} else {
		m.discard(v)
	}
	return false
}

// put stores v under k unless the mirror has k at rev or newer. A
// watch's initial value (listed) replaces what an earlier watch left
// whatever its revision, since the bucket may have been made again,
// counting revisions from 1. It returns the value it replaced, if any.
func (m *Mirror[T]) put(k string, rev uint64, v T, listed bool) (replaced []T, taken bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.items[k]
	if ok && old.rev >= rev && !(listed && m.listing && old.gen != m.gen) {
		return nil, false
	}
	m.items[k] = item[T]{rev: rev, gen: m.gen, val: v}
	if ok {
		replaced = []T{old.val}
	}
	return replaced, true
}

func (m *Mirror[T]) drop(k string) {
	m.mu.Lock()
	old, ok := m.items[k]
	delete(m.items, k)
	m.mu.Unlock()
	if ok {
		m.changed(k, *new(T), false)
		m.discard(old.val)
	}
}

func (m *Mirror[T]) discard(vals ...T) {
	if m.opt.Discard != nil {
		for _, v := range vals {
			m.opt.Discard(v)
		}
	}
}

// take empties the map (all of it, or the values expired says) and
// returns what it held.
func (m *Mirror[T]) take(expired func(T) bool) []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []T
	for k, it := range m.items {
		if expired == nil || expired(it.val) {
			delete(m.items, k)
			out = append(out, it.val)
		}
	}
	return out
}

func (m *Mirror[T]) changed(k string, v T, ok bool) {
	if m.opt.OnChange != nil {
		m.opt.OnChange(k, v, ok)
	}
}

// Remember puts a value the caller just wrote at rev into the mirror,
// unless it already has that key at rev or newer, so that the writer reads
// its own write before the watch delivers it. OnChange is not called.
func (m *Mirror[T]) Remember(k string, rev uint64, v T) {
	if old, taken := m.put(k, rev, v, false); taken {
		m.discard(old...)
	} else {
		m.discard(v)
	}
}

// Get returns the value of k.
func (m *Mirror[T]) Get(k string) (T, bool) {
	v, _, ok := m.Lookup(k)
	return v, ok
}

// Lookup returns the value of k with its revision.
func (m *Mirror[T]) Lookup(k string) (v T, rev uint64, ok bool) {
	m.mu.RLock()
	it, ok := m.items[k]
	m.mu.RUnlock()
	if !ok || m.expired(it.val) {
		return v, 0, false
	}
	return it.val, it.rev, true
}

func (m *Mirror[T]) expired(v T) bool { return m.opt.Expired != nil && m.opt.Expired(v) }

// Range calls f for each key (in no order) until f returns false. f must
// not call the mirror's methods.
func (m *Mirror[T]) Range(f func(k string, rev uint64, v T) bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k, it := range m.items {
		if !m.expired(it.val) && !f(k, it.rev, it.val) {
			return
		}
	}
}

// All returns a copy of the map.
func (m *Mirror[T]) All() map[string]T {
	out := make(map[string]T)
	m.Range(func(k string, _ uint64, v T) bool { out[k] = v; return true })
	return out
}

// Len is the number of mirrored keys.
func (m *Mirror[T]) Len() int {
	n := 0
	m.Range(func(string, uint64, T) bool { n++; return true })
	return n
}

// Forget drops k until the watch brings it again (the caller learned that
// the mirror's value is stale). OnChange is not called.
func (m *Mirror[T]) Forget(k string) {
	m.mu.Lock()
	old, ok := m.items[k]
	delete(m.items, k)
	m.mu.Unlock()
	if ok {
		m.discard(old.val)
	}
}

// Reset empties the mirror and watches the bucket again: for a bucket
// made anew. OnChange is not called.
func (m *Mirror[T]) Reset() {
	m.discard(m.take(nil)...)
	m.Rewatch()
}

// sweep drops the expired values.
func (m *Mirror[T]) sweep() { m.discard(m.take(m.expired)...) }

// Rewatch makes the mirror watch the bucket again (after the caller
// reopened it, say), keeping its values until the new watch lists them.
func (m *Mirror[T]) Rewatch() {
	select {
	case m.rewatch <- struct{}{}:
	default:
	}
}

// Close stops following the bucket, waits for the mirror's goroutine and
// empties the map (Discard gets every value).
func (m *Mirror[T]) Close() {
	m.stop()
	<-m.done
	m.discard(m.take(nil)...)
}
