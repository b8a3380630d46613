package secrets

import (
	"html"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Scrubbing reads text in its encoded forms too. Most forms of a value are
// known in advance (variants: percent-, HTML-, JSON-escaped, base64) and
// matched directly; but a writer may escape more than it must (every
// character as &#NN; or \u00XX, Markdown's backslash before any
// punctuation, %61 for "a"), which no list of variants covers. So text that
// holds an escape introducer (\, &, %) is also decoded, one decoder at a
// time, and matched again; a match in the decoded text replaces the whole
// encoded stretch of the original it came from.

// span is a stretch of the original text to replace with repl; n is the
// length of the pattern that matched (in the text it was found in).
type span struct {
	start, end, n int
	repl          string
}

// escape records one decoded escape: the original s[o0:o1] became
// decoded[d0:d1].
type escape struct{ d0, d1, o0, o1 int }

// decoder decodes the escapes of one kind in s, appending the decoded text
// to dst and the escapes it decoded to esc.
type decoder struct {
	intro byte // text without this byte has no escape of this kind
	fn    func(dst []byte, esc []escape, s string) ([]byte, []escape)
}

var decoders = [...]decoder{
	{'\\', decodeBackslash},
	{'&', decodeEntities},
	{'%', decodePercent},
}

// maxExpansion bounds how many bytes of encoded text the decoders read
// for one byte of a value (&#x0000061; is 10 for 1); see [Cache.Margin].
const maxExpansion = 12

// spans appends the matches in s, the direct ones and those in s's
// decoded forms, in no particular order; minLen drops patterns shorter
// than it.
func (m *matcher) spans(out []span, s string, minLen int) []span {
	if m == nil || len(m.heads) == 0 {
		return out
	}
	for i, p := m.find(s, 0); p != nil; i, p = m.find(s, i+len(p.b)) {
		if len(p.b) >= minLen {
			out = append(out, span{i, i + len(p.b), len(p.b), p.repl})
		}
	}
	var buf *decodeBuf
	for _, d := range decoders {
		if strings.IndexByte(s, d.intro) < 0 {
			continue
		}
		if buf == nil {
			buf = decodeBufs.Get().(*decodeBuf)
			defer decodeBufs.Put(buf)
		}
		buf.dec, buf.esc = d.fn(buf.dec[:0], buf.esc[:0], s)
		if len(buf.esc) == 0 {
			continue
		}
		ds := unsafe.String(unsafe.SliceData(buf.dec), len(buf.dec)) // read before buf is reused
		// A match that touches no escape was found in s already: try
		// only the starts from which a pattern reaches an escape.
		esc := buf.esc
		for k := 0; k < len(esc); {
			lo, until := max(0, esc[k].d0-m.maxLen+1), esc[k].d1
			for k++; k < len(esc) && esc[k].d0-m.maxLen+1 <= until; k++ {
				until = esc[k].d1
			}
			for i, p := m.findUntil(ds, lo, until); p != nil; i, p = m.findUntil(ds, i+len(p.b), until) {
				if len(p.b) >= minLen {
					out = append(out, span{origStart(esc, i), origEnd(esc, i+len(p.b)), len(p.b), p.repl})
				}
			}
		}
	}
	return out
}

// decodeBuf holds a decoder's output; pooled, as scrubbing is frequent
// and texts are large.
type decodeBuf struct {
	dec []byte
	esc []escape
}

var decodeBufs = sync.Pool{New: func() any { return new(decodeBuf) }}

// origStart maps a start position in decoded text to the original.
func origStart(esc []escape, p int) int {
	k, _ := slices.BinarySearchFunc(esc, p, func(e escape, p int) int {
		if e.d0 <= p {
			return -1
		}
		return 1
	})
	if k == 0 {
		return p
	}
	e := esc[k-1]
	if p < e.d1 {
		return e.o0
	}
	return e.o1 + p - e.d1
}

// origEnd maps an end position (exclusive) in decoded text to the
// original; an end inside an escape's output takes the whole escape.
func origEnd(esc []escape, q int) int {
	k, _ := slices.BinarySearchFunc(esc, q, func(e escape, q int) int {
		if e.d0 < q {
			return -1
		}
		return 1
	})
	if k == 0 {
		return q
	}
	e := esc[k-1]
	if q <= e.d1 {
		return e.o1
	}
	return e.o1 + q - e.d1
}

// merge sorts spans and joins those that overlap (the first one's
// placeholder stands for the joined stretch).
func merge(sp []span) []span {
	if len(sp) < 2 {
		return sp
	}
	slices.SortFunc(sp, func(a, b span) int { return a.start - b.start })
	out := sp[:1]
	for _, s := range sp[1:] {
		last := &out[len(out)-1]
		if s.start < last.end {
			last.end = max(last.end, s.end)
			continue
		}
		out = append(out, s)
	}
	return out
}

// apply returns s with the merged spans replaced; s itself without spans.
func apply(s string, sp []span) string {
	if len(sp) == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+len(s)/8)
	done := 0
	for _, x := range sp {
		b = append(b, s[done:x.start]...)
		b = append(b, x.repl...)
		done = x.end
	}
	b = append(b, s[done:]...)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// hexRune reads n hex digits of s at i.
func hexRune(s string, i, n int) (rune, bool) {
	if n <= 0 || n > 8 || i+n > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+n]) {
		h, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// controlEscapes maps the letter of a backslash escape to its byte.
var controlEscapes = [256]byte{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v', '0': 0}

func isASCIIPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z')
}

// decodeBackslash decodes the backslash escapes of JSON, JavaScript
// (\xXX, \u{X...}, \v, \0) and Markdown (a backslash before any ASCII
// punctuation).
func decodeBackslash(dst []byte, esc []escape, s string) ([]byte, []escape) {
	done := 0
	for i := strings.IndexByte(s, '\\'); i >= 0 && i+1 < len(s); {
		dst = append(dst, s[done:i]...)
		d0 := len(dst)
		n := 0 // length of the escape; 0: not one
		switch c := s[i+1]; c {
		case 'n', 't', 'r', 'b', 'f', 'v', '0':
			dst = append(dst, controlEscapes[c])
			n = 2
		case 'x':
			if r, ok := hexRune(s, i+2, 2); ok {
				dst, n = utf8.AppendRune(dst, r), 4
			}
		case 'u':
			if r, ok := hexRune(s, i+2, 4); ok {
				n = 6
				if utf16.IsSurrogate(r) {
					if r2, ok := hexRune(s, i+8, 4); ok && strings.HasPrefix(s[i+6:], `\u`) {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							r, n = d, 12
						}
					}
				}
				dst = utf8.AppendRune(dst, r)
			} else if i+2 < len(s) && s[i+2] == '{' {
				if k := strings.IndexByte(s[i+3:min(len(s), i+11)], '}'); k > 0 {
					if r, ok := hexRune(s, i+3, k); ok && utf8.ValidRune(r) {
						dst, n = utf8.AppendRune(dst, r), k+4
					}
				}
			}
		default:
			if isASCIIPunct(c) {
				dst, n = append(dst, c), 2
			}
		}
		if n == 0 {
			dst = append(dst, '\\')
			done = i + 1
		} else {
			esc = append(esc, escape{d0, len(dst), i, i + n})
			done = i + n
		}
		k := strings.IndexByte(s[done:], '\\')
		if k < 0 {
			break
		}
		i = done + k
	}
	return append(dst, s[done:]...), esc
}

