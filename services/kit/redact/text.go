package redact

import (
	"slices"
	"strings"
)

// span is a part of a text to replace with Marker: text[start:end].
type span struct{ start, end int }

// Sizes of the patterns.
const (
	// minBech32Data is the least number of bech32 characters after nsec1
	// or ncryptsec1 that counts: an nsec has 58 (52 of key, 6 of
	// checksum); an ncryptsec has more.
	minBech32Data = 58
	// minWords is the shortest run of BIP-39 words that counts as a
	// mnemonic (the shortest mnemonic has 12 words).
	minWords = 12
)

// byte classes, for the scans.
const (
	clOther  = 0
	clLetter = 1 << iota // ASCII letter
	clSpace              // space, tab, CR, LF, FF, VT
	clWord               // digit or _: glued to a letter, it makes the letters no word
	clBech32             // in the bech32 data charset, either case
	clName               // may be part of a bare name before = or :
	clDelim              // ends a bare value
)

var class = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= clLetter | clName
		t[c-'a'+'A'] |= clLetter | clName
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= clWord | clName
	}
	t['_'] |= clWord | clName
	for _, c := range "-.[]" {
		t[c] |= clName
	}
	for _, c := range " \t\r\n\f\v" {
		t[c] |= clSpace | clDelim
	}
	for _, c := range "&;,\"'`<>()[]{}#\\" {
		t[c] |= clDelim
	}
	for _, c := range "qpzry9x8gf2tvdw0s3jn54khce6mua7l" {
		t[c] |= clBech32
		if c >= 'a' {
			t[c-'a'+'A'] |= clBech32
		}
	}
	return t
}()

// scanner finds the spans to redact in a text. Its spans slice is reused
// from call to call.
type scanner struct {
	known []string
	spans []span
}

// find sets sc.spans to the secret parts of s, sorted and merged, and
// reports whether there are any.
func (sc *scanner) find(s string) bool {
	sc.spans = sc.spans[:0]
	for _, v := range sc.known {
		sc.knownValue(s, v)
	}
	if len(s) >= len("nsec1")+minBech32Data {
		sc.bech32(s)
	}
	sc.assignments(s, '=')
	sc.assignments(s, ':')
	sc.mnemonics(s)
	if len(sc.spans) == 0 {
		return false
	}
	sc.merge()
	return true
}

func (sc *scanner) add(start, end int) {
	if end > start {
		sc.spans = append(sc.spans, span{start, end})
	}
}

// merge sorts the spans and joins those that overlap or touch.
func (sc *scanner) merge() {
	if len(sc.spans) < 2 {
		return
	}
	slices.SortFunc(sc.spans, func(a, b span) int { return a.start - b.start })
	out := sc.spans[:1]
	for _, sp := range sc.spans[1:] {
		last := &out[len(out)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	sc.spans = out
}

// knownValue marks each occurrence of v in s.
func (sc *scanner) knownValue(s, v string) {
	for i := 0; ; {
		j := strings.Index(s[i:], v)
		if j < 0 {
			return
		}
		sc.add(i+j, i+j+len(v))
		i += j + len(v)
	}
}

// bech32 marks nsec1... and ncryptsec1... strings, in either case. It
// looks for the 1, the rarest byte of the prefixes.
func (sc *scanner) bech32(s string) {
	for i := len("nsec"); i < len(s); {
		j := strings.IndexByte(s[i:], '1')
		if j < 0 {
			return
		}
		p := i + j // at "1"
		i = p + 1
		var start int
		switch {
		case !strings.EqualFold(s[p-3:p], "sec"):
			continue
		case s[p-4]|0x20 == 'n':
			start = p - 4
		case p >= len("ncryptsec") && strings.EqualFold(s[p-9:p-3], "ncrypt"):
			start = p - 9
		default:
			continue
		}
		end := i
		for end < len(s) && class[s[end]]&clBech32 != 0 {
			end++
		}
		if end-i >= minBech32Data {
			sc.add(start, end)
			i = end
		}
	}
}

// assignments marks the values of secret names in s, where sep is '=' or
// ':'. See the package documentation for the forms.
func (sc *scanner) assignments(s string, sep byte) {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], sep)
		if j < 0 {
			return
		}
		e := i + j
		i = e + 1
		if sep == '=' && e > 0 && strings.IndexByte("=!<>", s[e-1]) >= 0 {
			continue // ==, !=, <=, >= or the rest of ===
		}
		name, quoted := nameBefore(s, e)
		if name == "" || !IsSecretName(name) {
			continue
		}
		v := e + 1
		for sep == '=' && v < len(s) && s[v] == '=' {
			v++
		}
		w := v
		for w < len(s) && (s[w] == ' ' || s[w] == '\t') {
			w++
		}
		spaced := w > v
		if w >= len(s) {
			continue
		}
		switch q := s[w]; {
		case q == '"' || q == '\'' || q == '`':
			end := quotedEnd(s, w+1, q, false)
			sc.add(w+1, end)
			i = max(i, end)
		case q == '\\' && w+1 < len(s) && (s[w+1] == '"' || s[w+1] == '\''):
			// A quoted value inside a quoted string: \"value\".
			end := quotedEnd(s, w+2, s[w+1], true)
			sc.add(w+2, end)
			i = max(i, end)
		case !spaced || quoted:
			end := w
			for end < len(s) && class[s[end]]&clDelim == 0 {
				end++
			}
			switch s[w:end] {
			case "true", "false", "null":
				continue
			}
			sc.add(w, end)
			i = max(i, end)
		case sep == ':':
			// Password: hunter2, Authorization: Bearer ...: the rest of
			// the line.
			end := w
			for end < len(s) && s[end] != '\n' && s[end] != '\r' {
				end++
			}
			sc.add(w, end)
			i = max(i, end)
		}
	}
}

