package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/sovereign-fleet/sovereign/services/kit/kvmirror"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// Cache keeps the decrypted secrets in memory for a browser worker and
// follows the bucket (a [kvmirror.Mirror]): a set or delete takes effect
// within the watch's delivery time (milliseconds on one NATS). After a
// reconnect to NATS, or when the watch ends, the cache watches the bucket
// again (opening or creating it), applies what changed meanwhile and drops
// the secrets the new watch does not list; until then it keeps what it
// had. Every value it lets go is zeroed. Its methods are safe for
// concurrent use. A nil *Cache (a process without a key) has no secrets:
// Scrub returns its input, and Substitute refuses every placeholder with
// an error that says so.
type Cache struct {
	store  *Store
	mirror *kvmirror.Mirror[*entry] // by name

	// The entries, the matcher and the redact sets change together under
	// mu, so a reader never sees a value the matcher lacks; a value is
	// zeroed under mu too, when neither holds it any more.
	mu      sync.RWMutex
	entries map[string]*entry
	m       *matcher // built from entries; nil when there is nothing to scrub
	margin  int      // see Margin
	feeds   []*redact.Set
	loading bool // the first values are arriving: the matcher waits
	closed  bool
}

// entry is one secret in the cache.
type entry struct {
	value    []byte   // nil when err is set
	variants [][]byte // the forms Scrub replaces (variants[0] is a copy of value)
	err      error    // why the value cannot be read (another key, tampered)
}

// wipe zeroes the entry's value and variants.
func (e *entry) wipe() {
	clear(e.value)
	for _, v := range e.variants {
		clear(v)
	}
	e.value, e.variants = nil, nil
}

// Watch loads every secret and returns a cache that follows the bucket
// until Close. ctx bounds the initial load only. The store needs a key.
func (s *Store) Watch(ctx context.Context) (*Cache, error) {
	if err := s.needKey(); err != nil {
		return nil, err
	}
	// loading: nobody can scrub before Watch returns, so the matcher is
	// built once, at the end of the initial values.
	c := &Cache{store: s, entries: make(map[string]*entry), loading: true}
	m, err := kvmirror.New(ctx, s.b, kvmirror.Options[*entry]{
		Decode:   c.open,
		OnChange: c.changed,
		Discard:  c.discard,
	})
	if err != nil {
		return nil, fmt.Errorf("load secrets: %w", err)
	}
	c.mu.Lock()
	c.mirror = m
	c.loading = false
	c.rebuild()
	c.mu.Unlock()
	live.add(c)
	return c, nil
}

// open decrypts a stored secret; one that cannot be read is kept with its
// error (see Check).
func (c *Cache) open(name string, val []byte) (*entry, error) {
	next := &entry{}
	r, err := decode(name, val)
	if err == nil && ValidName(name) != nil {
		err = fmt.Errorf("secret %q: not a valid secret name", name)
	}
	if err == nil {
		next.value, err = c.store.key.open(name, r)
	}
	if err != nil {
		next.err = err
	} else {
		next.variants = variants(next.value)
	}
	return next, nil
}

// changed installs the mirror's new value of name (or removes it: ok
// false) and zeroes the one it replaces.
func (c *Cache) changed(name string, e *entry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return // discard zeroes e
	}
	if old := c.entries[name]; old != nil && old != e {
		c.drop(name, old)
	}
	if ok {
		c.entries[name] = e
		c.feed(e, true)
	}
	if !c.loading {
		c.rebuild()
	}
}

// discard zeroes a value the mirror let go, first removing it from the
// entries if it is still there (the mirror was emptied for a bucket made
// again).
func (c *Cache) discard(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, x := range c.entries {
		if x == e {
			c.drop(name, e)
			if !c.loading {
				c.rebuild()
			}
			return
		}
	}
	e.wipe()
}

