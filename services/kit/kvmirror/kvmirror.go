// Package kvmirror keeps an in-memory map current with a JetStream KV bucket.
package kvmirror

import (
	"context"
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
	// left out (its key is dropped from the mirror).
	Decode func(key string, val []byte) (T, error)
	// OnChange, when set, is called on the mirror's goroutine after each
	// change of the map: ok false when key left it (deleted, purged, or no
	// longer listed after a reconnect).
	OnChange func(key string, val T, ok bool)
	// Resync, when positive, lists the bucket again this often, a safety
	// net besides the re-listing after every NATS reconnect.
	Resync time.Duration
	// Log receives the values Decode refuses and the watch's failures;
	// slog.Default() when nil.
	Log *slog.Logger
}

// Mirror is a map that follows a bucket: a watch applies every put and
// delete within its delivery time (milliseconds on one NATS). After a NATS
// reconnect, when the watch ends, and every Resync, it watches again
// (reopening the bucket if it is gone), applies what changed meanwhile and
// drops the keys the new watch does not list; until then it keeps what it
// had. Its methods are safe for concurrent use.
type Mirror[T any] struct {
	b    *kvbucket.Bucket
	opt  Options[T]
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}

	rewatch chan struct{}

	mu    sync.RWMutex
	items map[string]item[T]
	gen   uint64 // the watch generation: a re-listing drops older items
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
	wctx, stop := context.WithCancel(context.Background())
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
	case <-m.done:
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
	var resync <-chan time.Time
	if m.opt.Resync > 0 {
		t := time.NewTicker(m.opt.Resync)
		defer t.Stop()
		resync = t.C
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if w == nil {
			var err error
			if w, err = m.watch(ctx); err != nil {
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
		var gone []string
		m.mu.Lock()
		for k, it := range m.items {
			if it.gen != m.gen {
				delete(m.items, k)
				gone = append(gone, k)
			}
		}
		m.mu.Unlock()
		for _, k := range gone {
			m.changed(k, *new(T), false)
		}
		return true
	}
	k := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		m.drop(k)
		return false
	}
	v, err := m.opt.Decode(k, e.Value())
	if err != nil {
		m.log.Warn("kv mirror: skip an unreadable value", "bucket", m.b.Name(), "key", k, "err", err)
		m.drop(k)
		return false
	}
	if m.put(k, e.Revision(), v, true) {
		m.changed(k, v, true)
	}
	return false
}

// put stores v under k unless the mirror has k at rev or newer; in a
// watch's entries (listed) the older item then counts as listed.
func (m *Mirror[T]) put(k string, rev uint64, v T, listed bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.items[k]; ok && old.rev >= rev {
		if listed {
			old.gen = m.gen
			m.items[k] = old
		}
		return false
	}
	m.items[k] = item[T]{rev: rev, gen: m.gen, val: v}
	return true
}

func (m *Mirror[T]) drop(k string) {
	m.mu.Lock()
	_, ok := m.items[k]
	delete(m.items, k)
	m.mu.Unlock()
	if ok {
		m.changed(k, *new(T), false)
	}
}

func (m *Mirror[T]) changed(k string, v T, ok bool) {
	if m.opt.OnChange != nil {
		m.opt.OnChange(k, v, ok)
	}
}

// Remember puts a value the caller just wrote at rev into the mirror,
// unless it already has that key at rev or newer, so that the writer reads
// its own write before the watch delivers it. OnChange is not called.
func (m *Mirror[T]) Remember(k string, rev uint64, v T) { m.put(k, rev, v, false) }

// Get returns the value of k.
func (m *Mirror[T]) Get(k string) (T, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	it, ok := m.items[k]
	return it.val, ok
}

// All returns a copy of the map.
func (m *Mirror[T]) All() map[string]T {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]T, len(m.items))
	for k, it := range m.items {
		out[k] = it.val
	}
	return out
}

// Len is the number of mirrored keys.
func (m *Mirror[T]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.items)
}

// Rewatch makes the mirror watch the bucket again (after the caller
// reopened it, say), keeping its values until the new watch lists them.
func (m *Mirror[T]) Rewatch() {
	select {
	case m.rewatch <- struct{}{}:
	default:
	}
}

// Close stops following the bucket and waits for the mirror's goroutine.
func (m *Mirror[T]) Close() {
	m.stop()
	<-m.done
}
