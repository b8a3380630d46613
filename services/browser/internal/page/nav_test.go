package page

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/":     `<title>Home</title><a href="/next">next</a>`,
		"/next": `<title>Next</title>`,
	})
	// A port that refuses connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/"
	l.Close()

	tests := []struct {
		name  string
		url   string
		want  string
		code  commonv1.ErrorCode
		parts []string
	}{
		{name: "page", url: srv.URL, want: `Opened ` + srv.URL + `/ — title "Home"`},
		{name: "fragment", url: srv.URL + "/#top", want: `Opened ` + srv.URL + `/#top — title "Home"`},
		{name: "not_found_status", url: srv.URL + "/missing", want: "(HTTP 404)"},
		{name: "about_blank", url: "about:blank", want: `Opened about:blank — title ""`},
		{name: "file", url: "file:///etc/passwd", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "file"`, "--allow-scheme file", "SOVEREIGN_ALLOW_SCHEMES=file"}},
		{name: "javascript", url: "javascript:alert(1)", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "javascript"`}},
		{name: "chrome", url: "chrome://settings", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "chrome"`}},
		{name: "data", url: "data:text/html,<b>x</b>", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "data"`}},
		{name: "view_source", url: "view-source:" + srv.URL, code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "view-source"`}},
		{name: "chrome_extension", url: "chrome-extension://abc/x.html", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "chrome-extension"`}},
		{name: "devtools", url: "devtools://devtools/bundled/inspector.html", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{`scheme "devtools"`}},
		{name: "about_other", url: "about:version", code: commonv1.ErrorCode_FORBIDDEN, parts: []string{"only about:blank"}},
		{name: "no_scheme", url: "example.com/path", code: commonv1.ErrorCode_INVALID_ARGUMENT, parts: []string{"has no scheme", "https://example.com/path"}},
		{name: "host_port_no_scheme", url: "localhost:8080", code: commonv1.ErrorCode_INVALID_ARGUMENT, parts: []string{"has no scheme"}},
		{name: "empty", url: " ", code: commonv1.ErrorCode_INVALID_ARGUMENT, parts: []string{"open needs a url"}},
		{name: "no_host", url: "http:///path", code: commonv1.ErrorCode_INVALID_ARGUMENT, parts: []string{"has no host"}},
		{name: "refused", url: refused, code: commonv1.ErrorCode_NAVIGATION_FAILED, parts: []string{refused, "ERR_CONNECTION_REFUSED"}},
		{name: "bad_host", url: "http://nonexistent.invalid/", code: commonv1.ErrorCode_NAVIGATION_FAILED, parts: []string{"http://nonexistent.invalid/", "net::ERR_"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, tab, openReq(tt.url))
			if tt.code != 0 {
				wantErr(t, err, tt.code, tt.parts...)
				return
			}
			if err != nil {
				t.Fatalf("open(%q): %v", tt.url, err)
			}
			if got := text(res); !strings.Contains(got, tt.want) {
				t.Errorf("open(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestOpenAllowedSchemes(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{AllowedSchemes: []string{"HTTP", "data:"}})
	res := must(t, tab, openReq("data:text/html,<title>D</title>"))
	if !strings.Contains(text(res), `title "D"`) {
		t.Errorf("open data: = %q", text(res))
	}
	_, err := call(t, tab, openReq("https://example.com/"))
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, `scheme "https"`, "allowed: data, http")
}

func TestOpenSlowServerTimesOut(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tab.Do(ctx, openReq(srv.URL))
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "open")
	// The page never comes: without the deadline open would wait for
	// ever. 5 s leaves a loaded machine time past the 1.5 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("open took %v with a 1.5 s deadline", d)
	}
	// The tab still works.
	must(t, tab, openReq("about:blank"))
}

