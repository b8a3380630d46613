package secrets

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Files a tool returns (a PDF, a download, a trace, a recording) leave the
// fleet as bytes, so they are scrubbed too, by kind:
//
//   - text (text/*, JSON, XML, JavaScript, SVG, or UTF-8 without NUL and
//     without a binary signature): scrubbed like any text, each value
//     becoming its placeholder;
//   - gzip: unpacked, the content scrubbed by its kind, packed again;
//   - PDF: its bytes, its literal and hex strings (also as UTF-16BE), its
//     Flate-decoded streams and its page text (glyphs through the fonts'
//     ToUnicode maps) are searched; a value found refuses the file (a PDF
//     cannot be edited in place without breaking it);
//   - zip: every entry is unpacked and searched as its own kind; a value
//     found refuses the file;
//   - 7z, RAR, xz, zstd, bzip2: cannot be read here, so they are refused
//     while the process holds any secret;
//   - anything else (images, video, unknown binary): the bytes are
//     searched for values of at least [MinBinaryLen] bytes (shorter ones
//     occur by chance in compressed data); a value found refuses the file.
//
// A PDF's page text is read through its fonts' ToUnicode maps. Pixels
// are not read: a value drawn on a page shows in a screenshot or a
// recording, as it shows to anyone looking at the page.

// MinBinaryLen is the shortest value searched for in binary files.
const MinBinaryLen = 8

// maxInflate bounds what a file unpacks to (all its parts together): past
// it the file is refused rather than passed on unread.
const maxInflate = 256 << 20

// FileError refuses a file that holds a secret value or cannot be read.
// Its message names the file and the secret, never the value.
type FileError struct {
	File   string // the file's name
	Secret string // the secret found; "" when the file could not be read
	Reason string // what and what to do
}

func (e *FileError) Error() string {
	if e.Secret != "" {
		return fmt.Sprintf("file %s holds the value of secret %s, so it is not returned: %s", e.File, e.Secret, e.Reason)
	}
	return fmt.Sprintf("file %s is not returned: %s", e.File, e.Reason)
}

