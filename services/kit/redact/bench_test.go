package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// script is a slice of realistic eval script: code with quotes, newlines
// (escaped in JSON), selectors and words.
const script = `// Collect the rows of the results table and the state of the form.
const rows = Array.from(document.querySelectorAll('table.results tbody tr'));
const out = rows.map((tr, i) => {
  const cells = Array.from(tr.querySelectorAll('td')).map((td) => td.innerText.trim());
  const link = tr.querySelector('a[href]');
  return { index: i, cells, href: link ? link.getAttribute('href') : null, selected: tr.classList.contains('is-selected') };
});
const form = document.querySelector('form#search');
const state = form ? Object.fromEntries(new FormData(form).entries()) : {};
if (window.location.search.includes('page=')) { state.page = new URLSearchParams(location.search).get('page'); }
return JSON.stringify({ count: out.length, rows: out.slice(0, 50), state, title: document.title });
`

// args returns the JSON arguments of an eval call with a script of about
// n bytes.
func args(n int) []byte {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(script)
	}
	out, err := json.Marshal(map[string]string{"script": b.String()[:n]})
	if err != nil {
		panic(err)
	}
	return out
}

func BenchmarkJSON(b *testing.B) {
	var known Set
	known.Add("hunter2-not-in-text")
	for _, bc := range []struct {
		name string
		in   []byte
		set  *Set
	}{
		{"fill", []byte(`{"ref":"e12","value":"Ada Lovelace"}`), nil},
		{"press", []byte(`{"key":"Enter"}`), nil},
		{"eval_4KB", args(4 << 10), nil},
		{"eval_4KB_known", args(4 << 10), &known},
		{"eval_4KB_secret", append(args(4 << 10)[:0:0], `{"password":"x",`+string(args(4 << 10)[1:])...), nil},
		{"eval_1MB", args(1 << 20), nil},
		{"fill_1MB", []byte(`{"ref":"e1","value":"` + strings.Repeat("lorem ipsum dolor sit amet ", 1<<20/27) + `"}`), nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				bc.set.JSON(bc.in)
			}
		})
	}
}

func BenchmarkText(b *testing.B) {
	snapshot := strings.Repeat("- textbox \"Email\" [ref=e5]: ada@example.com\n- button \"Sign in\" [ref=e6]\n- link \"Forgot password?\" [ref=e7]:\n  - /url: /reset\n", 15)
	for _, bc := range []struct {
		name string
		in   string
	}{
		{"result_2KB", snapshot[:1800]},
		{"result_1MB", strings.Repeat(snapshot, 1<<20/len(snapshot))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				Text(bc.in)
			}
		})
	}
}