// drop removes an entry and zeroes it; the caller holds mu and rebuilds.
func (c *Cache) drop(name string, e *entry) {
	delete(c.entries, name)
	c.feed(e, false)
	// The matcher may still point at e's variants: replace it before they
	// are zeroed.
	c.m = nil
	e.wipe()
}

// feed adds or removes e's forms to or from the redact sets; a form that
// another secret shares stays. The caller holds mu; the mirror no longer
// has e when it removes.
func (c *Cache) feed(e *entry, add bool) {
	if len(e.value) < MinScrubLen || len(c.feeds) == 0 {
		return
	}
	for _, v := range e.variants {
		if !add && c.shared(v) {
			continue
		}
		for _, set := range c.feeds {
			if add {
				set.Add(string(v))
			} else {
				set.Remove(string(v))
			}
		}
	}
}

// shared reports whether an entry has the form v.
func (c *Cache) shared(v []byte) bool {
	for _, o := range c.entries {
		if len(o.value) < MinScrubLen {
			continue
		}
		for _, w := range o.variants {
			if bytes.Equal(v, w) {
				return true
			}
		}
	}
	return false
}

// rebuild makes the matcher from the entries; the caller holds mu.
func (c *Cache) rebuild() {
	var ps []*pattern
	c.margin = 0
	for name, e := range c.entries {
		if len(e.value) < MinScrubLen {
			continue
		}
		repl := Placeholder(name)
		c.margin = max(c.margin, maxExpansion*len(e.value))
		for _, v := range e.variants {
			ps = append(ps, &pattern{b: v, repl: repl})
			c.margin = max(c.margin, len(v))
		}
	}
	if len(ps) == 0 {
		c.m = nil
		return
	}
	c.m = newMatcher(ps)
}

// Close stops following the bucket and zeroes the values. Substitute
// then finds no secret, and Scrub replaces nothing.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	live.remove(c)
	c.mu.Lock()
	c.closed = true
	for name, e := range c.entries {
		c.drop(name, e)
	}
	c.mu.Unlock()
	c.mirror.Close() // zeroes what arrived meanwhile
}

// Feed keeps set holding the forms of every secret value that Scrub
// replaces (values of at least [MinScrubLen] bytes; set itself ignores
// values shorter than [redact.MinKnownLen]), so that an audit publisher
// using set redacts them too. Removed and replaced values leave set.
func (c *Cache) Feed(set *redact.Set) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feeds = append(c.feeds, set)
	for _, e := range c.entries {
		if len(e.value) >= MinScrubLen {
			for _, v := range e.variants {
				set.Add(string(v))
			}
		}
	}
}

// Names returns the names of the secrets in the cache, sorted, including
// those that cannot be decrypted (see Check).
func (c *Cache) Names() []string {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.entries))
}

// Has reports whether the secret name is in the cache and readable.
func (c *Cache) Has(name string) bool {
	if c == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.entries[name]
	return e != nil && e.err == nil
}