// ScrubFile returns the bytes of a file that a tool returns, fit to leave
// the process: data itself when it holds no secret, a scrubbed copy of a
// text file, or a *FileError that refuses the file (see the kinds above).
// mimeType may be empty; name is only for errors and the kind.
func (c *Cache) ScrubFile(name, mimeType string, data []byte) ([]byte, error) {
	if c == nil {
		return data, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.m == nil {
		return data, nil
	}
	budget := maxInflate
	return c.m.scrubFile(name, mimeType, data, &budget, 0)
}

// The reasons of refusals.
const (
	whyBinary = "the page put it into the file, and a value cannot be taken out of this kind of file without breaking it; " +
		"read what you need with the text tools (get_text, snapshot, eval), which show {{secrets.NAME}} instead, " +
		"or make the page leave the secret out of the file"
	whyPDF = "the printed page holds it (in its title, a link or its text), and a PDF cannot be edited without breaking it; " +
		"print a page that does not show the secret (navigate away from it, or clear the field first), " +
		"or read the page with get_text or snapshot, which show {{secrets.NAME}} instead"
)

func (m *matcher) scrubFile(name, mimeType string, data []byte, budget *int, depth int) ([]byte, error) {
	s := unsafe.String(unsafe.SliceData(data), len(data))
	switch kind := fileKind(name, mimeType, data); kind {
	case "gzip":
		inner, err := inflate(gzipReader(data), budget)
		if err != nil || depth > 2 {
			return nil, &FileError{File: name, Reason: fmt.Sprintf("its gzip content cannot be read to check it for secrets (%v)", orNested(err))}
		}
		innerName := strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".gzip")
		out, err := m.scrubFile(innerName, "", inner, budget, depth+1)
		if err != nil {
			if fe, ok := errors.AsType[*FileError](err); ok {
				fe.File = name
			}
			return nil, err
		}
		if bytes.Equal(out, inner) {
			return data, nil
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(out)
		if err := zw.Close(); err != nil {
			return nil, &FileError{File: name, Reason: "packing it again failed: " + err.Error()}
		}
		return b.Bytes(), nil
	case "text", "json":
		var out string
		if kind == "json" {
			b := m.scrubJSON(data)
			out = unsafe.String(unsafe.SliceData(b), len(b))
		} else {
			out = m.replace(s)
		}
		if sameString(out, s) {
			return data, nil
		}
		return []byte(out), nil
	case "pdf":
		if secret := m.findPDF(s, budget); secret != "" {
			return nil, &FileError{File: name, Secret: secret, Reason: whyPDF}
		}
		return data, nil
	case "zip":
		if secret, err := m.findZip(name, data, budget, depth); err != nil || secret != "" {
			if err != nil {
				return nil, err
			}
			return nil, &FileError{File: name, Secret: secret, Reason: whyBinary}
		}
		return data, nil
	case "opaque":
		return nil, &FileError{File: name, Reason: "it is compressed in a format (7z, RAR, xz, zstd, bzip2) that the fleet cannot unpack to check it for secrets, " +
			"and the worker holds secrets; fetch it without the browser, or have the page offer it as zip, gzip or plain"}
	default:
		if secret := m.first(s, MinBinaryLen); secret != "" {
			return nil, &FileError{File: name, Secret: secret, Reason: whyBinary}
		}
		return data, nil
	}
}

func orNested(err error) error {
	if err == nil {
		return errors.New("nested too deep")
	}
	return err
}

func gzipReader(data []byte) func() (io.Reader, error) {
	return func() (io.Reader, error) { return gzip.NewReader(bytes.NewReader(data)) }
}

// inflate reads what open returns, within budget.
func inflate(open func() (io.Reader, error), budget *int) ([]byte, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(*budget)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > *budget {
		return nil, fmt.Errorf("it unpacks to more than %d MiB", maxInflate>>20)
	}
	*budget -= len(b)
	return b, nil
}

// first returns the name of the first secret found in s (or its decoded
// forms) among patterns of at least minLen bytes; "" for none.
func (m *matcher) first(s string, minLen int) string {
	sp := m.spans(nil, s, minLen)
	if len(sp) == 0 {
		return ""
	}
	return nameOf(merge(sp)[0].repl)
}

// nameOf returns NAME of {{secrets.NAME}}.
func nameOf(placeholder string) string {
	return strings.TrimSuffix(strings.TrimPrefix(placeholder, "{{"+placeholderPrefix), "}}")
}

// fileKind tells how to scrub a file: by its signature first, then its
// type and name.
func fileKind(name, mimeType string, data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return "gzip"
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return "pdf"
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return "zip"
	case bytes.HasPrefix(data, []byte("7z\xbc\xaf\x27\x1c")), bytes.HasPrefix(data, []byte("Rar!\x1a\x07")),
		bytes.HasPrefix(data, []byte("\xfd7zXZ\x00")), bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}),
		bytes.HasPrefix(data, []byte("BZh")) && len(data) > 3 && data[3] >= '1' && data[3] <= '9':
		return "opaque"
	}
	mt, _, _ := mime.ParseMediaType(mimeType)
	ext := strings.ToLower(path.Ext(name))
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json") || ext == ".json" || ext == ".har" || ext == ".heapsnapshot":
		return "json"
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+xml"), mt == "application/xml",
		mt == "application/javascript", mt == "application/x-javascript", mt == "image/svg+xml":
		return "text"
	case mt == "" || mt == "application/octet-stream":
		if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
			return "text"
		}
	}
	return "binary"
}

// findZip searches every entry of a zip archive.
func (m *matcher) findZip(name string, data []byte, budget *int, depth int) (string, error) {
	if secret := m.first(unsafe.String(unsafe.SliceData(data), len(data)), MinBinaryLen); secret != "" {
		return secret, nil // stored entries, names, comments
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", &FileError{File: name, Reason: fmt.Sprintf("it is not a zip archive that can be read to check it for secrets (%v)", err)}
	}
	for _, f := range zr.File {
		inner, err := inflate(func() (io.Reader, error) { return f.Open() }, budget)
		if err != nil {
			return "", &FileError{File: name, Reason: fmt.Sprintf("its entry %s cannot be read to check it for secrets (%v)", f.Name, err)}
		}
		out, err := m.scrubFile(f.Name, "", inner, budget, depth+1)
		if err != nil {
			if fe, ok := errors.AsType[*FileError](err); ok && fe.Secret != "" {
				return fe.Secret, nil
			}
			return "", &FileError{File: name, Reason: fmt.Sprintf("its entry %s: %v", f.Name, err)}
		}
		if !bytes.Equal(out, inner) { // a text entry that was scrubbed
			return m.first(unsafe.String(unsafe.SliceData(inner), len(inner)), 0), nil
		}
	}
	return "", nil
}

