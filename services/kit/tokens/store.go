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

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/kvmirror"
)

// Mirror upkeep: how often the mirror reloads the whole bucket anyway
// (it does after every NATS reconnect too), and how long Open waits for
// the first load.
const (
	resyncEvery = 5 * time.Minute
	loadTimeout = 10 * time.Second
)

// Store is the token bucket with its in-memory mirror. It is safe for
// concurrent use. Close it when done.
type Store struct {
	b      *kvbucket.Bucket
	log    *slog.Logger
	mirror *kvmirror.Mirror[mirrored] // by key "id.<id>"

	ctx  context.Context // ends with Close
	stop context.CancelFunc

	touchMu sync.Mutex
	touched map[string]time.Time // last-use writes started, by id

	bgMu   sync.Mutex
	closed bool
	bg     sync.WaitGroup // last-use writes
}

// mirrored is one token of the mirror, with its secret's digest decoded.
type mirrored struct {
	rec record
	sum [32]byte
}

// Open creates the bucket of prefix (see [Bucket]) when it is missing,
// loads every token into the mirror and keeps the mirror current until
// Close: it follows a KV watch, and reloads the whole bucket after a NATS
// reconnect, when the watch ends, and every few minutes. While NATS is
// unreachable, Verify answers from the last state it saw.
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Store, error) {
	b, err := kvbucket.Open(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      Bucket(prefix),
			Description: "Sovereign API tokens (secrets as SHA-256 digests only)",
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "API tokens live",
		AsIs:  true,
	})
	if err != nil {
		return nil, err
	}
	s := &Store{
		b:       b,
		log:     slog.Default().With("component", "tokens"),
		touched: make(map[string]time.Time),
	}
	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	s.mirror, err = kvmirror.New(lctx, b, kvmirror.Options[mirrored]{
		Filter: "id.*",
		Decode: func(_ string, val []byte) (mirrored, error) { return decode(val) },
		Resync: resyncEvery,
		Log:    s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("load tokens: %w", err)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s, nil
}

func (s *Store) bucket() jetstream.KeyValue { return s.b.KV() }

// BucketName returns the KV bucket the store uses.
func (s *Store) BucketName() string { return s.b.Name() }

// Close stops the mirror and waits for pending last-use writes.
func (s *Store) Close() {
	s.bgMu.Lock()
	s.closed = true
	s.bgMu.Unlock()
	s.stop()
	s.mirror.Close()
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

// load reads every token of the bucket (for lists: not the mirror). It asks
// the bucket's stream which token keys exist and reads each one, so that a
// record written meanwhile cannot hide another (as it may from a watch's
// initial values).
func (s *Store) load(ctx context.Context, kv jetstream.KeyValue) (map[string]mirrored, error) {
	keys, _, err := s.b.Keys(ctx, "id.*")
	if err != nil {
		return nil, fmt.Errorf("list tokens of bucket %s: %w", s.b.Name(), err)
	}
	out := make(map[string]mirrored)
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list tokens of bucket %s: read %s: %w", s.b.Name(), key, err)
		}
		id := strings.TrimPrefix(key, "id.")
		mt, err := decode(e.Value())
		if err != nil {
			s.log.Warn("skip unreadable token record", "id", id, "err", err)
			continue
		}
		out[id] = mt
	}
	return out, nil
}

func decode(data []byte) (mirrored, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return mirrored{}, err
	}
	return digested(r)
}

// digested is r with its secret's digest decoded.
func digested(r record) (mirrored, error) {
	mt := mirrored{rec: r}
	sum, err := hex.DecodeString(r.SecretSHA256)
	if err != nil || len(sum) != len(mt.sum) {
		return mirrored{}, errors.New("secret digest is not 64 hex digits")
	}
	copy(mt.sum[:], sum)
	return mt, nil
}

// lookup returns token id from the mirror.
func (s *Store) lookup(id string) (mirrored, bool) { return s.mirror.Get(idKey(id)) }

// remember puts a record this store just wrote into the mirror, unless the
// mirror already has a newer revision.
func (s *Store) remember(rev uint64, r record) {
	if mt, err := digested(r); err == nil {
		s.mirror.Remember(idKey(r.ID), rev, mt)
	}
}
