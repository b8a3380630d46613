package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// Listed is a record found by [Store.List]. It carries the record's key
// ("mcp.<sha256 hex>" or "handle.<sha256 hex>"), never the session id or
// handle itself: the bucket does not hold those, and they are bearer
// secrets. The key is what [Store.ModifyKey] takes.
type Listed struct {
	Key      string
	Kind     Kind
	Revision uint64
	Record
}

// maxList bounds how many records List returns.
const maxList = 10000

var keyPattern = regexp.MustCompile(`^(mcp|handle)\.[0-9a-f]{64}$`)

// ValidKey reports whether k has the form of a record key.
func ValidKey(k string) bool { return keyPattern.MatchString(k) }

// List returns the live records of the bucket (at most 10,000), read from
// the bucket itself rather than the mirror, which only knows the records
// this replica has seen. Records past the TTL are left out.
func (s *Store) List(ctx context.Context) ([]Listed, error) {
	var out []Listed
	err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		out = out[:0]
		return kvbucket.Each(ctx, kv, jetstream.AllKeys, func(e jetstream.KeyValueEntry) bool {
			if l, ok := decodeListed(e); ok && time.Since(l.Touched) < s.ttl {
				out = append(out, l)
			}
			return len(out) < maxList
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list session records: %w", err)
	}
	return out, nil
}

func decodeListed(e jetstream.KeyValueEntry) (Listed, bool) {
	if e.Operation() != jetstream.KeyValuePut || !ValidKey(e.Key()) {
		return Listed{}, false
	}
	kind, _, _ := strings.Cut(e.Key(), ".")
	l := Listed{Key: e.Key(), Kind: Kind(kind), Revision: e.Revision()}
	if json.Unmarshal(e.Value(), &l.Record) != nil {
		return Listed{}, false
	}
	return l, true
}

// ModifyKey is [Store.Modify] for a record known by its key (from List):
// it reads the record, applies fn and writes it back, retrying on
// conflicts; fn returns false to leave it unchanged. ErrNotFound when there
// is no such record.
func (s *Store) ModifyKey(ctx context.Context, k string, fn func(*Record) bool) (*Listed, error) {
	if !ValidKey(k) {
		return nil, fmt.Errorf("%q is not a session record key: %w", k, ErrNotFound)
	}
	for range 8 {
		var e jetstream.KeyValueEntry
		err := s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
			e, err = kv.Get(ctx, k)
			return err
		})
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read session record: %w", err)
		}
		l, ok := decodeListed(e)
		if !ok {
			return nil, fmt.Errorf("decode session record %s: not a record", k)
		}
		if !fn(&l.Record) {
			return &l, nil
		}
		l.Touched = time.Now().UTC()
		data, err := json.Marshal(l.Record)
		if err != nil {
			return nil, fmt.Errorf("encode session record: %w", err)
		}
		var rev uint64
		err = s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
			rev, err = kv.Update(ctx, k, data, l.Revision)
			return err
		})
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			s.forget(k)
			continue
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			s.forget(k)
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("update session record: %w", err)
		}
		s.remember(k, rev, l.Record)
		l.Revision = rev
		return &l, nil
	}
	return nil, fmt.Errorf("update session record: %w too often", ErrConflict)
}