// findPDF returns the first secret in a PDF: in its bytes, its strings
// and its Flate streams' content and strings.
func (m *matcher) findPDF(s string, budget *int) string {
	if secret := m.first(s, MinBinaryLen); secret != "" {
		return secret
	}
	texts := pdfStrings(nil, s)
	var (
		cmaps []map[uint16][]byte
		runs  [][]byte
	)
	for from := 0; ; {
		k := strings.Index(s[from:], "stream")
		if k < 0 {
			break
		}
		start := from + k + len("stream")
		from = start
		if strings.HasPrefix(s[start:], "\r\n") {
			start += 2
		} else if strings.HasPrefix(s[start:], "\n") {
			start++
		} else {
			continue
		}
		end := strings.Index(s[start:], "endstream")
		if end < 0 {
			break
		}
		raw := s[start : start+end]
		from = start + end + len("endstream")
		dec, err := inflate(func() (io.Reader, error) { return zlib.NewReader(strings.NewReader(raw)) }, budget)
		if err != nil && len(dec) == 0 {
			continue
		}
		ds := unsafe.String(unsafe.SliceData(dec), len(dec))
		texts = append(texts, dec...)
		texts = append(texts, 0)
		texts = pdfStrings(texts, ds)
		switch {
		case strings.Contains(ds, "beginbfchar") || strings.Contains(ds, "beginbfrange"):
			cmaps = append(cmaps, parseToUnicode(ds))
		case strings.Contains(ds, "BT"):
			runs = append(runs, pdfHexRun(ds))
		}
	}
	// Page text is glyph numbers (<002B> Tj, one string per glyph), which
	// a font's ToUnicode map turns back into text: read every content
	// stream through every map (a page has few fonts).
	for _, cm := range cmaps {
		for _, run := range runs {
			for k := 0; k+1 < len(run); k += 2 {
				if r, ok := cm[uint16(run[k])<<8|uint16(run[k+1])]; ok {
					texts = append(texts, r...)
				} else {
					texts = append(texts, 0)
				}
			}
			texts = append(texts, 0)
		}
	}
	return m.first(unsafe.String(unsafe.SliceData(texts), len(texts)), MinScrubLen)
}

// pdfHexRun returns the bytes of every hex string <...> in a content
// stream, one after another.
func pdfHexRun(s string) []byte {
	var out []byte
	for i := strings.IndexByte(s, '<'); i >= 0 && i+1 < len(s); {
		if s[i+1] == '<' {
			i += 2
		} else if end := strings.IndexByte(s[i+1:], '>'); end >= 0 {
			half, hi := false, byte(0)
			for _, c := range []byte(s[i+1 : i+1+end]) {
				if h, ok := unhex(c); ok {
					if half {
						out = append(out, hi<<4|h)
					} else {
						hi = h
					}
					half = !half
				}
			}
			i += end + 2
		} else {
			break
		}
		k := strings.IndexByte(s[min(i, len(s)):], '<')
		if k < 0 {
			break
		}
		i += k
	}
	return out
}

