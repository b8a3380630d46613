package browser_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// mdSecret has characters that Markdown escapes.
const mdSecret = "p4ss_w*rd[x]_Zq9"

// scrubSite serves pages that show httpSecret (and mdSecret) where the
// tools cut their results, in encoded forms, in a PDF's title and in files
// the page downloads.
func scrubSite(t *testing.T) *httptest.Server {
	t.Helper()
	n := func(r *http.Request) int { k, _ := strconv.Atoi(r.URL.Query().Get("n")); return k }
	mux := http.NewServeMux()
	// /text?n=K: K letters, then the secret, inside #t.
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>cut</title><div id=t>%s%s%s</div><script>fetch("/body?n=%d")</script>`,
			strings.Repeat("A", n(r)), httpSecret, strings.Repeat("B", 40), n(r))
	})
	mux.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("A", n(r))+httpSecret+strings.Repeat("B", 40))
	})
	mux.HandleFunc("/para", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>para</title><p>%s%s%s</p>`, strings.Repeat("A", n(r)), httpSecret, strings.Repeat("B", 40))
	})
	mux.HandleFunc("/longtitle", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>%s%s%s</title><p>long title</p>`, strings.Repeat("A", n(r)), httpSecret, strings.Repeat("B", 40))
	})
	mux.HandleFunc("/markdown", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>md</title><h1>Account</h1><p>Your password is <b>%s</b>, keep it safe.</p>`, mdSecret)
	})
	// /encoded is a page whose fetch returns the secret in the forms a
	// source may hold it in.
	mux.HandleFunc("/encoded", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>enc</title><script>fetch("/encoded.txt")</script>`)
	})
	mux.HandleFunc("/encoded.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Join(encodedForms(), "\n"))
	})
	mux.HandleFunc("/titled", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Welcome %s</title><p>hello</p>`, httpSecret)
	})
	mux.HandleFunc("/shown", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>shown</title><p>Your key is %s, keep it.</p>`, httpSecret)
	})
	// /form downloads what is typed into #f: as a binary file (#bin) or
	// after K letters in a text file (#txt).
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>form</title><input id=f>
<button id=bin onclick="save(new Blob([new Uint8Array([0,1,2,255]), f.value, new Uint8Array([0])], {type: 'application/octet-stream'}), 'typed.bin')">bin</button>
<button id=txt onclick="save(new Blob(['%s' + f.value + ' end'], {type: 'text/plain'}), 'typed.txt')">txt</button>
<button id=named onclick="save(new Blob([new Uint8Array([0,1,2,255])], {type: 'application/octet-stream'}), 'r-' + f.value + '.bin')">named</button>
<script>function save(blob, name) { const a = document.createElement('a'); a.href = URL.createObjectURL(blob); a.download = name; document.body.append(a); a.click(); }</script>`,
			strings.Repeat("A", n(r)))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// encodedForms are httpSecret as a source may hold it: inside a longer
