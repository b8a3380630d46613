package secrets

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
)

// tricky is a value with Markdown-, HTML-, URL- and JSON-special
// characters, a space and a non-ASCII letter.
const tricky = "Zq9_p@ss*w[1]&<x> é+y/z"

// everyChar encodes each byte (or rune) of v with f.
func everyChar(v string, f func(r rune) string) string {
	var b strings.Builder
	for _, r := range v {
		b.WriteString(f(r))
	}
	return b.String()
}

func everyByte(v string, f func(c byte) string) string {
	var b strings.Builder
	for _, c := range []byte(v) {
		b.WriteString(f(c))
	}
	return b.String()
}

// TestScrubEncodings checks that each encoded form of a value, inside
// other text, becomes the placeholder.
func TestScrubEncodings(t *testing.T) {
	t.Parallel()
	_, c := cacheWith(t, map[string]string{"S": tricky, "PLAIN": "Kx7vQ2mL0pR4"})
	md := strings.NewReplacer("_", `\_`, "*", `\*`, "[", `\[`, "]", `\]`, "<", `\<`, ">", `\>`, "&", `\&`, "+", `\+`, "/", `\/`, "@", `\@`).Replace(tricky)
	blob := func(prefix int) string {
		b := append(bytes.Repeat([]byte{0xA5}, prefix), tricky...)
		b = append(b, "tail bytes"...)
		return base64.StdEncoding.EncodeToString(b)
	}
	for _, tc := range []struct{ name, form string }{
		{"markdown", md},
		{"markdown all punctuation", everyChar(tricky, func(r rune) string {
			if r < 0x7f && isASCIIPunct(byte(r)) {
				return `\` + string(r)
			}
			return string(r)
		})},
		{"html named", "Zq9_p@ss*w[1]&amp;&lt;x&gt; &eacute;+y/z"},
		{"html decimal", everyChar(tricky, func(r rune) string { return fmt.Sprintf("&#%d;", r) })},
		{"html hex", everyChar(tricky, func(r rune) string { return fmt.Sprintf("&#x%X;", r) })},
		{"json unicode", everyChar(tricky, func(r rune) string { return fmt.Sprintf(`\u%04x`, r) })},
		{"js hex", everyChar(tricky, func(r rune) string { return fmt.Sprintf(`\x%02x`, r) })},
		{"js braces", everyChar(tricky, func(r rune) string { return fmt.Sprintf(`\u{%x}`, r) })},
		{"url every byte lower", everyByte(tricky, func(c byte) string { return fmt.Sprintf("%%%02x", c) })},
		{"url query", "Zq9_p%40ss*w%5B1%5D%26%3Cx%3E+%C3%A9%2By%2Fz"},
		{"url plus kept", strings.ReplaceAll(tricky, " ", "+")},
		{"base64 std", base64.StdEncoding.EncodeToString([]byte(tricky))},
		{"base64 url raw", base64.RawURLEncoding.EncodeToString([]byte(tricky))},
		{"base64 blob align 0", blob(3)},
		{"base64 blob align 1", blob(4)},
		{"base64 blob align 2", blob(5)},
		{"base64 url blob align 1", base64.URLEncoding.EncodeToString(append([]byte{0xfb}, tricky+"\xff\xfe"...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "before " + tc.form + " after"
			out := c.Scrub(in)
			if !strings.Contains(out, "{{secrets.S}}") || strings.Contains(out, tc.form) {
				t.Errorf("Scrub(%q) = %q, want the form replaced by {{secrets.S}}", in, out)
			}
			if !strings.HasPrefix(out, "before ") {
				t.Errorf("Scrub(%q) = %q: the text before the value changed", in, out)
			}
			// Inside a JSON string, too.
			doc := fmt.Sprintf(`{"v":%q}`, in)
			if got := string(c.ScrubJSON([]byte(doc))); !strings.Contains(got, "{{secrets.S}}") {
				t.Errorf("ScrubJSON(%s) = %s, want the placeholder", doc, got)
			}
		})
	}
	// Escapes that hold no value stay as they were.
	for _, in := range []string{`a\_b &amp; c%20d \u0041`, "&#x41;&#66;", "100% sure", `\`, "&", "%", `trail\`, "&#"} {
		if out := c.Scrub(in); out != in {
			t.Errorf("Scrub(%q) = %q, want it unchanged", in, out)
		}
	}
}

// TestCutNeverSplitsAValue cuts a text with a value (plain and encoded)
// at every position, as a whole text and as the start of a longer one.
func TestCutNeverSplitsAValue(t *testing.T) {
	t.Parallel()
	const v = "Kx7vQ2mL0pR4-sekret"
	_, c := cacheWith(t, map[string]string{"V": v})
	for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), everyChar(v, func(r rune) string { return fmt.Sprintf("&#%d;", r) })} {
		text := strings.Repeat("a", 10) + form + strings.Repeat("b", 200)
		for n := 0; n <= len(text); n++ {
			got, left := Cut(text, n, false)
			if leaks(got, v) {
				t.Fatalf("Cut(%q, %d) = %q: part of the value", text, n, got)
			}
			if left == 0 && len(got) < len(c.Scrub(text)) {
				t.Fatalf("Cut(%q, %d) = %q with nothing left out", text, n, got)
			}
			// The start of a longer text, read with Margin to spare.
			window := text[:min(len(text), n+Margin())]
			got, _ = Cut(window, n, true)
			if leaks(got, v) {
				t.Fatalf("Cut(%q, %d, more) = %q: part of the value", window, n, got)
			}
			if strings.HasSuffix(got, "{{secr") {
				t.Fatalf("Cut split a placeholder: %q", got)
			}
		}
	}
	// Invalid UTF-8 at the start of a window shorter than the margin.
	if got, _ := Cut("\x80\x80\x80 and more", 5, true); got != "" {
		t.Errorf("Cut of a window shorter than the margin = %q, want nothing", got)
	}
	if got, left := Cut("short", 10, false); got != "short" || left != 0 {
		t.Errorf(`Cut("short", 10) = %q, %d`, got, left)
	}
}

// leaks reports whether s holds 4 or more leading characters of v, or
// their base64 or entity forms.
func leaks(s, v string) bool {
	return strings.Contains(s, v[:4]) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(v))[:4]) || strings.Contains(s, "&#75;&#120;")
}

// glyphCMap is a ToUnicode map as Chromium writes it: glyph 0x0100 + c
// is the character c (one bfrange), and 0x0003 a space (one bfchar).
const glyphCMap = "/CIDInit /ProcSet findresource begin\nbegincmap\n1 beginbfchar\n<0003> <0020>\nendbfchar\n1 beginbfrange\n<0120> <017E> <0020>\nendbfrange\nendcmap\n"

// glyphs writes s as a page's text: one glyph number per Tj.
func glyphs(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, "<%04X> Tj\n10 0 Td ", 0x100+int(c))
	}
	return b.String()
}

// TestScrubFile checks each kind of file.
func TestScrubFile(t *testing.T) {
	t.Parallel()
	const v = "Kx7vQ2mL0pR4-sekret"
	_, c := cacheWith(t, map[string]string{"V": v})
	utf16hex := func(s string) string {
		var b strings.Builder
		b.WriteString("FEFF")
		for _, u := range utf16.Encode([]rune(s)) {
			fmt.Fprintf(&b, "%04X", u)
		}
		return b.String()
	}
	deflated := func(s string) string {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.String()
	}
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	zipped := func(name, s string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create(name)
		w.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	pdf := func(body string) []byte { return []byte("%PDF-1.4\n" + body + "\n%%EOF\n") }
	refused := []struct {
		name, mime string
		data       []byte
	}{
		{"title-literal.pdf", "application/pdf", pdf("1 0 obj << /Title (Hello " + v + ") >> endobj")},
		{"title-escaped.pdf", "application/pdf", pdf(`1 0 obj << /Title (` + strings.ReplaceAll(v, "-", `\055`) + `) >> endobj`)},
		{"title-utf16.pdf", "application/pdf", pdf("1 0 obj << /Title <" + utf16hex("Hi "+v) + "> >> endobj")},
		{"stream.pdf", "application/pdf", pdf("2 0 obj << /Filter /FlateDecode >>\nstream\n" + deflated("BT <"+utf16hex(v)+"> Tj ET /URI (https://x.test/?k="+v+")") + "\nendstream\nendobj")},
		{"glyphs.pdf", "application/pdf", pdf("3 0 obj << /Filter /FlateDecode >>\nstream\n" + deflated(glyphCMap) + "\nendstream\nendobj\n" +
			"4 0 obj << /Filter /FlateDecode >>\nstream\n" + deflated("BT /F4 16 Tf "+glyphs(v)+" ET") + "\nendstream\nendobj")},
		{"file.zip", "application/zip", zipped("notes.txt", "x "+v)},
		{"image.png", "image/png", append([]byte("\x89PNG\r\n\x1a\n tEXt"), v...)},
		{"archive.7z", "application/x-7z-compressed", []byte("7z\xbc\xaf\x27\x1c rest")},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.ScrubFile(tc.name, tc.mime, tc.data)
			var fe *FileError
			if !errors.As(err, &fe) || out != nil {
				t.Fatalf("ScrubFile(%s) = %d bytes, %v; want it refused", tc.name, len(out), err)
			}
			if !strings.Contains(err.Error(), tc.name) || strings.Contains(err.Error(), v) {
				t.Errorf("error %q should name %s and not hold the value", err, tc.name)
			}
			if tc.name != "archive.7z" && fe.Secret != "V" {
				t.Errorf("error %q names secret %q, want V", err, fe.Secret)
			}
		})
	}
	// Text and gzip come back scrubbed.
	out, err := c.ScrubFile("report.html", "text/html", []byte("<p>"+v+"</p>"))
	if err != nil || string(out) != "<p>{{secrets.V}}</p>" {
		t.Errorf("ScrubFile(text) = %q, %v", out, err)
	}
	out, err = c.ScrubFile("trace.json.gz", "application/gzip", gz(`{"url":"https://x.test/?k=`+v+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(bytes.NewReader(out))
	var inner bytes.Buffer
	inner.ReadFrom(zr)
	if inner.String() != `{"url":"https://x.test/?k={{secrets.V}}"}` {
		t.Errorf("ScrubFile(gzip) unpacks to %q", inner.String())
	}
	// Files without a value pass as they are.
	for _, data := range [][]byte{pdf("1 0 obj << /Title (fine) >> endobj"), zipped("a.txt", "fine"), []byte("\x89PNG\r\n\x1a\nfine")} {
		if out, err := c.ScrubFile("f", "", data); err != nil || !bytes.Equal(out, data) {
			t.Errorf("ScrubFile(%q) = %q, %v; want it unchanged", data, out, err)
		}
	}
	// A process without secrets passes everything.
	var none *Cache
	if out, err := none.ScrubFile("a.7z", "", refused[len(refused)-1].data); err != nil || out == nil {
		t.Errorf("nil cache: ScrubFile = %v, %v", out, err)
	}
}