// parseToUnicode reads the bfchar and bfrange entries of a ToUnicode CMap
// (2-byte codes, UTF-16BE targets) into a map from code to UTF-8 text.
func parseToUnicode(s string) map[uint16][]byte {
	cm := map[uint16][]byte{}
	hexes := func(line string) [][]byte {
		var out [][]byte
		for {
			i := strings.IndexByte(line, '<')
			j := strings.IndexByte(line, '>')
			if i < 0 || j < i {
				return out
			}
			var b []byte
			for k := i + 1; k+1 < j; k += 2 {
				hi, ok1 := unhex(line[k])
				lo, ok2 := unhex(line[k+1])
				if !ok1 || !ok2 {
					break
				}
				b = append(b, hi<<4|lo)
			}
			out = append(out, b)
			line = line[j+1:]
		}
	}
	utf := func(b []byte) []byte {
		u := make([]uint16, 0, len(b)/2)
		for k := 0; k+1 < len(b); k += 2 {
			u = append(u, uint16(b[k])<<8|uint16(b[k+1]))
		}
		var out []byte
		for _, r := range utf16.Decode(u) {
			out = utf8.AppendRune(out, r)
		}
		return out
	}
	code := func(b []byte) (uint16, bool) {
		if len(b) != 2 {
			return 0, false
		}
		return uint16(b[0])<<8 | uint16(b[1]), true
	}
	section := ""
	for line := range strings.Lines(s) {
		switch {
		case strings.Contains(line, "beginbfchar"):
			section = "char"
			continue
		case strings.Contains(line, "beginbfrange"):
			section = "range"
			continue
		case strings.Contains(line, "endbf"):
			section = ""
			continue
		}
		h := hexes(line)
		switch {
		case section == "char" && len(h) == 2:
			if c, ok := code(h[0]); ok {
				cm[c] = utf(h[1])
			}
		case section == "range" && len(h) == 3 && len(h[2]) >= 2:
			lo, ok1 := code(h[0])
			hi, ok2 := code(h[1])
			if !ok1 || !ok2 || hi < lo || hi-lo > 0x1000 {
				continue
			}
			dst := slices.Clone(h[2])
			for c := uint32(lo); c <= uint32(hi); c++ {
				cm[uint16(c)] = utf(dst)
				dst[len(dst)-1]++ // the last byte counts up (PDF 9.10.3)
			}
		}
	}
	return cm
}

// pdfStrings appends the decoded literal (...) and hex <...> strings of
// PDF text s to out, each followed by a NUL; strings in UTF-16BE (with
// their byte order mark) as UTF-8.
func pdfStrings(out []byte, s string) []byte {
	var str []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			str = str[:0]
			depth := 1
			j := i + 1
			for ; j < len(s) && depth > 0; j++ {
				c := s[j]
				switch {
				case c == '\\' && j+1 < len(s):
					j++
					switch e := s[j]; e {
					case 'n', 'r', 't', 'b', 'f':
						str = append(str, controlEscapes[e])
					case '\r', '\n':
						if e == '\r' && j+1 < len(s) && s[j+1] == '\n' {
							j++
						}
					default:
						if e >= '0' && e <= '7' {
							v := int(e - '0')
							for k := 0; k < 2 && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '7'; k++ {
								j++
								v = v*8 + int(s[j]-'0')
							}
							str = append(str, byte(v))
						} else {
							str = append(str, e)
						}
					}
				case c == '(':
					depth++
					str = append(str, c)
				case c == ')':
					depth--
					if depth > 0 {
						str = append(str, c)
					}
				default:
					str = append(str, c)
				}
			}
			out = appendPDFString(out, str)
			i = j - 1
		case '<':
			if i+1 < len(s) && s[i+1] == '<' {
				i++
				continue
			}
			end := strings.IndexByte(s[i+1:], '>')
			if end < 0 {
				continue
			}
			str = str[:0]
			hi, half := byte(0), false
			ok := true
			for _, c := range []byte(s[i+1 : i+1+end]) {
				if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
					continue
				}
				h, valid := unhex(c)
				if !valid {
					ok = false
					break
				}
				if half {
					str = append(str, hi<<4|h)
				} else {
					hi = h
				}
				half = !half
			}
			if ok {
				if half {
					str = append(str, hi<<4)
				}
				out = appendPDFString(out, str)
				i += end + 1
			}
		}
	}
	return out
}

func appendPDFString(out, str []byte) []byte {
	if len(str) >= 2 && str[0] == 0xFE && str[1] == 0xFF {
		u := make([]uint16, 0, len(str)/2)
		for k := 2; k+1 < len(str); k += 2 {
			u = append(u, uint16(str[k])<<8|uint16(str[k+1]))
		}
		for _, r := range utf16.Decode(u) {
			out = utf8.AppendRune(out, r)
		}
	} else {
		out = append(out, str...)
	}
	return append(out, 0)
}
