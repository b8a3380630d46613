package secrets

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// cacheWith returns a store and a cache over a fresh bucket holding vals.
func cacheWith(t testing.TB, vals map[string]string) (*Store, *Cache) {
	t.Helper()
	nc := natstest.Conn(t, natstest.Server(t))
	return cacheOn(t, nc, testKey(t), vals)
}

func cacheOn(t testing.TB, nc *nats.Conn, key *Key, vals map[string]string) (*Store, *Cache) {
	t.Helper()
	s := openStore(t, nc, key)
	ctx := context.Background()
	for n, v := range vals {
		if err := s.Set(ctx, n, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

func TestSubstitute(t *testing.T) {
	t.Parallel()
	_, c := cacheWith(t, map[string]string{
		"USER": "ada@example.com", "PASS": `p"a\ss w<o>rd`, "PIN": "1234",
	})

	plain := "no placeholders here {{ but braces }} and {{other.THING}}"
	out, used, err := c.Substitute(plain)
	if err != nil || out != plain || used != nil || !sameString(out, plain) {
		t.Errorf("Substitute(no placeholders) = %q, %v, %v; want the input itself", out, used, err)
	}

	for _, tc := range []struct{ in, want string }{
		{"{{secrets.USER}}", "ada@example.com"},
		{"login {{ secrets.USER }} / {{\tsecrets.PASS\t}}!", `login ada@example.com / p"a\ss w<o>rd!`},
		{"{{secrets.PIN}}{{secrets.PIN}}-{{secrets.USER}}", "12341234-ada@example.com"},
		{"{{{secrets.PIN}}}", "{1234}"},
		{"keep {{ secrets_X }} {{secrets.PIN}}", "keep {{ secrets_X }} 1234"},
	} {
		out, used, err := c.Substitute(tc.in)
		if err != nil || out != tc.want {
			t.Errorf("Substitute(%q) = %q, %v; want %q", tc.in, out, err, tc.want)
		}
		if len(used) == 0 || len(slices.Compact(slices.Sorted(slices.Values(used)))) != len(used) {
			t.Errorf("Substitute(%q) used = %v: want each name once", tc.in, used)
		}
	}
	_, used, _ = c.Substitute("{{secrets.PIN}} {{secrets.USER}} {{secrets.PIN}}")
	if !slices.Equal(used, []string{"PIN", "USER"}) {
		t.Errorf("used = %v, want [PIN USER] in order of appearance", used)
	}

	in := "type {{secrets.USER}} then {{secrets.NOPE}}"
	out, used, err = c.Substitute(in)
	if !errors.Is(err, ErrUnknownSecret) || err.Error() != `unknown secret "NOPE": set it with sovereign secret set NOPE` {
		t.Errorf("unknown: err = %v", err)
	}
	if out != in || used != nil || strings.Contains(err.Error(), "ada@") {
		t.Errorf("unknown: out %q used %v: want the input and no value", out, used)
	}

	for _, bad := range []string{"{{secrets.my-token}}", "{{secrets.1X}}", "{{secrets.}}", "{{ secrets.USER"} {
		if _, _, err := c.Substitute(bad); err == nil || !strings.Contains(err.Error(), "placeholder") {
			t.Errorf("Substitute(%q) err = %v, want a placeholder error", bad, err)
		}
	}

	// JSON: the value is escaped, so the document stays valid.
	args := []byte(`{"ref":"e5","text":"{{secrets.PASS}}","note":"{{ secrets.USER }} \"quoted\""}`)
	got, used, err := c.SubstituteJSON(args)
	if err != nil || !slices.Equal(used, []string{"PASS", "USER"}) {
		t.Fatalf("SubstituteJSON = %s, %v, %v", got, used, err)
	}
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("SubstituteJSON made invalid JSON %s: %v", got, err)
	}
	if m["text"] != `p"a\ss w<o>rd` || m["note"] != `ada@example.com "quoted"` {
		t.Errorf("SubstituteJSON decoded = %q", m)
	}
	noPh := []byte(`{"a":1}`)
	if got, _, _ := c.SubstituteJSON(noPh); &got[0] != &noPh[0] {
		t.Errorf("SubstituteJSON without placeholders copied its input")
	}
}

func TestScrubForms(t *testing.T) {
	t.Parallel()
	const pass = `Tr0ub&dor:3 "x"/é+<y>`
	_, c := cacheWith(t, map[string]string{"PASS": pass, "SHORT": "abc"})
	ph := "{{secrets.PASS}}"
	jsonForm, _ := json.Marshal(pass)
	for name, form := range map[string]string{
		"plain":            pass,
		"query-escaped":    url.QueryEscape(pass),
		"path-escaped":     url.PathEscape(pass),
		"html-escaped":     html.EscapeString(pass),
		"browser-html":     strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(pass),
		"json-escaped":     string(jsonForm[1 : len(jsonForm)-1]),
		"js-json-escaped":  strings.ReplaceAll(pass, `"`, `\"`),
		"base64":           base64.StdEncoding.EncodeToString([]byte(pass)),
		"base64url-nopad":  base64.RawURLEncoding.EncodeToString([]byte(pass)),
		"python-json-asci": strings.NewReplacer(`"`, `\"`, "é", `\u00e9`).Replace(pass),
	} {
		text := "before " + form + " after"
		got := c.Scrub(text)
		if got != "before "+ph+" after" {
			t.Errorf("%s form %q: Scrub = %q", name, form, got)
		}
	}
	// In a URL, the query-escaped form goes.
	u := "https://example.com/login?user=ada&pw=" + url.QueryEscape(pass) + "#top"
	if got := c.Scrub(u); got != "https://example.com/login?user=ada&pw="+ph+"#top" {
		t.Errorf("Scrub(url) = %q", got)
	}
	// Values under MinScrubLen stay (they are substituted, not scrubbed).
	if got := c.Scrub("abc abcd"); got != "abc abcd" {
		t.Errorf("a 3-byte secret was scrubbed: %q", got)
	}
	clean := strings.Repeat("nothing to see ", 100)
	if got := c.Scrub(clean); !sameString(got, clean) {
		t.Errorf("Scrub copied text without secrets")
	}
}

func TestScrubOverlaps(t *testing.T) {
	t.Parallel()
	_, c := cacheWith(t, map[string]string{
		"LONG": "hunter22-extended", "MID": "hunter22", "OTHER": "22-ext", "TAIL": "ended!",
	})
	for in, want := range map[string]string{
		// The longest value at a position wins.
		"x hunter22-extended y": "x {{secrets.LONG}} y",
		"x hunter22 y":          "x {{secrets.MID}} y",
		// Left to right, without overlaps: MID starts first.
		"hunter22-ext":         "{{secrets.MID}}-ext",
		"hunter22-extended!":   "{{secrets.LONG}}!",
		"22-extended!":         "{{secrets.OTHER}}{{secrets.TAIL}}",
		"hunter22hunter22":     "{{secrets.MID}}{{secrets.MID}}",
		"no secrets, hunter2.": "no secrets, hunter2.",
	} {
		if got := c.Scrub(in); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
		}
	}
}

// scrubCase is a document with values to scrub, in keys, strings, escapes
// and numbers, and what it must become: the cases of TestScrubJSON and
// TestScrubStruct.
func scrubCase(t *testing.T) (c *Cache, doc, want map[string]any) {
	const pass = "pa\"ss\\wörd\n<&>"
	_, c = cacheWith(t, map[string]string{"PASS": pass, "PIN": "482913", "NL": "nABCDE"})
	doc = map[string]any{
		"title":  "Account",
		"value":  pass,
		"inside": "the password is " + pass + ".",
		"nested": []any{map[string]any{pass: "as a key"}},
		"pin":    482913,
		"pins":   []any{1482913, 7, 0.5, true, nil},
		"html":   "<b>" + html.EscapeString(pass) + "</b>",
		"escnl":  "line\nABCDE", // \n then ABCDE: not the NL secret
		"nl":     "x nABCDE",
	}
	want = map[string]any{
		"title":  "Account",
		"value":  "{{secrets.PASS}}",
		"inside": "the password is {{secrets.PASS}}.",
		"nested": []any{map[string]any{"{{secrets.PASS}}": "as a key"}},
		"pin":    "{{secrets.PIN}}",
		"pins":   []any{"{{secrets.PIN}}", 7.0, 0.5, true, nil},
		"html":   "<b>{{secrets.PASS}}</b>",
		"escnl":  "line\nABCDE",
		"nl":     "x {{secrets.NL}}",
	}
	return c, doc, want
}

func TestScrubJSON(t *testing.T) {
	t.Parallel()
	c, doc, want := scrubCase(t)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := c.ScrubJSON(b)
	if !json.Valid(got) {
		t.Fatalf("ScrubJSON made invalid JSON: %s", got)
	}
	var back map[string]any
	_ = json.Unmarshal(got, &back)
	wj, _ := json.Marshal(want)
	bj, _ := json.Marshal(back)
	if string(wj) != string(bj) {
		t.Errorf("ScrubJSON:\n got  %s\n want %s", bj, wj)
	}
	// Text scrubbing of the same document may break an escape; ScrubJSON
	// never does, and leaves clean JSON alone.
	clean := []byte(`{"a":"b","n":[1,2,3]}`)
	if out := c.ScrubJSON(clean); &out[0] != &clean[0] {
		t.Errorf("ScrubJSON copied clean JSON")
	}
	// Invalid JSON is scrubbed as text.
	if out := string(c.ScrubJSON([]byte(`{"broken": 482913`))); out != `{"broken": {{secrets.PIN}}` {
		t.Errorf("ScrubJSON(invalid) = %q", out)
	}
}

func TestCacheFollows(t *testing.T) {
	t.Parallel()
	s, c := cacheWith(t, map[string]string{"OLD": "old-value-1"})
	ctx := context.Background()
	if err := s.Set(ctx, "NEW", []byte("new-value-1")); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(c.Has("NEW"), "not yet: NEW in the cache") })
	if out, _, err := c.Substitute("{{secrets.NEW}}"); err != nil || out != "new-value-1" {
		t.Errorf("Substitute(NEW) = %q, %v", out, err)
	}
	if !slices.Equal(c.Names(), []string{"NEW", "OLD"}) {
		t.Errorf("Names = %v", c.Names())
	}

	// Replacing a value: the new one is used and scrubbed, the old one is
	// zeroed and no longer scrubbed.
	c.mu.RLock()
	oldBuf := c.entries["NEW"].value
	oldForms := c.entries["NEW"].variants
	c.mu.RUnlock()
	if err := s.Set(ctx, "NEW", []byte("new-value-2")); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		out, _, err := c.Substitute("{{secrets.NEW}}")
		return kittest.Check(out == "new-value-2", "Substitute = %q, %v; want the new value", out, err)
	})
	if got := c.Scrub("new-value-1 new-value-2"); got != "new-value-1 {{secrets.NEW}}" {
		t.Errorf("after replace: Scrub = %q", got)
	}
	assertZero(t, "replaced value", oldBuf, oldForms)

	c.mu.RLock()
	oldBuf = c.entries["OLD"].value
	oldForms = c.entries["OLD"].variants
	c.mu.RUnlock()
	if err := s.Delete(ctx, "OLD"); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(!c.Has("OLD"), "not yet: OLD gone") })
	if _, _, err := c.Substitute("{{secrets.OLD}}"); !errors.Is(err, ErrUnknownSecret) {
		t.Errorf("deleted secret: err = %v, want ErrUnknownSecret", err)
	}
	if got := c.Scrub("old-value-1"); got != "old-value-1" {
		t.Errorf("deleted secret still scrubbed: %q", got)
	}
	assertZero(t, "deleted value", oldBuf, oldForms)

	c.mu.RLock()
	oldBuf = c.entries["NEW"].value
	oldForms = c.entries["NEW"].variants
	c.mu.RUnlock()
	c.Close()
	assertZero(t, "value at Close", oldBuf, oldForms)
	if _, _, err := c.Substitute("{{secrets.NEW}}"); !errors.Is(err, ErrUnknownSecret) {
		t.Errorf("closed cache: err = %v", err)
	}
}

