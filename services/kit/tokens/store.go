package tokens

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Mirror upkeep: how often the store checks for a NATS reconnect, and
// how often it reloads the whole bucket anyway.
const (
	reconnectPoll = time.Second
	resyncEvery   = 5 * time.Minute
	loadTimeout   = 10 * time.Second
)

// Store is the token bucket with its in-memory mirror. It is safe for
// concurrent use. Close it when done.
type Store struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg jetstream.KeyValueConfig
	log *slog.Logger

	kvMu sync.Mutex
	kv   jetstream.KeyValue

	ctx  context.Context // ends with Close
	stop context.CancelFunc
	done chan struct{} // the mirror's goroutine ended

	mu     sync.RWMutex
	mirror map[string]mirrored // by id

	touchMu sync.Mutex
	touched map[string]time.Time // last-use writes started, by id

	bgMu   sync.Mutex
	closed bool
	bg     sync.WaitGroup // last-use writes
}

// mirrored is one token of the mirror, with its secret's digest decoded.
type mirrored struct {
	rev uint64
	rec record
	sum [32]byte
}

// Open creates the bucket of prefix (see [Bucket]) when it is missing,
// loads every token into the mirror and keeps the mirror current until
// Close: it follows a KV watch, and reloads the whole bucket after a NATS
// reconnect, when the watch ends, and every few minutes. While NATS is
// unreachable, Verify answers from the last state it saw.
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Store{
		nc: nc, js: js,
		cfg: jetstream.KeyValueConfig{
			Bucket:      Bucket(prefix),
			Description: "Sovereign API tokens (secrets as SHA-256 digests only)",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    config.JetStreamReplicas(),
		},
		log:     slog.Default().With("component", "tokens"),
		mirror:  make(map[string]mirrored),
		touched: make(map[string]time.Time),
		done:    make(chan struct{}),
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	w, fresh, err := s.watch(ctx)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.replace(fresh)
	go s.run(w)
	return s, nil
}

// ensure creates the bucket when it is missing (an existing one is used as
// it is).
func (s *Store) ensure(ctx context.Context) error {
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, s.cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.cfg.Bucket)
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("the NATS server has JetStream off, and API tokens live in a JetStream KV bucket: "+
			"start nats-server with -js (or enable JetStream for this account): %w", err)
	}
	if err != nil {
		return fmt.Errorf("token bucket %s: %w", s.cfg.Bucket, err)
	}
	s.kvMu.Lock()
	s.kv = kv
	s.kvMu.Unlock()
	return nil
}

func (s *Store) bucket() jetstream.KeyValue {
	s.kvMu.Lock()
	defer s.kvMu.Unlock()
	return s.kv
}

// BucketName returns the KV bucket the store uses.
func (s *Store) BucketName() string { return s.cfg.Bucket }

// Close stops the mirror and waits for pending last-use writes.
func (s *Store) Close() {
	s.bgMu.Lock()
	s.closed = true
	s.bgMu.Unlock()
	s.stop()
	<-s.done
	s.bg.Wait()
}

// startBackground counts a background write, unless the store is closing.
func (s *Store) startBackground() bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closed {
		return false
	}
	s.bg.Add(1)
	return true
}

// watch starts a watch of every token and reads its initial values,
// giving up when ctx ends or after loadTimeout. The watch itself lasts
// until its stop func is called or the store closes.
func (s *Store) watch(ctx context.Context) (*watcher, map[string]mirrored, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	// The subscription ends with the context it was made with.
	wctx, stop := context.WithCancel(s.ctx)
	w, err := s.bucket().Watch(wctx, "id.*")
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("watch token bucket %s: %w", s.cfg.Bucket, err)
	}
	kw := &watcher{KeyWatcher: w, cancel: stop}
	fresh := make(map[string]mirrored)
	for {
		select {
		case <-ctx.Done():
			kw.stop()
			return nil, nil, fmt.Errorf("load tokens from bucket %s: %w", s.cfg.Bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				kw.stop()
				return nil, nil, fmt.Errorf("load tokens from bucket %s: the watch ended", s.cfg.Bucket)
			}
			if e == nil {
				return kw, fresh, nil // initial values done
			}
			apply(fresh, e, s.log)
		}
	}
}

// watcher is a KV watch with the context that keeps it alive.
type watcher struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (w *watcher) stop() {
	_ = w.Stop()
	w.cancel()
}