// nameBefore returns the name before the separator at s[e]: a quoted name
// ("name": or 'name'=), or a bare one (name=, user[password]=, --token=),
// with spaces or tabs between it and the separator.
func nameBefore(s string, e int) (name string, quoted bool) {
	j := e
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j == 0 {
		return "", false
	}
	if q := s[j-1]; q == '"' || q == '\'' {
		lo := max(0, j-1-maxName)
		k := strings.LastIndexByte(s[lo:j-1], q)
		if k < 0 {
			return "", false
		}
		name = s[lo+k+1 : j-1]
		if strings.IndexByte(name, '\n') >= 0 {
			return "", false
		}
		return name, true
	}
	k := j
	for k > 0 && j-k < maxName && class[s[k-1]]&clName != 0 {
		k--
	}
	return s[k:j], false
}

// quotedEnd returns the end of a quoted value that starts at s[i], quoted
// with q (escaped: \q): the index of the closing quote, or of the end of
// the line or text when it is not closed there. A backslash escapes the
// next byte.
func quotedEnd(s string, i int, q byte, escaped bool) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if escaped && i+1 < len(s) && s[i+1] == q {
				return i
			}
			i++
		case q:
			if !escaped {
				return i
			}
		case '\n', '\r':
			return i
		}
	}
	return len(s)
}

// mnemonics marks runs of minWords or more BIP-39 words separated by
// whitespace. A word is a run of ASCII letters with no digit or _ glued
// to it; any other character between two words ends the run.
//
// A run holds only letters and whitespace and is at least minRunBytes
// long, so it holds two bytes sampleStride apart at multiples of
// sampleStride. mnemonics looks at those bytes and only reads the text
// around two such bytes that are both letters or whitespace: code, markup
// and URLs are mostly skipped.
func (sc *scanner) mnemonics(s string) {
	const (
		minRunBytes  = minWords*4 - 1 // 12 words of 3 letters and 11 spaces
		sampleStride = minRunBytes / 2
		wordish      = clLetter | clSpace
	)
	n := len(s)
	done := 0 // s[:done] has been read
	for q := 0; q+sampleStride < n; q += sampleStride {
		if class[s[q]]&wordish == 0 || class[s[q+sampleStride]]&wordish == 0 || q < done {
			continue
		}
		lo, hi := q, q+1
		for lo > done && class[s[lo-1]]&wordish != 0 {
			lo--
		}
		for hi < n && class[s[hi]]&wordish != 0 {
			hi++
		}
		if hi-lo >= minRunBytes {
			sc.wordRun(s, lo, hi)
		}
		done = hi
	}
}

// wordRun marks the runs of minWords or more BIP-39 words in s[lo:hi],
// which holds only letters and whitespace (the bytes around it are
// neither).
func (sc *scanner) wordRun(s string, lo, hi int) {
	runStart, runEnd, count := 0, 0, 0
	for i := lo; i < hi; {
		if class[s[i]]&clLetter == 0 {
			i++
			continue
		}
		a := i
		for i < hi && class[s[i]]&clLetter != 0 {
			i++
		}
		// A word glued to a digit or _ is no word.
		glued := (a == lo && a > 0 && class[s[a-1]]&clWord != 0) || (i == hi && i < len(s) && class[s[i]]&clWord != 0)
		if glued || !isWord(s[a:i]) {
			if count >= minWords {
				sc.add(runStart, runEnd)
			}
			count = 0
			continue
		}
		if count == 0 {
			runStart = a
		}
		count++
		runEnd = i
	}
	if count >= minWords {
		sc.add(runStart, runEnd)
	}
}

// apply returns s with its spans replaced by Marker.
func apply(s string, spans []span) string {
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len(Marker))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(Marker)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}
