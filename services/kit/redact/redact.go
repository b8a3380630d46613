// Package redact replaces secrets with [Marker] in tool-call arguments
// (JSON) and in free text (results, error messages), before they are
// stored or logged. It is meant for the audit trail, so it errs towards
// redacting too much: a false positive hides a little of what an operator
// sees; a miss stores a secret.
//
// [JSON] and [Text] use the rules below. A [Set] adds known secret
// values, registered at run time, that are replaced wherever they occur.
//
// # Secret names
//
// In JSON, the whole value of an object member whose key is a secret name
// is replaced, whatever its type (string, number, object, array), except
// null, true, false and "" (they tell nothing). In text, the value after a
// secret name and = or : is replaced (see below). A name is secret when
// (ignoring case, and with - _ . and camelCase as word breaks, so
// "new-password", "newPassword" and "NEW_PASSWORD" are alike):
//
//   - it contains password, passwd, passphrase, passcode, secret,
//     privatekey, privkey, apikey, mnemonic, seedphrase, seedwords,
//     ncryptsec, credential, authorization, cookie, accesstoken,
//     refreshtoken, authtoken, bearertoken or sessiontoken
//     (so private_key, x-api-key, bunker_secret, client_secret);
//   - or one of its words is nsec, pwd or pass (nsec_key, but not
//     "insecure");
//   - or its last word is token, seed, pin, otp or totp (access_token,
//     csrfToken, but not token_count or max_tokens);
//   - or it is words or auth.
//
// "key" alone is not a secret name: press takes {"key": "Enter"}. Nor is a
// 64-hex value secret by its look: it is as often a public key or an
// event id as a private key. It is redacted under a secret name
// (private_key, privkey, nsec, secret_key, ...) like any value. See
// [IsSecretName].
//
// # Secret values
//
// In every JSON string (values and keys, after decoding escapes) and in
// text:
//
//   - nsec1 followed by at least 58 bech32 characters (a NIP-19 private
//     key), and ncryptsec1 likewise (a NIP-49 encrypted key), in either
//     case: the whole string.
//   - A run of 12 or more words of the BIP-39 English list separated only
//     by whitespace: the whole run. Any run of 12 or more is taken, not
//     only runs of exactly 12, 15, 18, 21 or 24 words, so that a mnemonic
//     next to another list word is still caught. Ordinary prose rarely
//     trips this: the list has no "the", "a", "of", "and", "to", "is" or
//     "in", so an English sentence seldom has 12 list words in a row.
//     Words split by commas or numbers ("1. abandon 2. ability") are not
//     caught, nor are mnemonics in other languages.
//   - name=value and name: value where name is a secret name: only the
//     value. This covers URL queries (a bunker:// or nostrconnect:// URL
//     keeps everything but its secret= value; ?access_token=...), form
//     bodies, cookies (session_token=...; Path=/), command lines
//     (--password=...), JSON and JavaScript in text ("password": "...",
//     {password: '...'}, el.password = "...") and header or prose lines
//     (Authorization: Bearer ... and Password: ... lose the rest of the
//     line). The name is a quoted string, or a run of letters, digits,
//     dashes, underscores, dots and brackets (user[password]). The value
//     is a quoted string (", ' or `, or \" inside a quoted string), or a
//     bare word up to whitespace, a quote or one of & ; , ( ) [ ] { } < >
//     # \. After =, a bare value must follow without a space, so
//     "password = getPassword()" keeps its call; a quoted value may follow
//     spaces. ==, != and the like are not assignments. null, true and
//     false are kept, and so is a JSON object or array under a secret
//     name inside text.
//
// Secrets that are neither named nor shaped like these (a password typed
// into a field of an eval script, say) need a [Set].
//
// # Cost
//
// A call takes time linear in the size of its input: one pass to parse
// the JSON, a few fast passes over each string for the patterns, and one
// more for each value of a Set. It allocates nothing when nothing is
// replaced, except to decode a string with escapes longer than 64 KB.
// BenchmarkJSON measures it (about 15 µs for 4 KB of eval script).
package redact

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Marker replaces each secret.
const Marker = "[redacted]"

// MinKnownLen is the shortest value a [Set] accepts: shorter known values
// would redact ordinary words and numbers.
const MinKnownLen = 6

// JSON returns the JSON text args with the secrets in it replaced by
// Marker (as the JSON string "[redacted]" where a whole value goes). The
// result is valid JSON when args is, with the same structure and, for what
// is not secret, the same bytes: keys keep their order, numbers their
// spelling. A string that contains a secret and escapes is re-encoded.
//
// When args is not valid JSON, JSON returns [Text] of it. It never panics.
//
// JSON does not modify args; when nothing is secret it returns args
// itself, so a caller that keeps the result must not modify args later.
func JSON(args []byte) []byte {
	return redactBytes(args, nil)
}

// Text returns s with the secret values in it replaced by Marker (see
// the package documentation). It returns s itself when nothing is secret.
func Text(s string) string {
	return redactText(s, nil)
}

// A Set is a set of known secret values that are replaced, besides what
// the package-level functions replace, wherever they occur as substrings
// (exactly, case-sensitively). Its methods are safe for concurrent use;
// the zero Set is empty and ready to use, and a nil *Set behaves as an
// empty one.
//
// A Set costs one search through the text for each value in it, so it is
// meant for tens of values, not thousands.
type Set struct {
	mu     sync.Mutex
	values map[string]struct{}
	// list is the values as a slice, replaced (never modified) on change,
	// so readers take no lock.
	list atomic.Pointer[[]string]
}

// Add adds a known secret value. It returns false, and adds nothing, when
// the value is shorter than MinKnownLen bytes.
func (s *Set) Add(value string) bool {
	if len(value) < MinKnownLen {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[value]; ok {
		return true
	}
	if s.values == nil {
		s.values = make(map[string]struct{})
	}
	s.values[value] = struct{}{}
	s.publish()
	return true
}

// Remove removes a known value; a value not in the set is ignored.
func (s *Set) Remove(value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[value]; !ok {
		return
	}
	delete(s.values, value)
	s.publish()
}

// Len returns the number of known values.
func (s *Set) Len() int {
	return len(s.known())
}

func (s *Set) publish() {
	list := make([]string, 0, len(s.values))
	for v := range s.values {
		list = append(list, v)
	}
	s.list.Store(&list)
}

func (s *Set) known() []string {
	if s == nil {
		return nil
	}
	if l := s.list.Load(); l != nil {
		return *l
	}
	return nil
}

// JSON is like the package-level [JSON], and also replaces the known
// values.
func (s *Set) JSON(args []byte) []byte {
	return redactBytes(args, s.known())
}

// Text is like the package-level [Text], and also replaces the known
// values.
func (s *Set) Text(text string) string {
	return redactText(text, s.known())
}

func redactBytes(args []byte, known []string) []byte {
	in := viewString(args)
	out, changed, ok := redactJSON(in, known)
	switch {
	case !ok:
		if t := redactText(in, known); !sameString(t, in) {
			return []byte(t)
		}
		return args
	case changed:
		return out
	}
	return args
}

func redactText(s string, known []string) string {
	sc := scanners.Get().(*scanner)
	sc.known = known
	defer func() {
		sc.known = nil
		if cap(sc.spans) > 1024 {
			sc.spans = nil
		}
		scanners.Put(sc)
	}()
	if !sc.find(s) {
		return s
	}
	return apply(s, sc.spans)
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// viewString returns b as a string without copying; b must not change
// while the string is in use.
func viewString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// sameString reports whether a and b are the same string in memory.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}