// Check returns an error for each secret that this process cannot
// decrypt (another key, an altered record), joined; nil when all can be.
func (c *Cache) Check() error {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.entries)) {
		if err := c.entries[name].err; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Scrub returns s with every secret value (of at least [MinScrubLen]
// bytes), and its percent-encoded, HTML-escaped, JSON-escaped and base64
// forms, replaced by the secret's placeholder {{secrets.NAME}}. Matches are
// taken left to right, the longest where several start at one place, and
// never overlap. It returns s itself when nothing matches; the cost is
// one pass over s.
func (c *Cache) Scrub(s string) string {
	if c == nil {
		return s
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.m == nil {
		return s
	}
	return c.m.replace(s)
}

// ScrubJSON is Scrub for JSON text: the result is valid JSON when b is.
// Strings are scrubbed after decoding their escapes and re-encoded when
// they change; a number or literal that holds a value (a PIN) becomes the
// placeholder as a string. Invalid JSON is scrubbed as text. It returns b
// itself when nothing matches, and never modifies b.
func (c *Cache) ScrubJSON(b []byte) []byte {
	if c == nil {
		return b
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.m == nil {
		return b
	}
	return c.m.scrubJSON(b)
}

// Substitute replaces every placeholder {{secrets.NAME}} in s (spaces
// and tabs may pad the inside: {{ secrets.NAME }}) with the value, and
// returns the names it used, each once, in order of appearance. Other
// {{...}} text is left alone. An unknown or unreadable secret, or a
// malformed placeholder, is an error that names it; no error ever holds
// a value. Text without "{{" is returned at once.
func (c *Cache) Substitute(s string) (string, []string, error) {
	return c.substitute(s, false)
}

// SubstituteJSON is Substitute for JSON text: each value is written
// JSON-escaped, so that a placeholder inside a JSON string yields a valid
// string holding the value.
func (c *Cache) SubstituteJSON(b []byte) ([]byte, []string, error) {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	out, used, err := c.substitute(s, true)
	if err != nil || sameString(out, s) {
		return b, used, err
	}
	return []byte(out), used, nil
}

// placeholderPrefix starts a placeholder after "{{" and any spaces.
const placeholderPrefix = "secrets."

func (c *Cache) substitute(s string, jsonEscaped bool) (string, []string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil, nil
	}
	var entries map[string]*entry
	if c != nil {
		c.mu.RLock()
		defer c.mu.RUnlock()
		entries = c.entries
	}
	var (
		b    strings.Builder
		used []string
		errs []error
		done int
	)
	for from := 0; ; {
		k := strings.Index(s[from:], "{{")
		if k < 0 {
			break
		}
		start := from + k
		name, end, ok, err := parsePlaceholder(s, start)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			from = start + 1 // "{{{secrets.X}}}" holds one at start+1
			continue
		}
		from = end
		e := entries[name]
		switch {
		case c == nil:
			errs = append(errs, fmt.Errorf("cannot fill {{secrets.%s}}: this process has no secret key, so it has no secrets (%w)", name, ErrNoKey))
			continue
		case e == nil:
			errs = append(errs, fmt.Errorf("%w %q: set it with sovereign secret set %s", ErrUnknownSecret, name, name))
			continue
		case e.err != nil:
			errs = append(errs, e.err)
			continue
		}
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
		if len(errs) > 0 {
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s) + len(e.value))
		}
		b.WriteString(s[done:start])
		if jsonEscaped {
			esc := jsonEscape(e.value, false, false)
			b.Write(esc)
			clear(esc)
		} else {
			b.Write(e.value)
		}
		done = end
	}
	if len(errs) > 0 {
		return s, nil, errors.Join(errs...)
	}
	if len(used) == 0 {
		return s, nil, nil
	}
	b.WriteString(s[done:])
	return b.String(), used, nil
}

// parsePlaceholder reads the placeholder at s[start:] ("{{"): ok false
// when it is not one (other {{...}} text), an error when it starts as one
// but is malformed.
func parsePlaceholder(s string, start int) (name string, end int, ok bool, err error) {
	i := skipBlanks(s, start+2)
	if !strings.HasPrefix(s[i:], placeholderPrefix) {
		return "", 0, false, nil
	}
	i += len(placeholderPrefix)
	j := i
	for j < len(s) && (s[j] == '_' || (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= '0' && s[j] <= '9')) {
		j++
	}
	name = s[i:j]
	k := skipBlanks(s, j)
	if !strings.HasPrefix(s[k:], "}}") {
		return "", 0, false, fmt.Errorf("malformed secret placeholder %q: write {{secrets.NAME}}, NAME being letters, digits and _", abbreviate(s[start:min(len(s), k+2)]))
	}
	if verr := ValidName(name); verr != nil {
		return "", 0, false, fmt.Errorf("secret placeholder %q: %w", abbreviate(s[start:k+2]), verr)
	}
	return name, k + 2, true, nil
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// abbreviate shortens placeholder text quoted in an error.
func abbreviate(s string) string {
	if len(s) > 90 {
		return s[:90] + "…"
	}
	return s
}
