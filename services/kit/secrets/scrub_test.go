package secrets

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestUnquote checks the JSON string decoder against encoding/json.
func TestUnquote(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`plain`, `a\"b\\c\/d`, `\b\f\n\r\t`, `\u00e9\u00E9`, `\ud83d\ude00 smile`, `lone \ud83d here`, `\udc00`, `\u2028\u0000`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+in+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(unquote(nil, in)); got != want {
			t.Errorf("unquote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJSONEscapeMatchesEncoders checks the JSON-escaped forms against
// encoding/json, which they must equal to be found.
func TestJSONEscapeMatchesEncoders(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"p\"a\\ss\n\t\x01<&>", "é😀\u2028x", "plain"} {
		want, _ := json.Marshal(v)
		if got := string(jsonEscape([]byte(v), true, false)); `"`+got+`"` != string(want) {
			t.Errorf("jsonEscape(%q, htmlSafe) = %s, want %s", v, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(`"`+string(jsonEscape([]byte(v), false, true))+`"`), &back); err != nil || back != v {
			t.Errorf("jsonEscape(%q, ascii) decodes to %q, %v", v, back, err)
		}
	}
}

// TestScrubJSONRandom scrubs documents of random values, encoded in every
// way a JSON writer might, and checks that the result is valid JSON whose
// strings hold no value.
func TestScrubJSONRandom(t *testing.T) {
	t.Parallel()
	alphabet := []rune("abcXYZ019 \"\\/<>&'\n\t\x01é€😀\u2028%+=")
	r := rand.New(rand.NewPCG(1, 2))
	vals := map[string]string{}
	var list []string
	for i := range 20 {
		var sb strings.Builder
		for range 4 + r.IntN(12) {
			sb.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		name := "V" + string(rune('A'+i))
		vals[name] = sb.String()
		list = append(list, sb.String())
	}
	_, c := cacheWith(t, vals)
	for n := range 200 {
		var doc strings.Builder
		doc.WriteString(`{"items":[`)
		for i := range 5 {
			if i > 0 {
				doc.WriteByte(',')
			}
			v := list[r.IntN(len(list))]
			text := string(alphabet[r.IntN(len(alphabet))]) + v + string(alphabet[r.IntN(len(alphabet))])
			var enc []byte
			switch r.IntN(3) {
			case 0:
				enc, _ = json.Marshal(text)
			case 1:
				enc = append(append([]byte(`"`), jsonEscape([]byte(text), false, true)...), '"')
			default:
				enc = append(append([]byte(`"`), jsonEscape([]byte(text), false, false)...), '"')
			}
			doc.Write(enc)
		}
		doc.WriteString(`]}`)
		in := []byte(doc.String())
		if !json.Valid(in) {
			t.Fatalf("test document %d is invalid: %s", n, in)
		}
		out := c.ScrubJSON(in)
		var back struct{ Items []string }
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("ScrubJSON(%s) = %s: invalid JSON: %v", in, out, err)
		}
		for _, s := range back.Items {
			for _, v := range list {
				if strings.Contains(s, v) {
					t.Fatalf("ScrubJSON(%s) left a value in %q", in, s)
				}
			}
		}
	}
}

func FuzzScrubJSON(f *testing.F) {
	_, c := cacheWith(f, map[string]string{"A": "s3cr3t", "B": `q"uo\te`, "PIN": "123456"})
	for _, seed := range []string{`{"a":"s3cr3t"}`, `["q\"uo\\te", 123456]`, `"\u0073\u0033cr3t"`, `{"x":[1.5e3,true,null]}`, `not json s3cr3t`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := c.ScrubJSON(in)
		if json.Valid(in) && !json.Valid(out) {
			t.Fatalf("ScrubJSON(%q) = %q: invalid JSON", in, out)
		}
		if strings.Contains(string(out), "s3cr3t") {
			t.Fatalf("ScrubJSON(%q) = %q: still holds the value", in, out)
		}
		var v any
		if json.Unmarshal(out, &v) == nil {
			// Re-encoded, escapes are undone: the value must not show.
			if canon, _ := json.Marshal(v); strings.Contains(string(canon), "s3cr3t") {
				t.Fatalf("ScrubJSON(%q) = %q: still holds the value behind escapes", in, out)
			}
		}
	})
}