// load reads every token of the bucket (for lists: not the mirror). It asks
// the bucket's stream which token keys exist and reads each one, so that a
// record written meanwhile cannot hide another (as it may from a watch's
// initial values).
func (s *Store) load(ctx context.Context, kv jetstream.KeyValue) (map[string]mirrored, error) {
	stream, err := s.js.Stream(ctx, "KV_"+s.cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("list tokens of bucket %s: %w", s.cfg.Bucket, err)
	}
	pre := "$KV." + s.cfg.Bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(pre+"id.*"))
	if err != nil {
		return nil, fmt.Errorf("list tokens of bucket %s: %w", s.cfg.Bucket, err)
	}
	out := make(map[string]mirrored)
	for subject := range info.State.Subjects {
		key := strings.TrimPrefix(subject, pre)
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list tokens of bucket %s: read %s: %w", s.cfg.Bucket, key, err)
		}
		apply(out, e, s.log)
	}
	return out, nil
}

// apply puts one watch entry into m.
func apply(m map[string]mirrored, e jetstream.KeyValueEntry, log *slog.Logger) {
	id := strings.TrimPrefix(e.Key(), "id.")
	if e.Operation() != jetstream.KeyValuePut {
		delete(m, id)
		return
	}
	mt, err := decode(e.Revision(), e.Value())
	if err != nil {
		log.Warn("skip unreadable token record", "id", id, "err", err)
		delete(m, id)
		return
	}
	if old, ok := m[id]; ok && old.rev > mt.rev {
		return
	}
	m[id] = mt
}

func decode(rev uint64, data []byte) (mirrored, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return mirrored{}, err
	}
	mt := mirrored{rev: rev, rec: r}
	sum, err := hex.DecodeString(r.SecretSHA256)
	if err != nil || len(sum) != len(mt.sum) {
		return mirrored{}, errors.New("secret digest is not 64 hex digits")
	}
	copy(mt.sum[:], sum)
	return mt, nil
}

// replace swaps the mirror for a freshly loaded one.
func (s *Store) replace(fresh map[string]mirrored) {
	s.mu.Lock()
	s.mirror = fresh
	s.mu.Unlock()
}

// remember puts a record this store just wrote into the mirror, unless the
// mirror already has a newer revision.
func (s *Store) remember(rev uint64, r record) {
	sum, err := hex.DecodeString(r.SecretSHA256)
	if err != nil || len(sum) != 32 {
		return
	}
	mt := mirrored{rev: rev, rec: r}
	copy(mt.sum[:], sum)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.mirror[r.ID]; ok && old.rev >= rev {
		return
	}
	s.mirror[r.ID] = mt
}

// run keeps the mirror current until Close.
func (s *Store) run(w *watcher) {
	defer close(s.done)
	poll := time.NewTicker(reconnectPoll)
	defer poll.Stop()
	resync := time.NewTicker(resyncEvery)
	defer resync.Stop()
	reconnects := s.nc.Stats().Reconnects
	backoff := 100 * time.Millisecond
	for s.ctx.Err() == nil {
		if w == nil {
			nw, fresh, err := s.watch(s.ctx)
			if err != nil && s.ctx.Err() == nil {
				// The bucket may be gone (a NATS without its store).
				if eerr := s.ensure(s.ctx); eerr == nil {
					nw, fresh, err = s.watch(s.ctx)
				}
			}
			if err != nil {
				if s.ctx.Err() == nil {
					s.log.Warn("token mirror: reload failed; verifying with the last tokens seen", "err", err, "retry_in", backoff.String())
				}
				select {
				case <-s.ctx.Done():
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			s.replace(fresh)
			w = nw
			reconnects = s.nc.Stats().Reconnects
		}
		if !s.follow(w, poll.C, resync.C, &reconnects) {
			w.stop()
			w = nil
		}
	}
	if w != nil {
		w.stop()
	}
}

// follow applies w's updates until Close (true), or until the watch must be
// renewed (false): it ended, NATS reconnected, or it is time to resync.
func (s *Store) follow(w *watcher, poll, resync <-chan time.Time, reconnects *uint64) bool {
	for {
		select {
		case <-s.ctx.Done():
			return true
		case <-resync:
			return false
		case <-poll:
			if n := s.nc.Stats().Reconnects; n != *reconnects {
				*reconnects = n
				return false
			}
		case e, ok := <-w.Updates():
			if !ok {
				return false
			}
			if e == nil {
				continue
			}
			s.mu.Lock()
			apply(s.mirror, e, s.log)
			s.mu.Unlock()
		}
	}
}
