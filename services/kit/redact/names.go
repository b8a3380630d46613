package redact

import (
	"strings"
	"unsafe"
)

// Secret names. A name (a JSON object key, or the name before = or : in
// free text) is split into words at separators (anything but ASCII
// letters and digits) and at camelCase boundaries, and lower-cased:
// "X-Api-Key" is x, api, key; "newPassword" is new, password;
// "APIToken" is api, token. Its squashed form is the words run together
// ("xapikey"). The name is secret when:
//
//   - its squashed form contains one of nameContains, so that
//     "newpassword", "user_password" and "client-secret" all count; or
//   - one of its words is in nameWords (words too short or too common to
//     look for inside others: "nsec" is inside "insecure"); or
//   - its last word is in nameLastWords: "access_token" and "csrfToken"
//     are secret, "token_count" and "max_tokens" are not; or
//   - its squashed form is in nameExact.
//
// "key" alone is not secret: press takes {"key": "Enter"}, and a 64-hex
// "key" is as often a public key or an event id as a private key. A 64-hex
// value is redacted only under a secret name (private_key, privkey, nsec,
// secret_key, ...), never by its look.
var (
	nameContains = []string{
		"password", "passwd", "passphrase", "passcode",
		"secret", // client_secret, bunker_secret, secret_key, secrets
		"privatekey", "privkey",
		"apikey",
		"mnemonic", "seedphrase", "seedwords",
		"ncryptsec",
		"credential",
		"authorization",
		"cookie",
		"accesstoken", "refreshtoken", "authtoken", "bearertoken", "sessiontoken",
	}
	nameWords     = []string{"nsec", "pwd", "pass"}
	nameLastWords = []string{"token", "seed", "pin", "otp", "totp"}
	nameExact     = []string{"words", "auth"}
)

// maxName is the longest name that is examined; a longer name is not
// secret (no real argument or parameter name is this long).
const maxName = 128

// needle is a string that a squashed name is searched for: one of
// nameContains (contains true), or of nameWords and nameLastWords, which
// a name must contain before it is split into words.
type needle struct {
	s        string
	contains bool
}

// needles holds groups of needles that start with the same pair of
// letters or digits, and pairs the group of each pair (0 for none), so
// that a name is searched with one table look-up at each byte.
var needles, pairs = func() (groups [][]needle, t [36 * 36]uint8) {
	groups = [][]needle{nil}
	add := func(s string, contains bool) {
		i := pairIndex(s[0], s[1])
		if t[i] == 0 {
			t[i] = uint8(len(groups))
			groups = append(groups, nil)
		}
		groups[t[i]] = append(groups[t[i]], needle{s, contains})
	}
	for _, s := range nameContains {
		add(s, true)
	}
	for _, s := range nameWords {
		add(s, false)
	}
	for _, s := range nameLastWords {
		add(s, false)
	}
	return groups, t
}()

// pairIndex returns the index in pairs of two lower-case letters or
// digits.
func pairIndex(a, b byte) int {
	return alnumIndex(a)*36 + alnumIndex(b)
}

func alnumIndex(c byte) int {
	if c >= 'a' {
		return int(c - 'a')
	}
	return int(c-'0') + 26
}

// IsSecretName reports whether a value under this name (a JSON object key,
// a URL query parameter, a form field name) is secret, so that the whole
// value is redacted whatever it looks like. See the package documentation
// for the list.
func IsSecretName(name string) bool {
	if len(name) < 3 || len(name) > maxName {
		return false
	}
	// The squashed form: lower-cased letters and digits.
	var buf [maxName]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		default:
			continue
		}
		buf[n] = c
		n++
	}
	if n < 3 {
		return false
	}
	squashed := unsafe.String(&buf[0], n) // a view of buf: no allocation
	for _, s := range nameExact {
		if squashed == s {
			return true
		}
	}
	words := false
	for i := 0; i+1 < n; i++ {
		g := pairs[pairIndex(buf[i], buf[i+1])]
		if g == 0 {
			continue
		}
		for _, nd := range needles[g] {
			if strings.HasPrefix(squashed[i:], nd.s) {
				if nd.contains {
					return true
				}
				words = true
			}
		}
	}
	return words && secretWords(name)
}

// secretWords reports whether a word of name is in nameWords or its last
// word in nameLastWords.
func secretWords(name string) bool {
	var buf [maxName]byte
	var ends [maxName]int
	words := splitWords(name, &buf, &ends)
	start := 0
	for w := 0; w < words; w++ {
		word := unsafe.String(&buf[start], ends[w]-start) // a view of buf
		start = ends[w]
		for _, s := range nameWords {
			if word == s {
				return true
			}
		}
		if w == words-1 {
			for _, s := range nameLastWords {
				if word == s {
					return true
				}
			}
		}
	}
	return false
}

// splitWords splits name (at most maxName bytes) into lower-cased words,
// run together in buf; word i ends at ends[i]. It returns the number of
// words. Words break at bytes other than ASCII letters and digits, and at
// camelCase boundaries: before an upper-case letter that follows a
// lower-case letter or a digit (newPassword), and before the last
// upper-case letter of a run that a lower-case letter follows (APIToken:
// API, Token).
func splitWords(name string, buf *[maxName]byte, ends *[maxName]int) int {
	n, words := 0, 0
	var prev byte // the class of the previous byte: 0 other, 'l' lower, 'u' upper, 'd' digit
	for i := 0; i < len(name); i++ {
		c := name[i]
		var class byte
		switch {
		case c >= 'a' && c <= 'z':
			class = 'l'
		case c >= 'A' && c <= 'Z':
			class = 'u'
			c += 'a' - 'A'
		case c >= '0' && c <= '9':
			class = 'd'
		}
		inWord := n > 0 && (words == 0 || ends[words-1] < n)
		switch {
		case class == 0:
			if inWord {
				ends[words], words = n, words+1
			}
			prev = 0
			continue
		case class == 'u' && inWord:
			next := byte(0)
			if i+1 < len(name) {
				next = name[i+1]
			}
			if prev == 'l' || prev == 'd' || (prev == 'u' && next >= 'a' && next <= 'z') {
				ends[words], words = n, words+1
			}
		}
		buf[n] = c
		n++
		prev = class
	}
	if n > 0 && (words == 0 || ends[words-1] < n) {
		ends[words], words = n, words+1
	}
	return words
}