// base64 blob (at each alignment), every character as an HTML decimal or
// hex reference, as \u and \x escapes, and every byte percent-encoded.
func encodedForms() []string {
	var forms []string
	for pad := range 3 {
		forms = append(forms, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", 4+pad)+httpSecret+"tail")))
	}
	each := func(f string) string {
		var b strings.Builder
		for _, c := range []byte(httpSecret) {
			fmt.Fprintf(&b, f, c)
		}
		return b.String()
	}
	return append(forms, each("&#%d;"), each("&#x%x;"), each(`\u%04x`), each(`\x%02x`), each("%%%02x"))
}

// scrubFleet is a worker with the secrets API_KEY and MD_KEY.
func scrubFleet(t *testing.T) *fleet {
	t.Helper()
	f := newFleet(t)
	key := storeSecret(t, f, "API_KEY", httpSecret)
	storeSecretWith(t, f, key, "MD_KEY", mdSecret)
	f.worker(browser.Config{ID: "scrub", MaxSessions: 1, SecretKey: key})
	return f
}

func elementReq(tool string, sel string, maxChars int) *browserv1.ToolRequest {
	el := &browserv1.Element{By: &browserv1.Element_Selector{Selector: sel}}
	req := &browserv1.ToolRequest{MaxChars: int32(maxChars)}
	switch tool {
	case "get_text":
		req.Tool = &browserv1.ToolRequest_GetText{GetText: el}
	case "get_html":
		req.Tool = &browserv1.ToolRequest_GetHtml{GetHtml: el}
	}
	return req
}

// TestScrubBeforeCut: a result cut at its cap, or at a call's max_chars or
// max_bytes, with the cut inside a secret's value, shows none of it.
func TestScrubBeforeCut(t *testing.T) {
	t.Parallel()
	f := scrubFleet(t)
	ts := scrubSite(t)
	s := f.mustOpen()
	const k = 300 // letters before the secret
	f.mustCall(s, openReq(fmt.Sprintf("%s/text?n=%d", ts.URL, k)))
	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
	}{
		{"get_text max_chars", elementReq("get_text", "#t", k+10)},
		{"get_html max_chars", elementReq("get_html", "#t", k+10)},
		{"eval max_chars", withMax(evalReq(`document.getElementById("t").textContent`), k+11)}, // 1: the JSON quote
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.mustCall(s, tc.req)
			if !strings.Contains(got, strings.Repeat("A", k)) || !strings.Contains(got, "[cut at") {
				t.Errorf("%s = %.400q, want the letters and a cut marker", tc.name, got)
			}
			noSecret(t, tc.name, got)
		})
	}
	t.Run("network_request max_bytes", func(t *testing.T) {
		id := requestID(t, f, s, "/body")
		got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: id, MaxBytes: k + 10}}})
		if !strings.Contains(got, strings.Repeat("A", k)) {
			t.Errorf("network_request = %.400q, want the letters", got)
		}
		noSecret(t, "network_request", got)
	})
	t.Run("snapshot max_chars", func(t *testing.T) {
		f.mustCall(s, openReq(fmt.Sprintf("%s/para?n=%d", ts.URL, 150)))
		whole := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{}}})
		m := regexp.MustCompile(`paragraph \[ref=(e\d+)\]`).FindStringSubmatch(whole)
		if m == nil {
			t.Fatalf("snapshot = %q, want a paragraph", whole)
		}
		// The paragraph's snapshot is one line: cut it at each place
		// inside the secret, whatever the line's prefix.
		for max := 150; max < 150+60; max += 3 {
			got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Ref: m[1]}}, MaxChars: int32(max)})
			if !strings.Contains(got, "[snapshot cut at max_chars") {
				t.Fatalf("snapshot ref=%s max_chars=%d = %q, want it cut", m[1], max, got)
			}
			noSecret(t, fmt.Sprintf("snapshot with max_chars %d", max), got)
		}
	})
	// Caps that need a long page: the page at path, with n letters
	// before the secret; the result must hold the letters and marker.
	for _, tc := range []struct {
		name, path string
		n          int
		req        *browserv1.ToolRequest
		marker     string
	}{
		{"get_text default cap", "/text", 20000 - 10, elementReq("get_text", "#t", 0), "[cut at 20000 of"},
		{"snapshot text clipped by the page", "/para", 1990, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{}}}, "…"},
		{"get_title at its cap", "/longtitle", 990, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}, "more characters)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mustCall(s, openReq(fmt.Sprintf("%s%s?n=%d", ts.URL, tc.path, tc.n)))
			got := f.mustCall(s, tc.req)
			if !strings.Contains(got, strings.Repeat("A", min(tc.n, 1000))) || !strings.Contains(got, tc.marker) {
				t.Errorf("%s = %.300q…, want it cut (%s)", tc.name, got, tc.marker)
			}
			noSecret(t, tc.name, got)
		})
	}
	t.Run("error message clipped", func(t *testing.T) {
		f.mustCall(s, openReq(fmt.Sprintf("%s/text?n=%d", ts.URL, 1980)))
		_, err := f.call(s, evalReq(`throw new Error(document.getElementById("t").textContent)`))
		wantCode(t, "eval that throws", err, commonv1.ErrorCode_SCRIPT_ERROR, "AAAA")
		noSecret(t, "the error of eval", err.Error())
	})
}

