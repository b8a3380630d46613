package page

import (
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// articlePage is an article with the parts get_markdown renders and the
// parts it leaves out.
const articlePage = `<!doctype html><title>article</title>
<style>.gone { display: none }</style>
<script>window.secretConfig = 1;</script>
<nav><a href="/home">Home</a></nav>
<article id="post">
<h1>Release <em>notes</em></h1>
<p>Version 2 adds <strong>forms</strong> and <a href="/docs/forms?x=1">the docs</a>.<br>Second line.</p>
<p class="gone">hidden paragraph</p>
<p aria-hidden="true">aria hidden paragraph</p>
<h2>Steps</h2>
<ol><li>Open the page</li><li>Fill the form<ul><li>name</li><li>email</li></ul></li></ol>
<table><tr><th>Tool</th><th>Kind</th></tr><tr><td>fill</td><td>text</td></tr><tr><td>check</td><td>toggle</td></tr></table>
<pre><code class="language-go">fmt.Println("hi")
return nil</code></pre>
<blockquote><p>Quoted words</p></blockquote>
<p><img src="/logo.png" alt="Logo"> and <code>inline code</code></p>
<button>Do not show</button><input value="nor this">
<style>p { color: red }</style>
</article>`

func markdownReq(el *browserv1.Element) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{Element: el}}}
}

func TestGetMarkdown(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": articlePage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	got := text(must(t, tab, markdownReq(sel("#post"))))
	for _, want := range []string{
		"# Release *notes*",
		"Version 2 adds **forms** and [the docs](" + srv.URL + "/docs/forms?x=1).\nSecond line.",
		"## Steps",
		"1. Open the page\n2. Fill the form\n   - name\n   - email",
		"| Tool | Kind |\n| --- | --- |\n| fill | text |\n| check | toggle |",
		"```go\nfmt.Println(\"hi\")\nreturn nil\n```",
		"> Quoted words",
		"![Logo](" + srv.URL + "/logo.png) and `inline code`",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("get_markdown lacks %q; got:\n%s", want, got)
		}
	}
	for _, bad := range []string{"hidden paragraph", "secretConfig", "color: red", "Do not show", "nor this", "Home"} {
		if strings.Contains(got, bad) {
			t.Errorf("get_markdown has %q, which it should leave out:\n%s", bad, got)
		}
	}
	whole := text(must(t, tab, markdownReq(nil)))
	if !strings.Contains(whole, "[Home]("+srv.URL+"/home)") || !strings.Contains(whole, "# Release *notes*") {
		t.Errorf("get_markdown of the page = %q", whole)
	}

	t.Run("cap", func(t *testing.T) {
		req := markdownReq(sel("#post"))
		req.MaxChars = 40
		got := text(must(t, tab, req))
		if !strings.HasPrefix(got, "# Release *notes*") || !strings.Contains(got, "[cut at 40 of ") {
			t.Errorf("get_markdown with max_chars 40 = %q, want the start and a cut marker", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, markdownReq(sel("#nope")))
		wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, `no element matches selector "#nope"`)
		_, err = call(t, tab, markdownReq(sel("((")))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "not valid CSS")
	})
}

func evalOnReq(el *browserv1.Element, script string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: script, Element: el}}}
}

