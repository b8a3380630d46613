package redact

import (
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of arrays and objects that JSON accepts
// (as encoding/json); deeper input is treated as invalid JSON.
const maxDepth = 10000

// quotedMarker is Marker as a JSON string.
const quotedMarker = `"` + Marker + `"`

// parser validates JSON (RFC 8259, as encoding/json.Valid) and redacts it
// in the same pass. It copies nothing until the first replacement.
type parser struct {
	s     string // the input
	i     int    // the next byte to read
	depth int
	// quiet > 0 while a value under a secret name is read: it is replaced
	// as a whole, so nothing inside it is.
	quiet int
	// keySecret is set by str for an object key: whether it is a secret
	// name.
	keySecret bool

	out  []byte // nil until the first replacement
	done int    // s[:done] is in out

	sc      scanner
	scratch []byte // decoded strings
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// redactJSON returns args redacted, or ok false when args is not valid
// JSON.
func redactJSON(args string, known []string) (out []byte, changed, ok bool) {
	p := parsers.Get().(*parser)
	*p = parser{s: args, sc: scanner{known: known, spans: p.sc.spans[:0]}, scratch: p.scratch[:0]}
	defer func() {
		if cap(p.scratch) > 64<<10 {
			p.scratch = nil
		}
		if cap(p.sc.spans) > 1024 {
			p.sc.spans = nil
		}
		p.s, p.out, p.sc.known = "", nil, nil
		parsers.Put(p)
	}()
	p.ws()
	if !p.value(false) {
		return nil, false, false
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, false, false
	}
	if p.out == nil {
		return nil, false, true
	}
	return append(p.out, p.s[p.done:]...), true, true
}

// replace replaces s[start:end] with with.
func (p *parser) replace(start, end int, with string) {
	if p.out == nil {
		p.out = make([]byte, 0, len(p.s)+len(with))
	}
	p.out = append(p.out, p.s[p.done:start]...)
	p.out = append(p.out, with...)
	p.done = end
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads one value; secret says that it is under a secret name, so
// it is replaced by Marker unless it is null, false, true or "".
func (p *parser) value(secret bool) bool {
	if p.i >= len(p.s) {
		return false
	}
	start := p.i
	if secret {
		p.quiet++
	}
	var ok, keep bool
	switch c := p.s[p.i]; {
	case c == '{':
		ok = p.object()
	case c == '[':
		ok = p.array()
	case c == '"':
		ok = p.str(false)
		keep = p.i-start == 2 // ""
	case c == '-' || (c >= '0' && c <= '9'):
		ok = p.number()
		if ok && !secret && p.quiet == 0 {
			// A known value in a number (a PIN, say) takes the number.
			for _, v := range p.sc.known {
				if strings.Contains(p.s[start:p.i], v) {
					p.replace(start, p.i, quotedMarker)
					break
				}
			}
		}
	case c == 't':
		ok, keep = p.literal("true"), true
	case c == 'f':
		ok, keep = p.literal("false"), true
	case c == 'n':
		ok, keep = p.literal("null"), true
	}
	if secret {
		p.quiet--
		if ok && !keep && p.quiet == 0 {
			p.replace(start, p.i, quotedMarker)
		}
	}
	return ok
}

func (p *parser) literal(lit string) bool {
	if !strings.HasPrefix(p.s[p.i:], lit) {
		return false
	}
	p.i += len(lit)
	return true
}

func (p *parser) object() bool {
	if p.depth++; p.depth > maxDepth {
		return false
	}
	p.i++ // {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return true
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return false
		}
		if !p.str(true) {
			return false
		}
		secret := p.keySecret
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return false
		}
		p.i++
		p.ws()
		if !p.value(secret) {
			return false
		}
		p.ws()
		if p.i >= len(p.s) {
			return false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			p.depth--
			return true
		default:
			return false
		}
	}
}

func (p *parser) array() bool {
	if p.depth++; p.depth > maxDepth {
		return false
	}
	p.i++ // [
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return true
	}
	for {
		if !p.value(false) {
			return false
		}
		p.ws()
		if p.i >= len(p.s) {
			return false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.ws()
		case ']':
			p.i++
			p.depth--
			return true
		default:
			return false
		}
	}
}

func (p *parser) number() bool {
	s, i := p.s, p.i
	digits := func() bool {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	p.i = i
	return true
}

// str reads a string at p.i (at its opening quote) and redacts what is
// secret in it. For an object key (key true) it sets p.keySecret to
// whether the key is a secret name.
func (p *parser) str(key bool) bool {
	s := p.s
	start := p.i // the opening quote
	i := start + 1
	escaped := false
	for {
		// The common bytes first: the loop runs over long script text.
		for i < len(s) && strCont[s[i]] {
			i++
		}
		if i >= len(s) {
			return false
		}
		c := s[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return false
		}
		// A backslash.
		escaped = true
		if i+1 >= len(s) {
			return false
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(s) || !isHex4(s[i+2:i+6]) {
				return false
			}
			i += 6
		default:
			return false
		}
	}
	p.i = i + 1
	raw := s[start+1 : i]
	if key {
		p.keySecret = false
	}
	if p.quiet > 0 {
		return true
	}
	if !escaped {
		if key {
			p.keySecret = IsSecretName(raw)
		}
		if p.sc.find(raw) {
			for _, sp := range p.sc.spans {
				p.replace(start+1+sp.start, start+1+sp.end, Marker)
			}
		}
		return true
	}
	if cap(p.scratch) < len(raw) {
		p.scratch = make([]byte, 0, len(raw))
	}
	p.scratch = unescape(p.scratch[:0], raw)
	text := viewString(p.scratch)
	if key {
		p.keySecret = IsSecretName(text)
	}
	if p.sc.find(text) {
		p.replace(start, p.i, quote(apply(text, p.sc.spans)))
	}
	return true
}

// strCont marks the bytes that continue a string without a closer look:
// all but the quote, the backslash and control characters.
var strCont = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(s string) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unescape appends the decoded content of a valid JSON string to dst, as
// encoding/json decodes it (a lone surrogate becomes U+FFFD).
func unescape(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); {
		j := strings.IndexByte(raw[i:], '\\')
		if j < 0 {
			return append(dst, raw[i:]...)
		}
		dst = append(dst, raw[i:i+j]...)
		i += j
		switch c := raw[i+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(raw[i+2:])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // " \ /
			dst = append(dst, c)
		}
		i += 2
	}
	return dst
}

// quote returns s as a JSON string, escaped as encoding/json escapes it
// without HTML escaping: invalid UTF-8 becomes U+FFFD.
func quote(s string) string {
	const hexDigits = "0123456789abcdef"
	b := make([]byte, 0, len(s)+2+len(s)/16)
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	b = append(b, '"')
	return string(b)
}