func withMax(req *browserv1.ToolRequest, n int) *browserv1.ToolRequest {
	req.MaxChars = int32(n)
	return req
}

// requestID waits for the tab's request to path and returns its id.
func requestID(t *testing.T, f *fleet, s *browserv1.OpenSessionResponse, path string) string {
	t.Helper()
	list := kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		list := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Filter: path}}})
		return list, kittest.Check(strings.Contains(list, "→ 200"), "network_requests has not shown %s: %q", path, list)
	})
	return strings.Fields(list[strings.Index(list, "\nr")+1:])[0]
}

// TestScrubEncodedForms: get_markdown escapes a secret's Markdown
// characters, and a source holds a secret base64-, HTML-, JSON- or
// URL-encoded; each comes back as the placeholder.
func TestScrubEncodedForms(t *testing.T) {
	t.Parallel()
	f := scrubFleet(t)
	ts := scrubSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/markdown"))
	got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{}}})
	if !strings.Contains(got, "{{secrets.MD_KEY}}") || strings.Contains(got, mdSecret[:4]) {
		t.Errorf("get_markdown = %q, want {{secrets.MD_KEY}} and no part of the secret", got)
	}
	f.mustCall(s, openReq(ts.URL+"/encoded"))
	id := requestID(t, f, s, "/encoded.txt")
	got = f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: id}}})
	forms := encodedForms()
	if n := strings.Count(got, "{{secrets.API_KEY}}"); n != len(forms) {
		t.Errorf("network_request = %q: %d placeholders, want %d", got, n, len(forms))
	}
	for _, form := range forms {
		core := form[len(form)/2-6 : len(form)/2+6]
		if strings.Contains(got, core) {
			t.Errorf("network_request shows the encoded form %q: %q", form, got)
		}
	}
}

// TestScrubFiles: a PDF whose title or text holds a secret, and a binary file the
// page downloads with a typed secret in it, are refused naming the file
// and the secret; a text file is scrubbed, also where it is cut.
func TestScrubFiles(t *testing.T) {
	t.Parallel()
	f := scrubFleet(t)
	ts := scrubSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/titled"))
	_, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Pdf{Pdf: &browserv1.Pdf{}}})
	wantCode(t, "pdf of a page whose title holds a secret", err, commonv1.ErrorCode_FORBIDDEN, "file page.pdf holds the value of secret API_KEY")
	noSecret(t, "the pdf error", err.Error())
	f.mustCall(s, openReq(ts.URL+"/shown"))
	_, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Pdf{Pdf: &browserv1.Pdf{}}})
	wantCode(t, "pdf of a page whose text holds a secret", err, commonv1.ErrorCode_FORBIDDEN, "file page.pdf holds the value of secret API_KEY")

	const k = 100
	f.mustCall(s, openReq(fmt.Sprintf("%s/form?n=%d", ts.URL, k)))
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{
		Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#f"}}, Value: "{{secrets.API_KEY}}"}}})
	if got := f.mustCall(s, clickSel("#bin")); !strings.Contains(got, "downloaded typed.bin") {
		t.Fatalf("click #bin = %q, want a download", got)
	}
	res, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d1"}}})
	wantCode(t, "download_get of a binary file with the typed secret", err, commonv1.ErrorCode_FORBIDDEN, "file typed.bin holds the value of secret API_KEY")
	noSecret(t, "download_get", res.String()+err.Error())

	if got := f.mustCall(s, clickSel("#txt")); !strings.Contains(got, "downloaded typed.txt") {
		t.Fatalf("click #txt = %q, want a download", got)
	}
	res, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d2"}}, MaxChars: k + 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.String(); !strings.Contains(got, strings.Repeat("A", k)) {
		t.Errorf("download_get of the text file = %q, want its start", got)
	}
	noSecret(t, "download_get of a text file cut inside the secret", res.String())
	res, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d2"}}})
	if err != nil || !strings.Contains(res.String(), "{{secrets.API_KEY}} end") {
		t.Errorf("download_get of the text file = %v, %v; want the placeholder", res, err)
	}
	noSecret(t, "download_get of a text file", res.String())

	// The file's name holds the secret.
	got := f.mustCall(s, clickSel("#named"))
	noSecret(t, "click on a download named after the secret", got)
	res, err = f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_DownloadGet{DownloadGet: &browserv1.DownloadGet{Id: "d3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.GetContent()[len(res.GetContent())-1].GetResource(); r == nil || !strings.Contains(r.GetName(), "{{secrets.API_KEY}}") {
		t.Errorf("download_get d3 = %v, want a resource named with the placeholder", res)
	}
	noSecret(t, "download_get of a file named after the secret", res.String())
}

