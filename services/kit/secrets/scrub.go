package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Placeholder returns {{secrets.NAME}}, the text that stands for a secret.
func Placeholder(name string) string { return "{{secrets." + name + "}}" }

// pattern is one form of a secret value and what replaces it.
type pattern struct {
	b    []byte
	repl string
}

// matcher finds the leftmost, and there the longest, of a set of patterns
// of at least 4 bytes in one pass. A bitset over a hash of the 4 bytes at
// each position rules out almost every position with a load, a multiply
// and a bit test; candidates are checked in a map of the patterns by their
// first 4 bytes, longest first.
type matcher struct {
	bits   [1 << 16 / 64]uint64
	heads  map[uint32][]*pattern
	maxLen int // the longest pattern
}

func head(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

func hash16(x uint32) uint32 { return (x * 0x9E3779B1) >> 16 }

// newMatcher builds a matcher; patterns shorter than 4 bytes are ignored.
// It keeps the patterns' bytes (no copy).
func newMatcher(ps []*pattern) *matcher {
	m := &matcher{heads: make(map[uint32][]*pattern)}
	for _, p := range ps {
		if len(p.b) < 4 {
			continue
		}
		x := head(unsafe.String(unsafe.SliceData(p.b), len(p.b)), 0)
		h := hash16(x)
		m.bits[h>>6] |= 1 << (h & 63)
		m.heads[x] = append(m.heads[x], p)
		m.maxLen = max(m.maxLen, len(p.b))
	}
	for _, l := range m.heads {
		slices.SortStableFunc(l, func(a, b *pattern) int { return len(b.b) - len(a.b) })
	}
	return m
}

// find returns the first match in s at or after from: its start and
// pattern; -1 when there is none.
func (m *matcher) find(s string, from int) (int, *pattern) {
	return m.findUntil(s, from, len(s))
}

// findUntil is find for matches that start before until.
func (m *matcher) findUntil(s string, from, until int) (int, *pattern) {
	if m == nil || len(m.heads) == 0 {
		return -1, nil
	}
	for i := from; i+4 <= len(s) && i < until; i++ {
		x := head(s, i)
		h := hash16(x)
		if m.bits[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, p := range m.heads[x] {
			if len(p.b) <= len(s)-i && s[i:i+len(p.b)] == unsafe.String(unsafe.SliceData(p.b), len(p.b)) {
				return i, p
			}
		}
	}
	return -1, nil
}

// replace returns s with every match replaced, in s and in its decoded
// forms (decode.go); s itself when nothing matched.
func (m *matcher) replace(s string) string {
	if m == nil || len(m.heads) == 0 {
		return s
	}
	return apply(s, merge(m.spans(nil, s, 0)))
}

// variants returns the forms of v that text may show it in, each once,
// v first: percent-encoded (as in a query with + for space, as
// encodeURIComponent, and as a path segment), HTML-escaped (Go's and the
// browser's serialisations), JSON-string-escaped (with and without
// \u003c-style escapes of <, > and &, and with every non-ASCII character
// escaped) and base64 (standard and URL alphabet, padded and not). All
// are freshly allocated, so that they can be zeroed.
func variants(v []byte) [][]byte {
	out := [][]byte{bytes.Clone(v)}
	add := func(b []byte) {
		for _, o := range out {
			if bytes.Equal(o, b) {
				clear(b)
				return
			}
		}
		out = append(out, b)
	}
	add(percent(v, queryKeep, true))
	add(percent(v, componentKeep, false))
	add(percent(v, pathKeep, false))
	add(percent(v, whatwgPathKeep, false))  // what Chromium shows in a URL's path
	add(percent(v, whatwgQueryKeep, false)) // and in its query
	add(htmlEscape(v, `&amp;`, `&lt;`, `&gt;`, `&#34;`, `&#39;`))
	add(htmlEscape(v, `&amp;`, `&lt;`, `&gt;`, `&quot;`, `'`))
	add(htmlEscape(v, `&amp;`, `&lt;`, `&gt;`, `"`, `'`))
	add(jsonEscape(v, true, false))
	add(jsonEscape(v, false, false))
	add(jsonEscape(v, false, true))
	if bytes.IndexByte(v, ' ') >= 0 {
		add(bytes.ReplaceAll(v, []byte(" "), []byte("+"))) // a form's + for space, other bytes as they are
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		b := make([]byte, enc.EncodedLen(len(v)))
		enc.Encode(b, v)
		add(b)
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for align := range 3 {
			add(base64Core(enc, v, align))
		}
	}
	return out
}

// base64Core returns the part of the base64 of a longer text that depends
// on v alone, where v starts align bytes after a multiple of 3: the
// characters whose 6 bits all come from v. So a value inside a longer
// base64 blob (a data: URL, a JSON field holding a file) is found
// whatever precedes and follows it.
func base64Core(enc *base64.Encoding, v []byte, align int) []byte {
	padded := make([]byte, align+len(v))
	copy(padded[align:], v)
	full := make([]byte, enc.EncodedLen(len(padded)))
	enc.Encode(full, padded)
	clear(padded)
	first := (8*align + 5) / 6  // the first character without bits of the bytes before v
	last := 8 * len(padded) / 6 // characters before this one have no bits of the bytes after v
	core := bytes.Clone(full[first:last])
	clear(full)
	return core
}

// Which bytes stay as they are when percent-encoding (besides letters
// and digits).
const (
	queryKeep     = "-_.~"         // url.QueryEscape, HTML forms (but ~)
	componentKeep = "-_.!~*'()"    // encodeURIComponent
	pathKeep      = "-_.~$&+,:;=@" // url.PathEscape
	upperHex      = "0123456789ABCDEF"
)

// The WHATWG URL standard's path and special-query percent-encode sets, as
// what they keep: every printable ASCII byte but a few.
var (
	whatwgPathKeep  = printableExcept("\"#<>?`{}")
	whatwgQueryKeep = printableExcept("\"#<>'")
)

func printableExcept(enc string) string {
	var b []byte
	for c := byte(0x21); c < 0x7f; c++ {
		if bytes.IndexByte([]byte(enc), c) < 0 {
			b = append(b, c)
		}
	}
	return string(b)
}

func percent(v []byte, keep string, spacePlus bool) []byte {
	out := make([]byte, 0, len(v)*3)
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', bytes.IndexByte([]byte(keep), c) >= 0:
			out = append(out, c)
		case c == ' ' && spacePlus:
			out = append(out, '+')
		default:
			out = append(out, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return out
}

func htmlEscape(v []byte, amp, lt, gt, quot, apos string) []byte {
	out := make([]byte, 0, len(v)+16)
	for _, c := range v {
		switch c {
		case '&':
			out = append(out, amp...)
		case '<':
			out = append(out, lt...)
		case '>':
			out = append(out, gt...)
		case '"':
			out = append(out, quot...)
		case '\'':
			out = append(out, apos...)
		default:
			out = append(out, c)
		}
	}
	return out
}

// jsonEscape writes v as the inside of a JSON string: as encoding/json
// does (htmlSafe: <, > and & as \u003c...; U+2028 and U+2029 escaped), as
// JavaScript's JSON.stringify does (neither), or with every non-ASCII
// character as \uXXXX (Python's json.dumps).
func jsonEscape(v []byte, htmlSafe, ascii bool) []byte {
	return appendJSONEscaped(make([]byte, 0, len(v)+16), v, htmlSafe, ascii)
}

// appendJSONEscaped appends v escaped as jsonEscape describes to out.
func appendJSONEscaped(out, v []byte, htmlSafe, ascii bool) []byte {
	const lowerHex = "0123456789abcdef"
	u := func(r rune) {
		out = append(out, '\\', 'u', lowerHex[r>>12&15], lowerHex[r>>8&15], lowerHex[r>>4&15], lowerHex[r&15])
	}
	run := 0 // v[run:i] needs no escaping
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!htmlSafe || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			out = append(out, v[run:i]...)
			switch {
			case c == '"' || c == '\\':
				out = append(out, '\\', c)
			case c == '\n':
				out = append(out, '\\', 'n')
			case c == '\r':
				out = append(out, '\\', 'r')
			case c == '\t':
				out = append(out, '\\', 't')
			case c == '\b':
				out = append(out, '\\', 'b')
			case c == '\f':
				out = append(out, '\\', 'f')
			default:
				u(rune(c))
			}
			i++
			run = i
			continue
		}
		if !ascii && (!htmlSafe || c != 0xE2) {
			i++
			continue
		}
		r, n := utf8.DecodeRune(v[i:])
		switch {
		case ascii && r > 0xFFFF:
			out = append(out, v[run:i]...)
			r1, r2 := surrogates(r)
			u(r1)
			u(r2)
		case ascii || r == '\u2028' || r == '\u2029':
			out = append(out, v[run:i]...)
			u(r)
		default:
			i += n
			continue
		}
		i += n
		run = i
	}
	return append(out, v[run:]...)
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// scrubJSON replaces the patterns in the JSON text b and keeps it valid:
// strings are decoded (when they have escapes), scrubbed and re-encoded,
// and a number or literal that holds a value becomes the placeholder as a
// string. Invalid JSON is scrubbed as text. It returns b itself when
// nothing matched.
func (m *matcher) scrubJSON(b []byte) []byte {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	if m == nil || len(m.heads) == 0 {
		return b
	}
	if !json.Valid(b) {
		if out := m.replace(s); !sameString(out, s) {
			return []byte(out)
		}
		return b
	}
	var out []byte // nil until the first change
	done := 0
	emit := func(start, end int, with ...string) {
		if out == nil {
			out = make([]byte, 0, len(b)+len(b)/8)
		}
		out = append(out, s[done:start]...)
		for _, w := range with {
			out = append(out, w...)
		}
		done = end
	}
	var dec []byte // a decoded string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			end, escaped := stringEnd(s, i)
			inner := s[i+1 : end-1]
			if !escaped {
				// No escapes: every match lies inside the string, and a
				// placeholder needs no escaping.
				for _, x := range merge(m.spans(nil, inner, 0)) {
					emit(i+1+x.start, i+1+x.end, x.repl)
				}
			} else {
				dec = unquote(dec[:0], inner)
				ds := unsafe.String(unsafe.SliceData(dec), len(dec))
				if rep := m.replace(ds); !sameString(rep, ds) {
					emit(i, end, `"`)
					out = appendJSONEscaped(out, unsafe.Slice(unsafe.StringData(rep), len(rep)), false, false)
					out = append(out, '"')
				}
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'):
			j := i + 1
			for j < len(s) && (s[j] == '-' || s[j] == '+' || s[j] == '.' || (s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'z') || s[j] == 'E') {
				j++
			}
			if _, p := m.find(s[i:j], 0); p != nil {
				emit(i, j, `"`, p.repl, `"`)
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return b
	}
	return append(out, s[done:]...)
}

// unquote appends the inside of a valid JSON string, decoded, to out.
func unquote(out []byte, inner string) []byte {
	for i := 0; i < len(inner); {
		k := strings.IndexByte(inner[i:], '\\')
		if k < 0 {
			return append(out, inner[i:]...)
		}
		out = append(out, inner[i:i+k]...)
		i += k + 1 // past the backslash
		c := inner[i]
		i++
		switch c {
		case 'b', 'f', 'n', 'r', 't':
			out = append(out, controlEscapes[c])
		case 'u':
			r := hex4(inner[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if strings.HasPrefix(inner[i:], `\u`) {
					r2 = hex4(inner[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // " \ /
			out = append(out, c)
		}
	}
	return out
}

// hex4 reads 4 hex digits (valid JSON has them).
func hex4(s string) rune {
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// stringEnd returns the index after the closing quote of the JSON string
// that starts at s[i], and whether it has escapes. s is valid JSON.
func stringEnd(s string, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return len(s), escaped
}

// sameString reports whether a and b are the same string in memory.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}
