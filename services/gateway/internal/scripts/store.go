package scripts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// BucketSuffix follows the bus prefix in the scripts' KV bucket name.
const BucketSuffix = "_scripts"

// Bucket is the KV bucket of the scripts for a bus prefix: "sov_scripts"
// for the default prefix ("" or "sov"). Characters a bucket name cannot
// hold become _.
func Bucket(prefix string) string {
	return bus.BucketName(prefix, BucketSuffix)
}

// ErrNotFound means no script of that stem is stored.
var ErrNotFound = errors.New("no such script")

// Entry is a stored script.
type Entry struct {
	Stem     string
	Source   []byte
	Revision uint64
	Updated  time.Time
}

// Store keeps the scripts in a JetStream KV bucket, one key per stem, so
// that every gateway of the fleet serves the same set. It stores sources
// as they are: whether they load is the [Registry]'s business (it reports
// the ones that do not).
type Store struct {
	b *kvbucket.Bucket
}

// OpenStore creates the bucket of prefix (see [Bucket]) when it is
// missing, with the fleet's replica count.
func OpenStore(ctx context.Context, nc *nats.Conn, prefix string) (*Store, error) {
	b, err := kvbucket.Open(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:       Bucket(prefix),
			Description:  "Sovereign script tools (key: file stem, value: JavaScript source)",
			History:      1,
			MaxValueSize: MaxSource,
			Storage:      jetstream.FileStorage,
		},
		Keeps: "script tools are kept",
	})
	if err != nil {
		return nil, err
	}
	return &Store{b: b}, nil
}

func (s *Store) bucket() jetstream.KeyValue { return s.b.KV() }

// BucketName is the KV bucket the store uses.
func (s *Store) BucketName() string { return s.b.Name() }

// checkStem refuses a stem that is not a script name.
func checkStem(stem string) error {
	if !stemRE.MatchString(stem) {
		return fmt.Errorf("bad script name %q: must match %s", stem, StemPattern)
	}
	return nil
}

// Put stores a script (a new revision; the content is not checked here,
// see [Registry.Validate]). It recreates the bucket if it was deleted.
func (s *Store) Put(ctx context.Context, stem string, src []byte) (uint64, error) {
	if err := checkStem(stem); err != nil {
		return 0, err
	}
	if len(src) > MaxSource {
		return 0, fmt.Errorf("script %q is %d bytes, over the %d KiB limit", stem, len(src), MaxSource>>10)
	}
	var rev uint64
	err := s.b.Do(ctx, func(kv jetstream.KeyValue) (err error) {
		rev, err = kv.Put(ctx, stem, src)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store script %q: %w", stem, err)
	}
	return rev, nil
}

// Get reads a script; ErrNotFound if there is none.
func (s *Store) Get(ctx context.Context, stem string) (Entry, error) {
	if err := checkStem(stem); err != nil {
		return Entry{}, err
	}
	e, err := s.bucket().Get(ctx, stem)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Entry{}, fmt.Errorf("%w %q", ErrNotFound, stem)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read script %q from bucket %s: %w", stem, s.b.Name(), err)
	}
	return entryOf(e), nil
}

func entryOf(e jetstream.KeyValueEntry) Entry {
	return Entry{Stem: e.Key(), Source: bytes.Clone(e.Value()), Revision: e.Revision(), Updated: e.Created()}
}

// Delete removes a script; ErrNotFound if there is none.
func (s *Store) Delete(ctx context.Context, stem string) error {
	if _, err := s.Get(ctx, stem); err != nil {
		return err
	}
	if err := s.bucket().Delete(ctx, stem); err != nil {
		return fmt.Errorf("delete script %q: %w", stem, err)
	}
	return nil
}

// List reads every stored script, by stem. Keys that are not stems
// (written by something else than Put) are listed too, so that the
// registry reports them. It asks the bucket's stream which keys exist (an
// exact answer, unlike a watch that may end early) and reads each one.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	list, _, err := s.list(ctx)
	return list, err
}

// list is List with the bucket's last revision when it was listed.
func (s *Store) list(ctx context.Context) ([]Entry, uint64, error) {
	fail := func(err error) ([]Entry, uint64, error) {
		return nil, 0, fmt.Errorf("list scripts of bucket %s: %w", s.b.Name(), err)
	}
	names, last, err := s.b.Keys(ctx, ">")
	if err != nil {
		return fail(err)
	}
	kv := s.bucket()
	out := make([]Entry, 0, len(names))
	for _, k := range names {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted
		}
		if err != nil {
			return fail(fmt.Errorf("read %s: %w", k, err))
		}
		out = append(out, entryOf(e))
	}
	return out, last, nil
}

// incarnation identifies the bucket's current stream (its creation
// time), to notice a bucket deleted or deleted and made again, which ends
// no watch.
func (s *Store) incarnation(ctx context.Context) (time.Time, error) { return s.b.Created(ctx) }

// watch follows every change of the bucket (initial values first, then
// nil, then updates) until ctx ends.
func (s *Store) watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := s.bucket().WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch bucket %s: %w", s.b.Name(), err)
	}
	return w, nil
}
