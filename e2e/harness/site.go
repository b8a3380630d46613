package harness

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
)

// Page titles and texts of the test site, for assertions.
const (
	FormTitle  = "Sovereign e2e form"
	NextTitle  = "Sovereign e2e next"
	FormButton = "Save"      // button name; a click writes "clicked <n>" into #out
	FormInput  = "Name"      // textbox name (id "name"); input events copy it into #echo
	FormLink   = "Next page" // link to /next
)

const formPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>` + FormTitle + `</title>
<script>var clicks = 0;</script></head>
<body>
<h1>Form</h1>
<button id="save" onclick="clicks++; document.getElementById('out').textContent = 'clicked ' + clicks">Save</button>
<label for="name">Name</label>
<input id="name" type="text" oninput="document.getElementById('echo').textContent = this.value">
<div id="out">not clicked</div>
<div id="echo"></div>
<p><a id="next" href="/next">Next page</a></p>
</body></html>`

const nextPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>` + NextTitle + `</title></head>
<body><h1 id="heading">Next</h1><p><a href="/form">Back to the form</a></p></body></html>`

// NewSite serves the pages that tests and the benchmark drive:
//
//	/form              FormTitle: button "Save", textbox "Name", link "Next page"
//	/next              NextTitle
//	/cookie/set?v=X    sets the cookie who=X (and localStorage is free to use)
//	/cookie/show       shows the who cookie the server received in #who
//	/many?n=N          N interactive elements (buttons, textboxes, links, checkboxes)
//	/big?kb=N          #big holds BigText(N): more than one NATS message
//
// The caller closes the server.
func NewSite() *httptest.Server {
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/form", page(formPage))
	mux.HandleFunc("/next", page(nextPage))
	mux.HandleFunc("/cookie/set", func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query().Get("v")
		http.SetCookie(w, &http.Cookie{Name: "who", Value: v, Path: "/"})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>cookie set</title></head><body><p id="set">%s</p></body></html>`, html.EscapeString(v))
	})
	mux.HandleFunc("/cookie/show", func(w http.ResponseWriter, r *http.Request) {
		v := "none"
		if c, err := r.Cookie("who"); err == nil {
			v = c.Value
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, `<!doctype html><html><head><title>cookie show</title></head><body><p id="who">%s</p></body></html>`, html.EscapeString(v))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		kb, err := strconv.Atoi(r.URL.Query().Get("kb"))
		if err != nil || kb < 1 || kb > 64<<10 {
			kb = 1536
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>big</title></head><body><div id="big">`+BigText(kb)+`</div></body></html>`)
	})
	mux.HandleFunc("/many", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 1 || n > 10000 {
			n = 500
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, ManyPage(n))
	})
	return httptest.NewServer(mux)
}

// BigText is kb KiB of text that starts with "BEGIN " and ends with " END",
// with a line number every 64 bytes so that a lost or repeated chunk shows.
func BigText(kb int) string {
	var b strings.Builder
	b.Grow(kb << 10)
	b.WriteString("BEGIN ")
	for i := 0; b.Len() < kb<<10-4; i++ {
		fmt.Fprintf(&b, "%08d ", i)
		b.WriteString(strings.Repeat("x", 54))
		b.WriteByte(' ')
	}
	s := b.String()[:kb<<10-4]
	return s + " END"
}

// ManyPage is a page with n interactive elements: buttons, textboxes, links
// and checkboxes in turn, in sections of 25.
func ManyPage(n int) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>many</title></head><body><h1>Many</h1>`)
	for i := range n {
		if i%25 == 0 {
			if i > 0 {
				b.WriteString("</section>")
			}
			fmt.Fprintf(&b, `<section><h2>Section %d</h2>`, i/25+1)
		}
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `<button id="b%d">Button %d</button>`, i, i)
		case 1:
			fmt.Fprintf(&b, `<label>Field %d <input id="i%d" type="text"></label>`, i, i)
		case 2:
			fmt.Fprintf(&b, `<a href="#a%d" id="a%d">Link %d</a>`, i, i, i)
		case 3:
			fmt.Fprintf(&b, `<label><input type="checkbox" id="c%d"> Check %d</label>`, i, i)
		}
	}
	b.WriteString("</section></body></html>")
	return b.String()
}

// SnapshotNode is one line of an ARIA-YAML snapshot that carries a ref.
type SnapshotNode struct {
	Role string
	Name string
	Ref  string // "e5"
}

var snapshotLine = regexp.MustCompile(`^\s*- ([\w-]+)(?: ("(?:[^"\\]|\\.)*"))?.*\[ref=(e\d+)\]`)

// ParseSnapshot returns the nodes with refs of an ARIA-YAML snapshot, whose
// lines look like `- button "Save" [ref=e5]`.
func ParseSnapshot(text string) []SnapshotNode {
	var out []SnapshotNode
	for _, line := range strings.Split(text, "\n") {
		m := snapshotLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[2]
		if name != "" {
			if s, err := strconv.Unquote(name); err == nil {
				name = s
			} else {
				name = strings.Trim(name, `"`)
			}
		}
		out = append(out, SnapshotNode{Role: m[1], Name: name, Ref: m[3]})
	}
	return out
}

// FindRef returns the ref of the first node with role and name, or "".
func FindRef(snapshot, role, name string) string {
	for _, n := range ParseSnapshot(snapshot) {
		if n.Role == role && n.Name == name {
			return n.Ref
		}
	}
	return ""
}
