// Package approval holds the calls of monitored tools until a person
// decides: approve once, approve for the rest of the browser session, or
// deny. Requests and session grants live in a NATS KV bucket, so a request
// made on one gateway replica can be decided from the console of any other,
// and a grant made on one replica holds on all of them.
//
// Keys are "req.<id>" for requests and "grant.<digest>" for grants (the
// digest of the browser-session binding and what is granted: the bucket
// never holds a session handle or an MCP session id). Entries expire with
// the bucket's TTL (24h) after their last write.
package approval

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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// Defaults and limits.
const (
	// DefaultTimeout is how long a request waits for a decision when it
	// comes without a deadline.
	DefaultTimeout = 2 * time.Minute
	// TTL is how long requests and grants live after their last write.
	TTL = 24 * time.Hour
	// RecentDecided is how far back List shows decided requests.
	RecentDecided = time.Hour
)

// DecidedBy values the queue itself writes.
const (
	ByTimeout   = "timeout"
	ByCancelled = "cancelled"
)

// Errors of the queue.
var (
	// ErrNotFound means no such request: never made, or expired.
	ErrNotFound = errors.New("no such approval request")
	// ErrDecided means the request is no longer pending; the error text
	// says who decided it and how.
	ErrDecided = errors.New("approval request already decided")
)

// Bucket is the KV bucket of a bus subject prefix: "sov" → "sov_approvals".
// Characters a bucket name cannot hold become "_".
func Bucket(prefix string) string {
	if prefix == "" {
		prefix = "sov"
	}
	return bucketUnsafe.ReplaceAllString(prefix, "_") + "_approvals"
}

