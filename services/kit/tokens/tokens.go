// Package tokens keeps Sovereign's API tokens: bearer credentials that MCP
// clients send to the gateway ("Authorization: Bearer svt_…"), each with a
// name, and its own URL policy and approval list.
//
// Tokens live in the JetStream KV bucket <prefix>_tokens ("sov_tokens"),
// on file storage so that they survive a NATS restart. The bucket never
// holds a usable token: only the SHA-256 of each token's secret. A token is
// shown once, when it is created.
//
// A token is "svt_" + its id (16 hex digits, public: it names the token in
// logs and lists) + "_" + its secret (64 hex digits). [Store.Verify] checks
// one against an in-memory mirror of the bucket that a KV watch keeps
// current, so a gateway pays no NATS round trip per request, and a
// revocation reaches every gateway within the watch's delivery time.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// Prefix starts every token.
const Prefix = "svt_"

// BucketSuffix follows the bus prefix in the bucket name: "sov" + "_tokens".
const BucketSuffix = "_tokens"

// Sizes of a token's parts, in hex digits.
const (
	idLen     = 16 // 8 random bytes
	secretLen = 64 // 32 random bytes
)

// TouchInterval is how often at most a token's last use is written back.
const TouchInterval = time.Minute

// Token states, as [Token.State] reports them.
const (
	StateActive  = "active"
	StateRevoked = "revoked"
)

// Errors of Verify. Every one of them wraps [ErrInvalid]: a gateway answers
// them all alike (401) and only its log tells them apart. None of them
// holds any part of the token's secret.
var (
	// ErrInvalid is what a client is told: the token is no good.
	ErrInvalid = errors.New("invalid or revoked token")
	// ErrMalformed: not of the form svt_<id>_<secret>.
	ErrMalformed = fmt.Errorf("%w: malformed token (not svt_<16 hex>_<64 hex>)", ErrInvalid)
	// ErrUnknown: no token has that id.
	ErrUnknown = fmt.Errorf("%w: unknown token id", ErrInvalid)
	// ErrWrongSecret: the id exists, the secret is not its secret.
	ErrWrongSecret = fmt.Errorf("%w: wrong secret for the token id", ErrInvalid)
	// ErrRevoked: the token was revoked.
	ErrRevoked = fmt.Errorf("%w: token revoked", ErrInvalid)
)