func TestEvalOnElement(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": articlePage})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, evalOnReq(sel("#post h2"), "(el) => el.textContent"))); got != `"Steps"` {
		t.Errorf("eval on an element = %s", got)
	}
	// The main world: the page's own globals are there.
	if got := text(must(t, tab, evalOnReq(sel("#post"), "async (el) => el.id + window.secretConfig"))); got != `"post1"` {
		t.Errorf("eval on an element in the main world = %s", got)
	}
	snap := text(must(t, tab, snapReq(true, true)))
	ref := refFor(t, snap, "link")
	if got := text(must(t, tab, evalOnReq(&browserv1.Element{By: &browserv1.Element_Ref{Ref: ref}}, "el => el.getAttribute('href')"))); got != `"/home"` {
		t.Errorf("eval on a ref = %s", got)
	}
	if got := evalString(t, tab, `Object.getOwnPropertyNames(globalThis).filter((k) => k.startsWith('__sov')).length`); got != "0" {
		t.Errorf("eval left %s globals behind", got)
	}
	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, evalOnReq(sel("#post"), "42"))
		wantErr(t, err, commonv1.ErrorCode_SCRIPT_ERROR, "script must be a function")
		_, err = call(t, tab, evalOnReq(sel("#post"), "(el) => el.nope.x"))
		wantErr(t, err, commonv1.ErrorCode_SCRIPT_ERROR, "the script threw")
		_, err = call(t, tab, evalOnReq(sel("#post"), "(el) => {"))
		wantErr(t, err, commonv1.ErrorCode_SCRIPT_ERROR)
		_, err = call(t, tab, evalOnReq(sel("#nope"), "(el) => 1"))
		wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no element matches")
		_, err = call(t, tab, evalOnReq(&browserv1.Element{By: &browserv1.Element_Ref{Ref: "e999"}}, "(el) => 1"))
		wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "take a new snapshot")
	})
}

func waitForCond(w *browserv1.WaitFor) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: w}}
}

func TestWaitForTextAndURL(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{
		"/": `<title>t</title><p id="msg">Loading…</p><script>
			setTimeout(() => { document.getElementById('msg').textContent = 'All Done'; }, 100);
			setTimeout(() => history.pushState({}, '', '/orders/42/done'), 150);
		</script>`,
	})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, waitForCond(&browserv1.WaitFor{Text: "all done", TimeoutMs: 5000}))); !strings.HasPrefix(got, `Found the text "all done"`) {
		t.Errorf("wait_for text = %q", got)
	}
	if got := text(must(t, tab, waitForCond(&browserv1.WaitFor{TextGone: "Loading", TimeoutMs: 5000}))); !strings.Contains(got, "is gone") {
		t.Errorf("wait_for text_gone = %q", got)
	}
	if got := text(must(t, tab, waitForCond(&browserv1.WaitFor{Url: "**/orders/*/done", TimeoutMs: 5000}))); !strings.Contains(got, "/orders/42/done") {
		t.Errorf("wait_for url glob = %q", got)
	}
	must(t, tab, waitForCond(&browserv1.WaitFor{Url: "/orders/42", TimeoutMs: 5000}))

	t.Run("errors", func(t *testing.T) {
		_, err := call(t, tab, waitForCond(&browserv1.WaitFor{Text: "never shown", TimeoutMs: 100}))
		wantErr(t, err, commonv1.ErrorCode_TIMEOUT, `the text "never shown" did not show up`)
		_, err = call(t, tab, waitForCond(&browserv1.WaitFor{TextGone: "all done", TimeoutMs: 100}))
		wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "stayed on the page")
		_, err = call(t, tab, waitForCond(&browserv1.WaitFor{Url: "**/cart", TimeoutMs: 100}))
		wantErr(t, err, commonv1.ErrorCode_TIMEOUT, `the URL did not match "**/cart"`, "/orders/42/done")
		_, err = call(t, tab, waitForCond(&browserv1.WaitFor{Text: "a", Selector: "#b"}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "exactly one condition")
		_, err = call(t, tab, waitForCond(&browserv1.WaitFor{Text: strings.Repeat("x", maxWaitText+1)}))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "at most 1000 bytes (maxWaitText)")
	})
}

func TestGlobRegexp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		glob, url string
		want      bool
	}{
		{"**/done", "https://a.test/x/y/done", true},
		{"https://a.test/*/done", "https://a.test/x/done", true},
		{"https://a.test/*/done", "https://a.test/x/y/done", false},
		{"https://a.test/?", "https://a.test/1", true},
		{"https://a.test/p?q=1", "https://a.test/pxq=1", true},
		{"https://a.test/p.q*", "https://a.test/pxq", false},
	} {
		re, err := globRegexp(tc.glob)
		if err != nil {
			t.Fatal(err)
		}
		if got := re.MatchString(tc.url); got != tc.want {
			t.Errorf("globRegexp(%q).Match(%q) = %v, want %v", tc.glob, tc.url, got, tc.want)
		}
	}
}