var (
	bucketUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]`)
	idPattern    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	idEncoding   = base32.StdEncoding.WithPadding(base32.NoPadding)
)

// Queue is the approval requests and session grants of a fleet.
type Queue struct {
	kv     jetstream.KeyValue
	bucket string
	// grants mirrors the grants this replica has seen: a grant is never
	// revoked, only expires, so a cached one is good until its TTL.
	grants sync.Map // key → Grant
}

// Open creates the bucket when it is missing (or updates its settings) and
// returns the queue. The bucket is file-backed: pending requests and grants
// survive a NATS restart.
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Queue, error) {
	bucket := Bucket(prefix)
	kv, err := kvbucket.OpenKV(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "Sovereign gateway: approval requests of monitored tool calls and approve-for-session grants",
			TTL:         TTL,
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "the gateway keeps approval requests",
	})
	if err != nil {
		return nil, err
	}
	return &Queue{kv: kv, bucket: bucket}, nil
}

// BucketName is the queue's KV bucket.
func (q *Queue) BucketName() string { return q.bucket }

func reqKey(id string) string { return "req." + id }

func grantKey(scopeKey, grant string) string {
	sum := sha256.Sum256([]byte(scopeKey + "\x00" + grant))
	return "grant." + hex.EncodeToString(sum[:])
}

func newID() string {
	b := make([]byte, 16) // 128 bits
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return strings.ToLower(idEncoding.EncodeToString(b))
}

// ValidID reports whether id can name a request (what an id from a URL or a
// client must look like before it reaches the bucket).
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Elicitor asks the calling client's user to decide r (MCP elicitation). It
// returns the decision, or an error when the client cannot ask (the request
// then waits for the console). A user who declines or cancels the form
// denies: return approve false and a nil error.
type Elicitor func(ctx context.Context, r Request) (approve bool, scope Scope, err error)

// Submit stores r as a new pending request and returns it with its ID,
// Created, State and (when r has none) Deadline filled in. Ask is Submit
// and the wait for the decision; Submit alone is for a call that is resumed
// later (a 2026 client's multi round-trip call).
func (q *Queue) Submit(ctx context.Context, r Request) (Request, error) {
	if r.Tool == "" {
		return r, errors.New("approval request without a tool")
	}
	r.ID = newID()
	r.Created = time.Now().UTC()
	if r.Deadline.IsZero() {
		r.Deadline = r.Created.Add(DefaultTimeout)
	}
	r.State, r.Decision, r.DecidedBy, r.DecidedAt, r.Note, r.Consumed = Pending, "", "", time.Time{}, "", time.Time{}
	data, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("encode approval request: %w", err)
	}
	if _, err := q.kv.Create(ctx, reqKey(r.ID), data); err != nil {
		return r, fmt.Errorf("store approval request: %w", err)
	}
	return r, nil
}

// Ask stores r as pending and waits for the first decision: from elicit
// (run concurrently when not nil) or from Decide on any replica (the wait
// watches the request's key). At the deadline the request times out
// (TimedOut, DecidedBy "timeout"). When ctx ends first (the client went
// away), the request is denied with DecidedBy "cancelled" and Ask returns
// ctx.Err(). It returns the final request.
func (q *Queue) Ask(ctx context.Context, r Request, elicit Elicitor) (Request, error) {
	r, err := q.Submit(ctx, r)
	if err != nil {
		if ctx.Err() != nil && r.ID != "" {
			// Cancelled while the write was in flight: it may have been
			// stored all the same (the console saw it) with nobody left to
			// wait for it. Deny it, as Wait does a request whose call went
			// away, rather than leave it pending until its deadline.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, _ = q.finish(fctx, r.ID, Denied, ByCancelled)
		}
		return r, err
	}
	return q.Wait(ctx, r, elicit)
}

// Wait is Ask for a request already submitted.
func (q *Queue) Wait(ctx context.Context, r Request, elicit Elicitor) (Request, error) {
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var updates <-chan jetstream.KeyValueEntry
	if w, err := q.kv.Watch(wctx, reqKey(r.ID)); err == nil {
		defer func() { _ = w.Stop() }()
		updates = w.Updates()
	}
	var poll <-chan time.Time
	if updates == nil {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	if elicit != nil {
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			approve, scope, err := elicit(ectx, r)
			if err != nil || ectx.Err() != nil {
				return // no answer from the client: the console decides
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ectx), 10*time.Second)
			defer cancel()
			_, _ = q.Decide(dctx, r.ID, approve, scope, "elicitation:"+clientName(r.Client), "")
		}()
	}
	deadline := time.NewTimer(time.Until(r.Deadline))
	defer deadline.Stop()
	final := func(state State, by string) (Request, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cur, err := q.finish(fctx, r.ID, state, by)
		if errors.Is(err, ErrDecided) {
			err = nil // decided a moment ago: that decision stands
		}
		return cur, err
	}
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				updates = nil
				t := time.NewTicker(500 * time.Millisecond)
				defer t.Stop()
				poll = t.C
				continue
			}
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				return r, fmt.Errorf("approval request %s: %w (deleted while waiting)", r.ID, ErrNotFound)
			}
			var cur Request
			if json.Unmarshal(e.Value(), &cur) == nil && cur.State != Pending {
				return cur, nil
			}
		case <-poll:
			cur, err := q.read(wctx, r.ID)
			if errors.Is(err, ErrNotFound) {
				return r, fmt.Errorf("approval request %s: %w (deleted while waiting)", r.ID, err)
			}
			if err == nil && cur.State != Pending {
				return cur, nil
			}
		case <-deadline.C:
			return final(TimedOut, ByTimeout)
		case <-ctx.Done():
			cur, err := final(Denied, ByCancelled)
			return cur, errors.Join(ctx.Err(), err)
		}
	}
}

// clientName is the client as DecidedBy names it.
func clientName(c string) string {
	if c = strings.TrimSpace(c); c == "" {
		return "client"
	}
	return c
}

// finish moves a pending request to state (Denied or TimedOut) by by; a
// request decided already is returned with ErrDecided.
func (q *Queue) finish(ctx context.Context, id string, state State, by string) (Request, error) {
	return q.update(ctx, id, func(cur *Request) (bool, error) {
		if cur.State != Pending {
			return false, decidedErr(*cur)
		}
		cur.State, cur.DecidedBy, cur.DecidedAt = state, by, time.Now().UTC()
		return true, nil
	})
}

// Decide records a person's (or client's) decision on a pending request:
// approve with scope Once or Session (Session also grants the request's
// Grant in its browser session; a request without a session binding is
// approved Once), or deny. by names who decided ("console:<admin>",
// "elicitation:<client>"); note is optional. Deciding a request that is no
// longer pending returns it with an error wrapping ErrDecided that says who
// decided it and how; a pending request past its deadline times out
// instead.
func (q *Queue) Decide(ctx context.Context, id string, approve bool, scope Scope, by, note string) (Request, error) {
	if strings.TrimSpace(by) == "" {
		return Request{}, errors.New("decide approval request: say who decides (by is empty)")
	}
	if approve {
		switch scope {
		case "":
			scope = Once
		case Once, Session:
		default:
			return Request{}, fmt.Errorf("decide approval request: scope %q is neither %q nor %q", scope, Once, Session)
		}
	}
	expired := false
	cur, err := q.update(ctx, id, func(cur *Request) (bool, error) {
		if cur.State != Pending {
			return false, decidedErr(*cur)
		}
		now := time.Now().UTC()
		cur.DecidedAt = now
		if now.After(cur.Deadline) {
			expired = true
			cur.State, cur.DecidedBy = TimedOut, ByTimeout
			return true, nil
		}
		cur.State, cur.DecidedBy, cur.Note = Denied, by, note
		if approve {
			cur.State, cur.Decision = Approved, scope
			if scope == Session && (cur.Scope == "" || cur.Grant == "") {
				cur.Decision = Once // no browser session to grant for
			}
		}
		return true, nil
	})
	if err != nil {
		return cur, err
	}
	if expired {
		return cur, decidedErr(cur)
	}
	if cur.State == Approved && cur.Decision == Session {
		g := Grant{Grant: cur.Grant, RequestID: cur.ID, DecidedBy: cur.DecidedBy, Created: cur.DecidedAt}
		if err := q.putGrant(ctx, cur.Scope, g); err != nil {
			return cur, fmt.Errorf("approved, but storing the session grant failed (later calls will ask again): %w", err)
		}
	}
	return cur, nil
}

// Consume marks an approved request as used by the call it approved. A
// request is consumed once: a second Consume, or one on a request that is
// not approved, is an error (a replayed retry of a multi round-trip call
// must not run the tool again).
func (q *Queue) Consume(ctx context.Context, id string) (Request, error) {
	return q.update(ctx, id, func(cur *Request) (bool, error) {
		switch {
		case cur.State != Approved:
			return false, fmt.Errorf("approval request %s is %s, not approved", cur.ID, cur.State)
		case !cur.Consumed.IsZero():
			return false, fmt.Errorf("approval request %s was already used at %s; call again to ask anew", cur.ID, cur.Consumed.Format(time.RFC3339))
		}
		cur.Consumed = time.Now().UTC()
		return true, nil
	})
}

// decidedErr says who decided r and how.
func decidedErr(r Request) error {
	at := r.DecidedAt.Local().Format("15:04:05")
	switch r.State {
	case Approved:
		how := "approved once"
		if r.Decision == Session {
			how = "approved for the session"
		}
		return fmt.Errorf("%w: request %s (%s) was %s by %s at %s", ErrDecided, r.ID, r.Tool, how, r.DecidedBy, at)
	case TimedOut:
		return fmt.Errorf("%w: request %s (%s) timed out at %s: nobody decided within %s", ErrDecided, r.ID, r.Tool, at,
			r.Deadline.Sub(r.Created).Round(time.Second))
	default:
		return fmt.Errorf("%w: request %s (%s) was %s by %s at %s", ErrDecided, r.ID, r.Tool, r.State, r.DecidedBy, at)
	}
}

// update reads request id, applies fn and writes it back if fn says so,
// retrying when another writer came first. It returns the request as it
// ends up (as read when fn writes nothing) and fn's error.
func (q *Queue) update(ctx context.Context, id string, fn func(*Request) (bool, error)) (Request, error) {
	if !ValidID(id) {
		return Request{}, fmt.Errorf("approval request %q: %w", id, ErrNotFound)
	}
	for range 8 {
		e, err := q.kv.Get(ctx, reqKey(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return Request{}, fmt.Errorf("approval request %s: %w (never made, or older than %s)", id, ErrNotFound, TTL)
		}
		if err != nil {
			return Request{}, fmt.Errorf("read approval request %s: %w", id, err)
		}
		var cur Request
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return Request{}, fmt.Errorf("decode approval request %s: %w", id, err)
		}
		write, ferr := fn(&cur)
		if !write {
			return cur, ferr
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return cur, fmt.Errorf("encode approval request %s: %w", id, err)
		}
		_, err = q.kv.Update(ctx, reqKey(id), data, e.Revision())
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // changed since read: look again
		}
		if err != nil {
			return cur, fmt.Errorf("update approval request %s: %w", id, err)
		}
		return cur, ferr
	}
	return Request{}, fmt.Errorf("update approval request %s: changed concurrently too often", id)
}

// read returns request id as stored.
func (q *Queue) read(ctx context.Context, id string) (Request, error) {
	if !ValidID(id) {
		return Request{}, fmt.Errorf("approval request %q: %w", id, ErrNotFound)
	}
	e, err := q.kv.Get(ctx, reqKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Request{}, fmt.Errorf("approval request %s: %w (never made, or older than %s)", id, ErrNotFound, TTL)
	}
	if err != nil {
		return Request{}, fmt.Errorf("read approval request %s: %w", id, err)
	}
	var r Request
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Request{}, fmt.Errorf("decode approval request %s: %w", id, err)
	}
	return r, nil
}

// expire times out r when it is pending past its deadline (a request whose
// call no longer waits: its client went away between the rounds of a multi
// round-trip call) and returns it as it now stands.
func (q *Queue) expire(ctx context.Context, r Request) Request {
	if r.State != Pending || !time.Now().After(r.Deadline) {
		return r
	}
	if cur, err := q.finish(ctx, r.ID, TimedOut, ByTimeout); err == nil || errors.Is(err, ErrDecided) {
		return cur
	}
	return r
}

// Get returns request id (ErrNotFound when there is none).
func (q *Queue) Get(ctx context.Context, id string) (Request, error) {
	r, err := q.read(ctx, id)
	if err != nil {
		return r, err
	}
	return q.expire(ctx, r), nil
}

// List returns the pending requests, oldest first, then the requests
// decided in the last hour, newest first.
func (q *Queue) List(ctx context.Context) ([]Request, error) {
	var pending, decided []Request
	since := time.Now().Add(-RecentDecided)
	err := kvbucket.Each(ctx, q.kv, "req.*", func(e jetstream.KeyValueEntry) bool {
		var r Request
		if json.Unmarshal(e.Value(), &r) != nil {
			return true
		}
		r = q.expire(ctx, r)
		switch {
		case r.State == Pending:
			pending = append(pending, r)
		case r.DecidedAt.After(since):
			decided = append(decided, r)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("list approval requests: %w", err)
	}
	slices.SortFunc(pending, func(a, b Request) int { return a.Created.Compare(b.Created) })
	slices.SortFunc(decided, func(a, b Request) int { return b.DecidedAt.Compare(a.DecidedAt) })
	return append(pending, decided...), nil
}

// Watch sends every change of a request (new, decided, consumed) as it
// happens, on any replica, until ctx ends; then the channel is closed. It
// is also closed when the watch fails (the NATS connection is lost): watch
// again. Changes from before the call are not sent: call List after Watch
// for the current state.
func (q *Queue) Watch(ctx context.Context) (<-chan Request, error) {
	w, err := q.kv.Watch(ctx, "req.*", jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch approval requests: %w", err)
	}
	out := make(chan Request, 16)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				var r Request
				if json.Unmarshal(e.Value(), &r) != nil {
					continue
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// Granted reports whether grant (e.g. "tool:eval") holds for the browser
// session bound by scopeKey. An empty scopeKey (a call that opens a new
// browser session) has no grants.
func (q *Queue) Granted(ctx context.Context, scopeKey, grant string) (bool, error) {
	_, ok, err := q.LookupGrant(ctx, scopeKey, grant)
	return ok, err
}

// LookupGrant is Granted that also returns the grant (who gave it, from
// which request). Grants this replica has seen are answered from memory.
func (q *Queue) LookupGrant(ctx context.Context, scopeKey, grant string) (Grant, bool, error) {
	if scopeKey == "" || grant == "" {
		return Grant{}, false, nil
	}
	k := grantKey(scopeKey, grant)
	if v, ok := q.grants.Load(k); ok {
		g := v.(Grant)
		if time.Since(g.Created) < TTL {
			return g, true, nil
		}
		q.grants.Delete(k)
	}
	e, err := q.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Grant{}, false, nil
	}
	if err != nil {
		return Grant{}, false, fmt.Errorf("read session grant: %w", err)
	}
	var g Grant
	if err := json.Unmarshal(e.Value(), &g); err != nil {
		return Grant{}, false, fmt.Errorf("decode session grant: %w", err)
	}
	if g.Created.IsZero() {
		g.Created = e.Created()
	}
	q.grants.Store(k, g)
	return g, true, nil
}

// Grant records that grant holds for the rest of the browser session bound
// by scopeKey (until the bucket's TTL passes).
func (q *Queue) Grant(ctx context.Context, scopeKey, grant string) error {
	return q.putGrant(ctx, scopeKey, Grant{Grant: grant, Created: time.Now().UTC()})
}

func (q *Queue) putGrant(ctx context.Context, scopeKey string, g Grant) error {
	if scopeKey == "" || g.Grant == "" {
		return errors.New("session grant without a browser session or without what it grants")
	}
	data, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encode session grant: %w", err)
	}
	k := grantKey(scopeKey, g.Grant)
	if _, err := q.kv.Put(ctx, k, data); err != nil {
		return fmt.Errorf("store session grant: %w", err)
	}
	if p, ok := urlPattern(g.Grant); ok {
		if err := q.addURLGrant(ctx, scopeKey, p); err != nil {
			return err
		}
	}
	q.grants.Store(k, g)
	return nil
}
