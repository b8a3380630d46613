package scripts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
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
	nc  *nats.Conn
	cfg jetstream.KeyValueConfig

	mu sync.Mutex
	kv jetstream.KeyValue
}

// OpenStore creates the bucket of prefix (see [Bucket]) when it is
// missing, with the fleet's replica count.
func OpenStore(ctx context.Context, nc *nats.Conn, prefix string) (*Store, error) {
	s := &Store{nc: nc, cfg: jetstream.KeyValueConfig{
		Bucket:       Bucket(prefix),
		Description:  "Sovereign script tools (key: file stem, value: JavaScript source)",
		History:      1,
		MaxValueSize: MaxSource,
		Storage:      jetstream.FileStorage,
	}}
	if _, err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// open (re)creates the bucket.
func (s *Store) open(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := bus.OpenKV(ctx, s.nc, s.cfg, "script tools are kept")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.kv = kv
	s.mu.Unlock()
	return kv, nil
}

func (s *Store) bucket() jetstream.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kv
}

// BucketName is the KV bucket the store uses.
func (s *Store) BucketName() string { return s.cfg.Bucket }

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
	rev, err := s.bucket().Put(ctx, stem, src)
	if isGone(err) {
		kv, oerr := s.open(ctx)
		if oerr != nil {
			return 0, fmt.Errorf("store script %q: %w", stem, oerr)
		}
		rev, err = kv.Put(ctx, stem, src)
	}
	if err != nil {
		return 0, fmt.Errorf("store script %q: %w", stem, err)
	}
	return rev, nil
}

// isGone reports an error of a deleted bucket.
func isGone(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
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
		return Entry{}, fmt.Errorf("read script %q from bucket %s: %w", stem, s.cfg.Bucket, err)
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
		return nil, 0, fmt.Errorf("list scripts of bucket %s: %w", s.cfg.Bucket, err)
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fail(err)
	}
	stream, err := js.Stream(ctx, "KV_"+s.cfg.Bucket)
	if err != nil {
		return fail(err)
	}
	pre := "$KV." + s.cfg.Bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(pre+">"))
	if err != nil {
		return fail(err)
	}
	names := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		names = append(names, strings.TrimPrefix(subject, pre))
	}
	slices.Sort(names)
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
	return out, info.State.LastSeq, nil
}

// incarnation identifies the bucket's current stream (its creation
// time), to notice a bucket deleted or deleted and made again, which ends
// no watch.
func (s *Store) incarnation(ctx context.Context) (time.Time, error) {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return time.Time{}, err
	}
	stream, err := js.Stream(ctx, "KV_"+s.cfg.Bucket)
	if err != nil {
		return time.Time{}, fmt.Errorf("bucket %s: %w", s.cfg.Bucket, err)
	}
	return stream.CachedInfo().Created, nil
}

// watch follows every change of the bucket (initial values first, then
// nil, then updates) until ctx ends.
func (s *Store) watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := s.bucket().WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch bucket %s: %w", s.cfg.Bucket, err)
	}
	return w, nil
}
