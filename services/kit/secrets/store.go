package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// BucketSuffix follows the bus prefix in the bucket's name.
const BucketSuffix = "_secrets"

// Bucket is the KV bucket of the secrets for a bus prefix: "sov_secrets"
// for the default prefix ("" or "sov"). Characters a bucket name cannot
// hold become _.
func Bucket(prefix string) string {
	return bus.BucketName(prefix, BucketSuffix)
}

// Info describes a stored secret without its value.
type Info struct {
	Name string `json:"name"`
	// Updated is when the value was last set.
	Updated time.Time `json:"updated"`
	// KeyID is the id of the key the value is encrypted with.
	KeyID string `json:"key_id"`
}

// String returns the name, the time of the last change and the key id.
func (i Info) String() string {
	return fmt.Sprintf("%s (set %s, key %s)", i.Name, i.Updated.Format(time.RFC3339), i.KeyID)
}

// Store reads and writes secrets in the KV bucket. Without a key it can
// list and delete secrets but not set or read them.
type Store struct {
	b      *kvbucket.Bucket
	key    *Key
	prefix string
}

// Open creates the bucket when it is missing and returns the store. key
// may be nil for a store that only lists and deletes. prefix is the bus
// subject prefix ("" for the default).
func Open(ctx context.Context, nc *nats.Conn, prefix string, key *Key) (*Store, error) {
	b, err := kvbucket.Open(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      Bucket(prefix),
			Description: "Sovereign operator secrets, encrypted (AES-256-GCM); see sovereign secret",
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "secrets live",
		AsIs:  true,
	})
	if err != nil {
		return nil, err
	}
	return &Store{b: b, key: key, prefix: prefix}, nil
}

// Key returns the store's key (nil when it has none).
func (s *Store) Key() *Key { return s.key }

// retry runs op, and once more after opening the bucket again when op
// failed because the bucket is gone (a NATS server that lost its store).
func (s *Store) retry(ctx context.Context, op func(jetstream.KeyValue) error) error {
	return s.b.Do(ctx, op)
}

func (s *Store) needKey() error {
	if s.key == nil {
		return ErrNoKey
	}
	return nil
}

// Set stores value under name, replacing any previous value. The caller
// may zero value afterwards.
func (s *Store) Set(ctx context.Context, name string, value []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ValidValue(value); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if err := s.needKey(); err != nil {
		return err
	}
	data, err := s.key.seal(name, value)
	if err != nil {
		return err
	}
	if err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		_, err := kv.Put(ctx, name, data)
		return err
	}); err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	return nil
}

// Get returns the value of name; an error wrapping [ErrNotFound] when
// there is none.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := s.needKey(); err != nil {
		return nil, err
	}
	var e jetstream.KeyValueEntry
	err := s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
		e, err = kv.Get(ctx, name)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	r, err := decode(name, e.Value())
	if err != nil {
		return nil, err
	}
	return s.key.open(name, r)
}

func notFound(name string) error {
	return fmt.Errorf("%w named %q (see sovereign secret list; set it with sovereign secret set %s)", ErrNotFound, name, name)
}

// Delete removes name; an error wrapping [ErrNotFound] when there is no
// such secret. It needs no key.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		e, err := kv.Get(ctx, name)
		if err != nil {
			return err
		}
		// The delete marker replaces the value (the bucket keeps one
		// revision), so no ciphertext stays behind.
		return kv.Delete(ctx, name, jetstream.LastRevision(e.Revision()))
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return notFound(name)
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// Names lists the stored secrets, sorted by name. It needs no key and
// reads no value.
func (s *Store) Names(ctx context.Context) ([]Info, error) {
	var out []Info
	err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		out = out[:0]
		return kvbucket.Each(ctx, kv, jetstream.AllKeys, func(e jetstream.KeyValueEntry) bool {
			info := Info{Name: e.Key(), Updated: e.Created().UTC()}
			if r, err := decode(e.Key(), e.Value()); err == nil {
				info.KeyID = r.KeyID
			}
			out = append(out, info)
			return true
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