func assertZero(t *testing.T, what string, value []byte, forms [][]byte) {
	t.Helper()
	if len(value) == 0 {
		t.Fatalf("%s: nothing to check", what)
	}
	for _, b := range append([][]byte{value}, forms...) {
		for _, c := range b {
			if c != 0 {
				t.Errorf("%s not zeroed: %d bytes left", what, len(b))
				break
			}
		}
	}
}

func TestCacheWrongKey(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	a, b := testKey(t), testKey(t)
	sa := openStore(t, nc, a)
	if err := sa.Set(context.Background(), "THEIRS", []byte("their-value")); err != nil {
		t.Fatal(err)
	}
	_, c := cacheOn(t, nc, b, map[string]string{"MINE": "my-value"})
	err := c.Check()
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), a.ID()) || !strings.Contains(err.Error(), b.ID()) {
		t.Errorf("Check = %v, want the wrong-key error naming both keys", err)
	}
	if _, _, err := c.Substitute("{{secrets.THEIRS}}"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("Substitute(THEIRS) err = %v, want ErrWrongKey", err)
	}
	if out, _, err := c.Substitute("{{secrets.MINE}}"); err != nil || out != "my-value" {
		t.Errorf("Substitute(MINE) = %q, %v", out, err)
	}
}

func TestFeedRedactSet(t *testing.T) {
	t.Parallel()
	s, c := cacheWith(t, map[string]string{"API": "sk-live-abcdef", "SHARE1": "same-value", "SHARE2": "same-value"})
	var set redact.Set
	c.Feed(&set)
	if got := set.Text("key sk-live-abcdef and " + url.QueryEscape("sk-live-abcdef")); strings.Contains(got, "sk-live") {
		t.Errorf("redact set misses a value: %q", got)
	}
	ctx := context.Background()
	if err := s.Set(ctx, "LATER", []byte("added-later-1")); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(!strings.Contains(set.Text("x added-later-1"), "added"), "not yet: LATER in the redact set")
	})
	if err := s.Delete(ctx, "API"); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(strings.Contains(set.Text("sk-live-abcdef"), "sk-live"), "not yet: API out of the redact set")
	})
	// A value two secrets share stays while one of them does.
	if err := s.Delete(ctx, "SHARE1"); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(!c.Has("SHARE1"), "not yet: SHARE1 gone") })
	if strings.Contains(set.Text("same-value"), "same") {
		t.Errorf("deleting SHARE1 took SHARE2's value out of the redact set")
	}
}

func TestNilCache(t *testing.T) {
	t.Parallel()
	var c *Cache
	if out := c.Scrub("text"); out != "text" {
		t.Errorf("nil Scrub = %q", out)
	}
	if out, used, err := c.Substitute("plain"); out != "plain" || used != nil || err != nil {
		t.Errorf("nil Substitute(plain) = %q, %v, %v", out, used, err)
	}
	_, _, err := c.Substitute("{{secrets.X}}")
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "{{secrets.X}}") {
		t.Errorf("nil Substitute(placeholder) err = %v, want ErrNoKey naming the placeholder", err)
	}
	if c.Names() != nil || c.Has("X") || c.Check() != nil || string(c.ScrubJSON([]byte(`{}`))) != `{}` {
		t.Error("nil cache is not empty")
	}
	c.Feed(new(redact.Set))
	c.Close()
}