// ErrNotFound is Revoke's error for a name or id no token has.
var ErrNotFound = errors.New("no such token")

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	toolRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	idRE   = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// Token is a token as lists show it: everything but its secret.
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Created   time.Time  `json:"created"`
	CreatedBy string     `json:"created_by,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// LastUsed is when a gateway last accepted the token, written back at
	// most once per [TouchInterval] per gateway, best effort.
	LastUsed *time.Time `json:"last_used,omitempty"`
	// URLAllow and URLBlock are the token's own URL patterns, on top of
	// the gateway's policy.
	URLAllow []string `json:"url_allow,omitempty"`
	URLBlock []string `json:"url_block,omitempty"`
	// Approve names the tools whose calls with this token wait for a
	// person's approval.
	Approve []string `json:"approve,omitempty"`
	// MaxSessions is how many browser sessions the token's callers may
	// hold (0: the gateway's --sessions-per-caller).
	MaxSessions int `json:"max_sessions,omitempty"`
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return t.RevokedAt != nil }

// State is [StateActive] or [StateRevoked].
func (t Token) State() string {
	if t.Revoked() {
		return StateRevoked
	}
	return StateActive
}

// record is a token as the bucket stores it.
type record struct {
	Token
	SecretSHA256 string `json:"secret_sha256"` // hex
}

// Spec describes a token to create.
type Spec struct {
	// Name is unique among active tokens: ^[a-z0-9][a-z0-9._-]{0,62}$.
	Name string
	// CreatedBy says who created it (free text, optional).
	CreatedBy string
	// URLAllow, URLBlock: URL patterns as urlpolicy parses them
	// ("*.example.com", "https://example.com:8443", "10.0.0.0/8").
	URLAllow, URLBlock []string
	// Approve: tool names, like "eval".
	Approve []string
	// MaxSessions bounds the token's browser sessions (0: the gateway's
	// limit).
	MaxSessions int
}

// ValidName reports whether name is a valid token name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// ValidID reports whether id looks like a token id.
func ValidID(id string) bool { return idRE.MatchString(id) }

// Validate reports every problem of s, naming the field.
func (s Spec) Validate() error {
	var errs []error
	if !ValidName(s.Name) {
		errs = append(errs, fmt.Errorf("token name %q: use 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit (like ci-agent)", s.Name))
	}
	for _, t := range s.Approve {
		if !toolRE.MatchString(t) {
			errs = append(errs, fmt.Errorf("approve: %q is not a tool name (like eval or click)", t))
		}
	}
	if s.MaxSessions < 0 {
		errs = append(errs, fmt.Errorf("max sessions: %d must not be negative (0 takes the gateway's limit)", s.MaxSessions))
	}
	if err := validPatterns("allow", s.URLAllow); err != nil {
		errs = append(errs, err)
	}
	if err := validPatterns("block", s.URLBlock); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validPatterns checks a token's URL patterns of one list ("allow" or
// "block"): the error names the list and every bad pattern.
func validPatterns(list string, patterns []string) error {
	if err := urlpolicy.ValidatePatterns(patterns); err != nil {
		return fmt.Errorf("%s: %w", list, err)
	}
	return nil
}

// Parse splits a token into its id and secret; ErrMalformed when it is not
// a token.
func Parse(plaintext string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(plaintext, Prefix)
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return "", "", ErrMalformed
	}
	id, secret = rest[:idLen], rest[idLen+1:]
	if !isHex(id) || !isHex(secret) {
		return "", "", ErrMalformed
	}
	return id, secret, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// Bucket is the KV bucket of a bus prefix: "sov" → "sov_tokens". Characters
// a bucket name cannot hold become '_'.
func Bucket(prefix string) string {
	if prefix == "" {
		prefix = "sov"
	}
	b := []byte(prefix + BucketSuffix)
	for i, c := range b {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Keys: "id.<id>" holds a token, "name.<hex of name>" reserves an active
// token's name (its value is the token's id).
func idKey(id string) string     { return "id." + id }
func nameKey(name string) string { return "name." + hex.EncodeToString([]byte(name)) }

// Create stores a new token and returns it with its plaintext, the only
// copy there will ever be. Its name must be free among active tokens.
func (s *Store) Create(ctx context.Context, spec Spec) (string, Token, error) {
	if err := spec.Validate(); err != nil {
		return "", Token{}, err
	}
	id, secret := randomHex(idLen/2), randomHex(secretLen/2)
	sum := digest(secret)
	rec := record{
		Token: Token{
			ID: id, Name: spec.Name, Created: time.Now().UTC().Truncate(time.Millisecond), CreatedBy: spec.CreatedBy,
			URLAllow: slices.Clone(spec.URLAllow), URLBlock: slices.Clone(spec.URLBlock), Approve: slices.Clone(spec.Approve), MaxSessions: spec.MaxSessions,
		},
		SecretSHA256: hex.EncodeToString(sum[:]),
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return "", Token{}, fmt.Errorf("encode token: %w", err)
	}
	// The record first, then the name: a name reservation always points
	// at an existing record, so that a concurrent Create of the same name
	// sees a live holder, never an empty one it could take over.
	kv := s.bucket()
	rev, err := kv.Create(ctx, idKey(id), data)
	if err != nil {
		return "", Token{}, fmt.Errorf("store token %q: %w", spec.Name, err)
	}
	if _, err := s.reserveName(ctx, kv, spec.Name, id); err != nil {
		// Nobody has the plaintext: drop the record.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if derr := kv.Delete(dctx, idKey(id), jetstream.LastRevision(rev)); derr != nil {
			s.log.Warn("drop the record of a token whose name was taken", "id", id, "err", derr)
		}
		return "", Token{}, err
	}
	s.remember(rev, rec)
	return Prefix + id + "_" + secret, rec.Token, nil
}

// reserveName takes name for id, unless an active token has it. A
// reservation left by a token that is revoked (or whose record is gone) is
// taken over.
func (s *Store) reserveName(ctx context.Context, kv jetstream.KeyValue, name, id string) (uint64, error) {
	for range 4 {
		rev, err := kv.Create(ctx, nameKey(name), []byte(id))
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("reserve token name %q: %w", name, err)
		}
		e, err := kv.Get(ctx, nameKey(name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("reserve token name %q: %w", name, err)
		}
		holder, err := s.get(ctx, kv, string(e.Value()))
		if err == nil && !holder.Revoked() {
			return 0, fmt.Errorf("a token named %q already exists (id %s, created %s): revoke it first (sovereign token revoke %s) or pick another name",
				name, holder.ID, holder.Created.Format(time.RFC3339), name)
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("reserve token name %q: %w", name, err)
		}
		rev, err = kv.Update(ctx, nameKey(name), []byte(id), e.Revision())
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("reserve token name %q: %w", name, err)
		}
	}
	return 0, fmt.Errorf("reserve token name %q: it keeps changing concurrently; try again", name)
}

// get reads one token record from the bucket.
func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, id string) (*record, error) {
	e, err := s.getEntry(ctx, kv, id)
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("decode token %s: %w", id, err)
	}
	return &r, nil
}

func (s *Store) getEntry(ctx context.Context, kv jetstream.KeyValue, id string) (jetstream.KeyValueEntry, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	e, err := kv.Get(ctx, idKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read token %s: %w", id, err)
	}
	return e, nil
}

// List returns every token, active and revoked, by name (then newest
// first), read from the bucket.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	recs, err := s.load(ctx, s.bucket())
	if err != nil {
		return nil, err
	}
	out := make([]Token, 0, len(recs))
	for _, m := range recs {
		out = append(out, m.rec.Token)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Created.After(out[j].Created)
	})
	return out, nil
}

// Count returns the number of active tokens, read from the bucket.
func (s *Store) Count(ctx context.Context) (int, error) {
	list, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range list {
		if !t.Revoked() {
			n++
		}
	}
	return n, nil
}

// Revoke revokes the active token with this name, or the token with this
// id, and returns it. The token stays listed as revoked; its name is free
// again. Every gateway refuses it from its next request on.
func (s *Store) Revoke(ctx context.Context, nameOrID string) (Token, error) {
	kv := s.bucket()
	id, err := s.resolve(ctx, kv, nameOrID)
	if err != nil {
		return Token{}, err
	}
	for range 8 {
		e, err := s.getEntry(ctx, kv, id)
		if err != nil {
			return Token{}, err
		}
		var r record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return Token{}, fmt.Errorf("decode token %s: %w", id, err)
		}
		if r.Revoked() {
			return r.Token, fmt.Errorf("token %q (id %s) was already revoked at %s", r.Name, r.ID, r.RevokedAt.Format(time.RFC3339))
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		r.RevokedAt = &now
		data, err := json.Marshal(r)
		if err != nil {
			return Token{}, fmt.Errorf("encode token: %w", err)
		}
		rev, err := kv.Update(ctx, idKey(id), data, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // a last-use write came first
		}
		if err != nil {
			return Token{}, fmt.Errorf("revoke token %q: %w", r.Name, err)
		}
		s.remember(rev, r)
		// Free the name, unless it was already taken over.
		if ne, err := kv.Get(ctx, nameKey(r.Name)); err == nil && string(ne.Value()) == id {
			_ = kv.Delete(ctx, nameKey(r.Name), jetstream.LastRevision(ne.Revision()))
		}
		return r.Token, nil
	}
	return Token{}, fmt.Errorf("revoke token %s: it keeps changing concurrently; try again", id)
}

// resolve finds the id of the token nameOrID names: an id, or the name of
// an active token.
func (s *Store) resolve(ctx context.Context, kv jetstream.KeyValue, nameOrID string) (string, error) {
	var byID, byName string
	if ValidID(nameOrID) {
		if _, err := s.getEntry(ctx, kv, nameOrID); err == nil {
			byID = nameOrID
		} else if !errors.Is(err, ErrNotFound) {
			return "", err
		}
	}
	if ValidName(nameOrID) {
		e, err := kv.Get(ctx, nameKey(nameOrID))
		switch {
		case err == nil:
			byName = string(e.Value())
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return "", fmt.Errorf("look up token name %q: %w", nameOrID, err)
		}
	}
	switch {
	case byID != "" && byName != "" && byID != byName:
		return "", fmt.Errorf("%q is both a token id and the name of another token (id %s): revoke by that id", nameOrID, byName)
	case byID != "":
		return byID, nil
	case byName != "":
		return byName, nil
	}
	return "", fmt.Errorf("%w: no active token is named %q and no token has that id (sovereign token list shows them)", ErrNotFound, nameOrID)
}

// Verify checks a plaintext token against the mirror: no NATS round trip.
// It returns the token when it is known, active and its secret matches;
// otherwise an error wrapping [ErrInvalid] that says which (for logs: it
// never holds the secret). The secret's digest is compared in constant time.
func (s *Store) Verify(plaintext string) (Token, error) {
	id, secret, err := Parse(plaintext)
	if err != nil {
		return Token{}, err
	}
	m, ok := s.lookup(id)
	sum := digest(secret)
	if !ok {
		// Compare anyway, so that an unknown id costs what a known one does.
		subtle.ConstantTimeCompare(sum[:], make([]byte, sha256.Size))
		return Token{}, fmt.Errorf("%w (id %s)", ErrUnknown, id)
	}
	if subtle.ConstantTimeCompare(sum[:], m.sum[:]) != 1 {
		return Token{}, fmt.Errorf("%w (id %s)", ErrWrongSecret, id)
	}
	if m.rec.Revoked() {
		return Token{}, fmt.Errorf("%w (%q, id %s)", ErrRevoked, m.rec.Name, id)
	}
	s.touch(m)
	t := m.rec.Token
	t.URLAllow, t.URLBlock, t.Approve = slices.Clone(t.URLAllow), slices.Clone(t.URLBlock), slices.Clone(t.Approve)
	return t, nil
}

// touch writes the token's last use back when it is older than
// TouchInterval, in the background.
func (s *Store) touch(m mirrored) {
	now := time.Now()
	if m.rec.LastUsed != nil && now.Sub(*m.rec.LastUsed) < TouchInterval {
		return
	}
	s.touchMu.Lock()
	if last, ok := s.touched[m.rec.ID]; ok && now.Sub(last) < TouchInterval {
		s.touchMu.Unlock()
		return
	}
	s.touched[m.rec.ID] = now
	s.touchMu.Unlock()
	if !s.startBackground() {
		return // closing
	}
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		kv := s.bucket()
		e, err := s.getEntry(ctx, kv, m.rec.ID)
		if err != nil {
			return
		}
		var r record
		if json.Unmarshal(e.Value(), &r) != nil || r.Revoked() {
			return
		}
		used := now.UTC().Truncate(time.Second)
		r.LastUsed = &used
		if data, err := json.Marshal(r); err == nil {
			// A conflict means someone else wrote it (a revocation, another
			// gateway's last use): leave it.
			if rev, err := kv.Update(ctx, idKey(r.ID), data, e.Revision()); err == nil {
				s.remember(rev, r)
			}
		}
	}()
}

// Lookup returns the token with this id from the mirror (active or
// revoked): for naming a token in lists without a NATS round trip.
func (s *Store) Lookup(id string) (Token, bool) {
	m, ok := s.lookup(id)
	if !ok {
		return Token{}, false
	}
	t := m.rec.Token
	t.URLAllow, t.URLBlock, t.Approve = slices.Clone(t.URLAllow), slices.Clone(t.URLBlock), slices.Clone(t.Approve)
	return t, true
}