// maxEntity is the longest character reference decodeEntities reads,
// & and ; included.
const maxEntity = 12

// decodeEntities decodes HTML character references: named (&amp;, and
// the legacy ones without ;), decimal (&#97;) and hex (&#x61;).
func decodeEntities(dst []byte, esc []escape, s string) ([]byte, []escape) {
	done := 0
	for i := strings.IndexByte(s, '&'); i >= 0; {
		end := i + 1
		for end < len(s) && end-i < maxEntity && (s[end] == '#' || isAlnum(s[end])) {
			end++
		}
		if end < len(s) && s[end] == ';' {
			end++
		}
		if dec, ok := entity(s[i:end]); ok {
			dst = append(dst, s[done:i]...)
			d0 := len(dst)
			dst = append(dst, dec...)
			esc = append(esc, escape{d0, len(dst), i, end})
			done = end
		}
		k := strings.IndexByte(s[max(end, i+1):], '&')
		if k < 0 {
			break
		}
		i = max(end, i+1) + k
	}
	return append(dst, s[done:]...), esc
}

// entity decodes one character reference, & to ; (or a legacy one
// without ;: only the five that pages write that way).
func entity(ref string) (string, bool) {
	if len(ref) < 3 {
		return "", false
	}
	if ref[len(ref)-1] != ';' {
		switch ref {
		case "&amp":
			return "&", true
		case "&lt":
			return "<", true
		case "&gt":
			return ">", true
		case "&quot":
			return `"`, true
		case "&nbsp":
			return "\u00a0", true
		}
		return "", false
	}
	if ref[1] == '#' {
		var r rune
		ok := false
		if ref[2] == 'x' || ref[2] == 'X' {
			r, ok = hexRune(ref, 3, len(ref)-4)
		} else {
			for _, c := range []byte(ref[2 : len(ref)-1]) {
				if c < '0' || c > '9' {
					return "", false
				}
				r, ok = r*10+rune(c-'0'), true
			}
		}
		if !ok || len(ref) < 4 || !utf8.ValidRune(r) {
			return "", false
		}
		return string(r), true
	}
	switch ref {
	case "&amp;":
		return "&", true
	case "&lt;":
		return "<", true
	case "&gt;":
		return ">", true
	case "&quot;":
		return `"`, true
	case "&apos;":
		return "'", true
	}
	if dec := html.UnescapeString(ref); dec != ref {
		return dec, true
	}
	return "", false
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// decodePercent decodes %XX (any case). A + stays: the variants hold the
// value with + for space.
func decodePercent(dst []byte, esc []escape, s string) ([]byte, []escape) {
	done := 0
	for i := strings.IndexByte(s, '%'); i >= 0; {
		next := i + 1
		if i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				dst = append(dst, s[done:i]...)
				esc = append(esc, escape{len(dst), len(dst) + 1, i, i + 3})
				dst = append(dst, hi<<4|lo)
				done, next = i+3, i+3
			}
		}
		k := strings.IndexByte(s[next:], '%')
		if k < 0 {
			break
		}
		i = next + k
	}
	return append(dst, s[done:]...), esc
}
