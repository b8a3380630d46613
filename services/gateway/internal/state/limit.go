package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A caller's browser sessions are limited across every gateway replica.
// Counting the caller's bound records and then opening a session is not
// atomic: concurrent calls (on one replica or several) all count below the
// limit and all open. So taking a session slot is a compare-and-set on
// one record per caller, "limit.<sha256 of the owner>", which holds the
// slots being opened (reservations) until the session's record is written:
//
//   - Reserve reads that record at revision R, waits until the mirror has
//     seen R (every record written before R, in particular the records
//     bound by the openers that released their reservations before R),
//     counts the owner's bound records and live reservations (each record
//     key once), and writes the record back with its own reservation at
//     revision R. A concurrent writer makes that write fail, and Reserve
//     counts again.
//   - The opener writes the session's record, then releases its
//     reservation: from then on the bound record counts instead.
//
// Nothing else needs to give a slot back: a session closed, idle,
// reclaimed or lost unbinds its record, which then no longer counts. A
// reservation whose gateway died before releasing it lapses at its
// deadline.

// ErrLimit is the error of Reserve at the limit (a *LimitError).
var ErrLimit = errors.New("at its session limit")

// LimitError says how many sessions the owner holds.
type LimitError struct{ Held, Limit int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("holds %d of its %d browser sessions", e.Held, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// reservations is the value of a limit record.
type reservations struct {
	Pending []reservation `json:"pending"`
}

type reservation struct {
	ID    string    `json:"id"`
	Key   string    `json:"key"`   // the record the session is for
	Until time.Time `json:"until"` // lapses then, if never released
}

func limitKey(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "limit." + hex.EncodeToString(sum[:])
}

// seenWait bounds how long Reserve waits for the mirror to catch up; past
// it, it counts what the mirror has (a watch being renewed).
const seenWait = 2 * time.Second

// Reserve takes one of owner's limit session slots for the record key k
// (KeyOf): a *LimitError when owner holds limit already, counting its
// bound records and the live reservations of other openers (k counts
// once: a reservation for a key reserved already takes no other slot). The
// reservation lapses after hold unless release is called first; call
// release once k's record holds the new session, or the open failed.
func (s *Store) Reserve(ctx context.Context, owner, k string, limit int, hold time.Duration) (release func(), err error) {
	lk := limitKey(owner)
	for range 32 {
		var e jetstream.KeyValueEntry
		err := s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
			e, err = kv.Get(ctx, lk)
			return err
		})
		var res reservations
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("read the caller's session slots: %w", err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &res); err != nil {
				return nil, fmt.Errorf("decode the caller's session slots: %w", err)
			}
			s.waitSeen(ctx, rev)
		}
		now := time.Now()
		res.Pending = livePending(res.Pending, now)
		// Another first call of the same record (an MCP session's calls
		// at once) takes no further slot: one of them binds the record.
		held := s.held(owner, res.Pending)
		if !held[k] && len(held) >= limit {
			// A session given back on another replica a moment ago may
			// not be in the mirror yet: catch up with the bucket before
			// refusing.
			if last, err := s.lastRevision(ctx); err == nil {
				s.waitSeen(ctx, last)
				held = s.held(owner, res.Pending)
			}
			if !held[k] && len(held) >= limit {
				return nil, &LimitError{Held: len(held), Limit: limit}
			}
		}
		id := token()
		res.Pending = append(res.Pending, reservation{ID: id, Key: k, Until: now.Add(hold).UTC()})
		data, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encode the caller's session slots: %w", err)
		}
		err = s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
			if rev == 0 {
				_, err = kv.Create(ctx, lk, data)
			} else {
				_, err = kv.Update(ctx, lk, data, rev)
			}
			return err
		})
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another opener took a slot meanwhile: count again
		}
		if err != nil {
			return nil, fmt.Errorf("take a session slot: %w", err)
		}
		return func() { s.unreserve(ctx, lk, id) }, nil
	}
	return nil, fmt.Errorf("take a session slot: %w too often", ErrConflict)
}

// livePending drops the reservations past their deadline.
func livePending(list []reservation, now time.Time) []reservation {
	out := list[:0]
	for _, r := range list {
		if now.Before(r.Until) {
			out = append(out, r)
		}
	}
	return out
}

// held is the record keys of owner's bound records and pending
// reservations (concurrent first calls of one MCP session reserve the
// same key).
func (s *Store) held(owner string, pending []reservation) map[string]bool {
	keys := map[string]bool{}
	for _, slot := range s.Bound() {
		if slot.Owner == owner {
			keys[slot.Key] = true
		}
	}
	for _, r := range pending {
		keys[r.Key] = true
	}
	return keys
}

// unreserve removes reservation id from the limit record lk.
func (s *Store) unreserve(ctx context.Context, lk, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for range 32 {
		var e jetstream.KeyValueEntry
		err := s.retry(ctx, func(kv jetstream.KeyValue) (err error) {
			e, err = kv.Get(ctx, lk)
			return err
		})
		if err != nil {
			return // gone (it lapses with the bucket's TTL) or unreadable (it lapses at its deadline)
		}
		var res reservations
		if json.Unmarshal(e.Value(), &res) != nil {
			return
		}
		kept := res.Pending[:0]
		for _, r := range res.Pending {
			if r.ID != id {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(res.Pending) {
			return
		}
		res.Pending = livePending(kept, time.Now())
		data, err := json.Marshal(res)
		if err != nil {
			return
		}
		err = s.retry(ctx, func(kv jetstream.KeyValue) error {
			_, err := kv.Update(ctx, lk, data, e.Revision())
			return err
		})
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return
		}
	}
}

// lastRevision is the newest revision of the bucket.
func (s *Store) lastRevision(ctx context.Context) (uint64, error) {
	var last uint64
	err := s.retry(ctx, func(kv jetstream.KeyValue) error {
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return errors.New("no stream state in the bucket's status")
		}
		last = bs.StreamInfo().State.LastSeq
		return nil
	})
	return last, err
}

// noteSeen records that the mirror's watch delivered revision rev.
func (s *Store) noteSeen(rev uint64) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if rev > s.seen {
		s.seen = rev
		close(s.seenCh)
		s.seenCh = make(chan struct{})
	}
}

// waitSeen waits (at most seenWait) until the mirror has seen revision rev
// of the bucket, and with it every write before it.
func (s *Store) waitSeen(ctx context.Context, rev uint64) {
	ctx, cancel := context.WithTimeout(ctx, seenWait)
	defer cancel()
	for {
		s.seenMu.Lock()
		seen, ch := s.seen, s.seenCh
		s.seenMu.Unlock()
		if seen >= rev {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