func TestOpenStillLoading(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow.png" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, `<title>Partial</title><img src="/slow.png">`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// open stops waiting for the load a tenth of the deadline before it (at
	// most 1 s) to read the page: 150 ms of a 1.5 s deadline was too little
	// for that read on a loaded 2-core machine (TIMEOUT in CI-like runs).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := tab.Do(ctx, openReq(srv.URL))
	if err != nil {
		t.Fatalf("open of a page with a slow image: %v", err)
	}
	if got := text(res); !strings.Contains(got, `title "Partial"`) || !strings.Contains(got, "(still loading)") {
		t.Errorf("open = %q, want the title and (still loading)", got)
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/a": `<title>A</title><a href="/b">to b</a>`,
		"/b": `<title>B</title>`,
	})
	_, err := call(t, tab, backReq)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no earlier page")
	must(t, tab, openReq(srv.URL+"/a"))
	must(t, tab, openReq(srv.URL+"/b"))

	steps := []struct {
		name string
		req  *browserv1.ToolRequest
		want string
		url  string
	}{
		{"back", backReq, `Went back to ` + srv.URL + `/a — title "A"`, srv.URL + "/a"},
		{"forward", forwardReq, `Went forward to ` + srv.URL + `/b — title "B"`, srv.URL + "/b"},
		{"back_again", backReq, `title "A"`, srv.URL + "/a"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if got := text(must(t, tab, s.req)); !strings.Contains(got, s.want) {
				t.Errorf("%s = %q, want %q", s.name, got, s.want)
			}
			if u := text(must(t, tab, getURLReq)); u != s.url {
				t.Errorf("get_url after %s = %q, want %q", s.name, u, s.url)
			}
		})
	}
	must(t, tab, forwardReq)
	_, err = call(t, tab, forwardReq)
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no later page")
}

func TestReloadBypassesCache(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		n := hits.Add(1)
		w.Header().Set("Cache-Control", "max-age=3600")
		fmt.Fprintf(w, `<title>Visit %d</title>`, n)
	}))
	t.Cleanup(srv.Close)
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, reloadReq)
	if got := text(res); !strings.Contains(got, `Reloaded `+srv.URL+`/ — title "Visit 2"`) {
		t.Errorf("reload = %q, want a fresh copy (Visit 2)", got)
	}
}

func TestGetURLAndTitle(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/p": `<title>  Spaced &amp; title </title>`})
	must(t, tab, openReq(srv.URL+"/p?q=1#frag"))
	if got := text(must(t, tab, getURLReq)); got != srv.URL+"/p?q=1#frag" {
		t.Errorf("get_url = %q", got)
	}
	if got := text(must(t, tab, getTitleReq)); got != "Spaced & title" {
		t.Errorf("get_title = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if u, err := tab.URL(ctx); err != nil || u != srv.URL+"/p?q=1#frag" {
		t.Errorf("URL() = %q, %v", u, err)
	}
	if s, err := tab.Title(ctx); err != nil || s != "Spaced & title" {
		t.Errorf("Title() = %q, %v", s, err)
	}
	if tab.Context() == nil {
		t.Error("Context() = nil")
	}
}

func TestClickNavigates(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/":     `<title>Home</title><a href="/next">Go next</a><a href="#sec">Section</a><a href="/next" target="_blank">Popup</a>`,
		"/next": `<title>Next</title><h1>Arrived</h1>`,
	})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))

	res := must(t, tab, clickReq(ref(refFor(t, snap, `"Section"`))))
	if got := text(must(t, tab, getURLReq)); got != srv.URL+"/#sec" {
		t.Errorf("after a fragment link, url = %q (click said %q)", got, text(res))
	}
	res = must(t, tab, clickReq(ref(refFor(t, snap, `"Go next"`))))
	if got := text(res); !strings.Contains(got, "navigated to "+srv.URL+"/next") {
		t.Errorf("click = %q, want it to report the navigation", got)
	}
	if got := text(must(t, tab, getTitleReq)); got != "Next" {
		t.Errorf("title after clicking a link = %q", got)
	}
}
