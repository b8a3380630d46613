// Package state keeps the gateway's routing state in a NATS KV bucket, so
// that every gateway replica can serve every request: MCP sessions
// (Mcp-Session-Id) and 2026 session handles, each bound to its caller and to
// the browser session (worker and session id) that serves it.
//
// Keys are "mcp.<sha256(session id)>" and "handle.<sha256(handle)>": the
// bucket never holds a usable session id or handle, only their digests.
// Entries expire after the bucket TTL without a write; use refreshes them.
package state

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/kvmirror"
)

// DefaultBucket is the KV bucket the gateway uses.
const DefaultBucket = "sov_sessions"

// Kind says what a record is for.
type Kind string

// Record kinds (the first token of their keys).
const (
	MCP    Kind = "mcp"
	Handle Kind = "handle"
)

// Errors of the store.
var (
	// ErrNotFound means no live record: never created, or expired.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the record changed since it was read.
	ErrConflict = errors.New("changed concurrently")
)

// Record is one MCP session or handle.
type Record struct {
	// Owner is the caller identity the record is bound to.
	Owner string `json:"owner"`
	// Terminated marks an MCP session ended with DELETE.
	Terminated bool `json:"terminated,omitempty"`
	// WorkerID and SessionID locate the browser session; both are empty
	// until the first browser tool call and after the session was lost.
	WorkerID  string    `json:"worker_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Created   time.Time `json:"created"`
	Touched   time.Time `json:"touched"`
	// Used is when a call last used the record's browser session, or its
	// client last had a stream open, as the gateways write it back (every
	// few seconds, not per call); zero until then.
	Used time.Time `json:"used,omitzero"`
	// Released says why the record's browser session was given back (idle,
	// or reclaimed for another), until a call binds a new one.
	Released string `json:"released,omitempty"`
}

// LastUse is when the record was last known in use.
func (r Record) LastUse() time.Time {
	if r.Used.After(r.Touched) {
		return r.Used
	}
	return r.Touched
}

// Bound reports whether a browser session serves the record.
func (r Record) Bound() bool { return r.WorkerID != "" && r.SessionID != "" }

// Entry is a record with the revision it was read at.
type Entry struct {
	Kind     Kind
	ID       string
	Revision uint64
	Record
}

// Store is the KV bucket, read through a local mirror: a watch on the whole
// bucket keeps the records this replica has seen current, so the two reads
// of every tool call (session check, routing) cost a map lookup instead of a
// JetStream round trip. A miss, an entry older than the TTL, or a write
// conflict goes to the bucket. A change made on another replica reaches the
// mirror within the watch's delivery time (milliseconds on one NATS).
type Store struct {
	b      *kvbucket.Bucket
	ttl    time.Duration
	mirror *kvmirror.Mirror[Record]
	unhook func()

	mu      sync.Mutex
	waiters map[string][]chan struct{} // see Ended

	seenMu sync.Mutex
	seen   uint64        // the newest revision the mirror's watch delivered
	seenCh chan struct{} // closed when seen grows
}

// Open creates the bucket if it is missing (or updates its TTL) and returns
// the store. Records expire ttl after their last write.
//
// The bucket is on file storage (replicated on a NATS cluster as the other
// buckets are), so a NATS restart keeps every session. Should it be gone
// all the same (a new NATS), the store creates it again (on the next failed
// operation, and when the mirror's watch ends) and starts a new watch with
// an empty mirror, so the gateway recovers by itself. A memory bucket left
// by an older gateway is replaced.
func Open(ctx context.Context, nc *nats.Conn, bucket string, ttl time.Duration) (*Store, error) {
	if bucket == "" {
		bucket = DefaultBucket
	}
	b, err := kvbucket.Open(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "Sovereign gateway: MCP sessions and session handles → browser sessions",
			TTL:         ttl,
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "the gateway keeps session routing",
		// Made by an older gateway, in memory: a bucket cannot change its
		// storage, and a memory one is lost at every NATS restart anyway.
		ReplaceMemory: true,
	})
	if err != nil {
		return nil, err
	}
	st := &Store{b: b, ttl: ttl, waiters: make(map[string][]chan struct{}), seenCh: make(chan struct{})}
	// A new bucket counts revisions from 1 again.
	st.unhook = b.OnReopen(func() { st.seenMu.Lock(); st.seen = 0; st.seenMu.Unlock() })
	// Every record, not only updates: the mirror starts with every live
	// record, so that the reaper and the per-caller counts see the sessions
	// of the whole fleet.
	st.mirror, err = kvmirror.New(ctx, b, kvmirror.Options[Record]{
		Decode: func(k string, val []byte) (Record, error) {
			var r Record
			if !ValidKey(k) {
				return r, kvmirror.ErrSkip // a caller's reservations (limit.go)
			}
			return r, json.Unmarshal(val, &r)
		},
		OnChange: func(k string, r Record, ok bool) {
			if !ok || r.Terminated {
				st.end(k)
			}
		},
		// The watch does not announce expiries.
		Expired:   func(r Record) bool { return time.Since(r.Touched) >= ttl },
		Sweep:     min(max(ttl/4, time.Second), time.Minute),
		Delivered: st.noteSeen,
	})
	if err != nil {
		st.unhook()
		return nil, err
	}
	return st, nil
}

// retry runs op, and once more after re-creating the bucket when op failed
// for another reason than the record's state (a NATS restart lost the
// bucket); the mirror then starts over.
func (s *Store) retry(ctx context.Context, op func(jetstream.KeyValue) error) error {
	return s.b.Do(ctx, op)
}

// Close stops the mirror's watch.
func (s *Store) Close() {
	s.unhook()
	s.mirror.Close()
}

// remember stores a record unless the mirror already has a newer revision.
// A terminated record ends its waiters at once (the watch brings it
// too, but the mirror has it already then).
func (s *Store) remember(k string, rev uint64, r Record) {
	s.mirror.Remember(k, rev, r)
	if r.Terminated {
		s.end(k)
	}
}

func (s *Store) forget(k string) { s.mirror.Forget(k) }

type cached struct {
	rev uint64
	rec Record
}

// lookup returns a mirrored record that has not outlived the TTL.
func (s *Store) lookup(k string) (cached, bool) {
	r, rev, ok := s.mirror.Lookup(k)
	return cached{rev: rev, rec: r}, ok
}

// TTL returns how long a record lives without a write.
func (s *Store) TTL() time.Duration { return s.ttl }

// Ping checks that the bucket answers; a bucket that a NATS restart lost
// is created again first, so readiness comes back with NATS rather than
// when the mirror's watch notices.
func (s *Store) Ping(ctx context.Context) error {
	err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		_, err := kv.Status(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("kv bucket %s: %w", s.b.Name(), err)
	}
	return nil
}

func key(kind Kind, id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(kind) + "." + hex.EncodeToString(sum[:])
}

// Get reads a record, from the mirror when it has it; ErrNotFound when
// there is none.
func (s *Store) Get(ctx context.Context, kind Kind, id string) (*Entry, error) {
	k := key(kind, id)
	if c, ok := s.lookup(k); ok {
		return &Entry{Kind: kind, ID: id, Revision: c.rev, Record: c.rec}, nil
	}
	return s.load(ctx, kind, id)
}

// load reads a record from the bucket and refreshes the mirror.
func (s *Store) load(ctx context.Context, kind Kind, id string) (*Entry, error) {
	k := key(kind, id)
	var e jetstream.KeyValueEntry
	err := s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
		e, err = kv.Get(ctx, k)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s record: %w", kind, err)
	}
	out := &Entry{Kind: kind, ID: id, Revision: e.Revision()}
	if err := json.Unmarshal(e.Value(), &out.Record); err != nil {
		return nil, fmt.Errorf("decode %s record: %w", kind, err)
	}
	s.remember(k, out.Revision, out.Record)
	return out, nil
}

// Create stores a new record; ErrConflict when one exists.
func (s *Store) Create(ctx context.Context, kind Kind, id string, r Record) (*Entry, error) {
	now := time.Now().UTC()
	r.Created, r.Touched = now, now
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", kind, err)
	}
	var rev uint64
	err = s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
		rev, err = kv.Create(ctx, key(kind, id), data)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, ErrConflict
	}
	if err != nil {
		return nil, fmt.Errorf("create %s record: %w", kind, err)
	}
	s.remember(key(kind, id), rev, r)
	return &Entry{Kind: kind, ID: id, Revision: rev, Record: r}, nil
}

// Update writes e's record if it is still at e's revision (ErrConflict
// otherwise) and returns the new entry. It refreshes the TTL.
func (s *Store) Update(ctx context.Context, e *Entry) (*Entry, error) {
	k := key(e.Kind, e.ID)
	rev, r, err := s.write(ctx, k, e.Revision, e.Record)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("%s %w", e.Kind, err)
	}
	return &Entry{Kind: e.Kind, ID: e.ID, Revision: rev, Record: r}, nil
}

// Modify reads the record, applies fn and writes it back, retrying on
// conflicts. fn returns false to leave the record unchanged.
func (s *Store) Modify(ctx context.Context, kind Kind, id string, fn func(*Record) bool) (*Entry, error) {
	for range 8 {
		e, err := s.Get(ctx, kind, id)
		if err != nil {
			return nil, err
		}
		if !fn(&e.Record) {
			return e, nil
		}
		out, err := s.Update(ctx, e)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update %s record: %w too often", kind, ErrConflict)
}

// Slot is a record as the mirror holds it, addressed by its key (the
// mirror has digests, never the session ids and handles themselves).
type Slot struct {
	Key      string
	Kind     Kind
	Revision uint64
	Record
}

// Bound lists the mirrored records that hold a browser session.
func (s *Store) Bound() []Slot {
	var out []Slot
	s.mirror.Range(func(k string, rev uint64, r Record) bool {
		if r.Bound() && !r.Terminated {
			kind, _, _ := strings.Cut(k, ".")
			out = append(out, Slot{Key: k, Kind: Kind(kind), Revision: rev, Record: r})
		}
		return true
	})
	return out
}

// KeyOf is the key of kind's record id (what Slot.Key holds).
func KeyOf(kind Kind, id string) string { return key(kind, id) }

// Release clears the browser session of slot's record, noting why for the
// next call to say, if the record is still at slot's revision; false when
// it changed meanwhile (someone used it, or another replica released it
// first).
func (s *Store) Release(ctx context.Context, slot Slot, why string) (bool, error) {
	r := slot.Record
	r.WorkerID, r.SessionID, r.Released = "", "", why
	_, _, err := s.write(ctx, slot.Key, slot.Revision, r)
	if errors.Is(err, ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// MarkUsed records that the record of key was in use at t (unless a later
// use is recorded already).
func (s *Store) MarkUsed(ctx context.Context, k string, t time.Time) error {
	for range 4 {
		c, ok := s.lookup(k)
		if !ok {
			return nil // gone, or never seen here: nothing to keep alive
		}
		if !c.rec.Used.Before(t) {
			return nil
		}
		r := c.rec
		r.Used = t.UTC()
		if _, _, err := s.write(ctx, k, c.rev, r); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return nil
}

// write stores r under k if k is at rev (ErrConflict otherwise) and
// returns the new revision and the record as written (TTL refreshed).
func (s *Store) write(ctx context.Context, k string, rev uint64, r Record) (uint64, Record, error) {
	r.Touched = time.Now().UTC()
	data, err := json.Marshal(r)
	if err != nil {
		return 0, r, fmt.Errorf("encode record: %w", err)
	}
	var next uint64
	err = s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
		next, err = kv.Update(ctx, k, data, rev)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
		s.forget(k)
		return 0, r, ErrConflict
	}
	if err != nil {
		return 0, r, fmt.Errorf("update record: %w", err)
	}
	s.remember(k, next, r)
	return next, r, nil
}

// Ended returns a channel that is closed when the record is terminated or
// deleted (by any replica), and is never closed otherwise. It is served by
// the mirror's watch, so it costs no consumer of its own. Watching stops when
// ctx ends.
func (s *Store) Ended(ctx context.Context, kind Kind, id string) (<-chan struct{}, error) {
	k := key(kind, id)
	ch := make(chan struct{})
	s.mu.Lock()
	s.waiters[k] = append(s.waiters[k], ch)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.waiters[k]
		for i, c := range list {
			if c == ch {
				s.waiters[k] = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(s.waiters[k]) == 0 {
			delete(s.waiters, k)
		}
	})
	// It may have ended before the wait began.
	e, err := s.load(ctx, kind, id)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && e.Terminated):
		s.end(k)
	case err != nil:
		return nil, err
	}
	return ch, nil
}

// end closes the channels that wait for k to end.
func (s *Store) end(k string) {
	s.mu.Lock()
	list := s.waiters[k]
	delete(s.waiters, k)
	s.mu.Unlock()
	for _, c := range list {
		close(c)
	}
}

var (
	tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9_-]{8,200}$`)
)

// HandlePrefix starts every session handle.
const HandlePrefix = "sov_"

func token() string {
	b := make([]byte, 20) // 160 bits
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return strings.ToLower(tokenEncoding.EncodeToString(b))
}

// NewSessionID returns a fresh, unguessable MCP session id.
func NewSessionID() string { return "mcp-" + token() }

// NewHandle returns a fresh, unguessable session handle.
func NewHandle() string { return HandlePrefix + token() }

// ValidID reports whether id can be an MCP session id or a handle (the
// characters a header or a model can carry without surprises).
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ValidHandle reports whether h looks like a handle NewHandle made.
func ValidHandle(h string) bool { return strings.HasPrefix(h, HandlePrefix) && ValidID(h) }