// TestSecretFieldsDrawDiscs: scrubbing reads no pixels, so a field the
// worker types a secret into draws discs, as a password field does, before
// the text goes in. The screenshot of a text field filled with
// {{secrets.API_KEY}} is the screenshot of a password field holding the
// same value; the same field filled with plain text of that length is not.
func TestSecretFieldsDrawDiscs(t *testing.T) {
	t.Parallel()
	f := scrubFleet(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>fields</title><style>input{font:16px monospace;width:360px;border:1px solid #000;outline:none;caret-color:transparent}</style>
<style>div{font:16px monospace;width:360px;height:20px;border:1px solid #000;outline:none;caret-color:transparent}</style>
<p><input id=a> <p><input id=b> <p><input id=p type=password value=%q> <p><input id=c>
<div id=e contenteditable></div> <div id=r style="-webkit-text-security:disc">%s</div>`, httpSecret, httpSecret)
	}))
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	sel := func(id string) *browserv1.Element {
		return &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#" + id}}
	}
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: sel("a"), Value: "{{secrets.API_KEY}}"}}})
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Element: sel("b"), Value: "{{secrets.API_KEY}}"}}})
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: sel("e"), Value: "{{secrets.API_KEY}}"}}})
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: sel("c"), Value: strings.Repeat("x", len(httpSecret))}}})
	f.mustCall(s, evalReq(`document.activeElement.blur()`))
	shot := func(id string) []byte {
		t.Helper()
		res, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: &browserv1.Screenshot{Element: sel(id)}}})
		if err != nil {
			t.Fatalf("screenshot #%s: %v", id, err)
		}
		for _, c := range res.GetContent() {
			if img := c.GetImage(); img != nil {
				return img.GetData()
			}
		}
		t.Fatalf("screenshot #%s: no image in %v", id, res)
		return nil
	}
	password := shot("p")

	if got := shot("a"); !bytes.Equal(got, password) {
		t.Errorf("the field filled with a secret does not draw as the password field holding it (%d vs %d bytes of PNG)", len(got), len(password))
	}
	if got := shot("b"); !bytes.Equal(got, password) {
		t.Errorf("the field a secret was typed into does not draw as the password field holding it")
	}
	if got := shot("e"); !bytes.Equal(got, shot("r")) {
		t.Errorf("the contenteditable filled with a secret does not draw discs")
	}
	if got := shot("c"); bytes.Equal(got, password) {
		t.Errorf("a field filled with plain text draws discs too; want its text")
	}
	// The page still reads the value: the discs are drawn, not stored.
	if got := f.mustCall(s, evalReq(`document.querySelector('#a').value === document.querySelector('#p').value`)); !strings.Contains(got, "true") {
		t.Errorf("the filled field's value = %q, want the secret", got)
	}
}
