package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// devtoolsSite serves the developer tools' test pages: one that logs at
// every level and throws, one that fetches JSON and an image, one that
// prints its environment.
func devtoolsSite(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	html := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/console", html(`<!doctype html><title>console</title><script>
		console.debug("dbg"); console.log("plain log"); console.warn("careful"); console.error("broken");
		Promise.reject(new Error("nobody caught me"));
		setTimeout(() => { throw new Error("thrown at last"); }, 0);
	</script>`))
	mux.HandleFunc("/fetch", html(`<!doctype html><title>fetch</title><img src="/dot.gif"><script>
		fetch("/api/items.json").then(r => r.json()).then(d => document.title = "items " + d.items.length);
	</script>`))
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: loginValue, Path: "/", HttpOnly: true})
		html(fmt.Sprintf(`<!doctype html><title>logged in</title><script>localStorage.setItem("token", %q)</script>`, loginValue))(w, r)
	})
	mux.HandleFunc("/check", func(w http.ResponseWriter, r *http.Request) {
		cookie := "no cookie"
		if c, err := r.Cookie("sid"); err == nil && c.Value == loginValue {
			cookie = "cookie ok"
		}
		html(fmt.Sprintf(`<!doctype html><title>check</title><script>
			document.title = (localStorage.getItem("token") === %q ? "storage ok" : "no storage") + ", %s"</script>`, loginValue, cookie))(w, r)
	})
	mux.HandleFunc("/env", html(`<!doctype html><meta name="viewport" content="width=device-width"><title>env</title>`))
	mux.HandleFunc("/api/items.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items": ["apple", "pear"]}`)
	})
	mux.HandleFunc("/dot.gif", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/gif")
		gif, _ := base64.StdEncoding.DecodeString("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
		_, _ = w.Write(gif)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// loginValue is the cookie and local storage value of devtoolsSite's
// /login: no result, log or audit record may hold it.
const loginValue = "e2e-login-value-8c1f0d"

// eventuallyText calls a tool until its text holds want (pages log and
// fetch on their own time).
func eventuallyText(t *testing.T, ctx context.Context, c *harness.MCPClient, name string, args map[string]any, want ...string) string {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		got := text(t, ctx, c, name, args)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		return got, kittest.Check(ok, "%s %v = %q, want %q in it", name, args, got, want)
	})
}

// auditText waits until the audit trail since since records every one of
// tools, and returns its records as text, one a line.
func auditText(t *testing.T, ctx context.Context, f *harness.Fleet, since int64, tools ...string) string {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		all, err := f.AuditAll(ctx, &historyv1.AuditQuery{SinceUnixNano: since})
		if err != nil {
			t.Fatalf("audit query: %v", err)
		}
		var recs []string
		for _, r := range all {
			recs = append(recs, r.String())
		}
		joined := strings.Join(recs, "\n")
		for _, tool := range tools {
			if !strings.Contains(joined, tool) {
				return "", fmt.Errorf("the audit trail has no %s record among %d", tool, len(recs))
			}
		}
		return joined, nil
	})
}

// TestDevtools drives the developer tools through an MCP client against
// the real gateway and a worker: console_messages, network_requests and
// network_request, emulate and resize, pdf, storage_save and open with
// storage (with the audit trail, to check that no value reaches it).
func TestDevtools(t *testing.T) {
	t.Setenv("SOVEREIGN_SECRET_KEY", strings.Repeat("5e", 32)) // inherited by the workers: saved storage is sealed
	adminToken := strings.Repeat("a7", 24)
	t.Setenv("SOVEREIGN_ADMIN_TOKEN", adminToken) // the admin API imports and exports saved storage
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 3,
		gatewayArgs: []string{"--admin-listen", "127.0.0.1:0", "--storage-export"}})
	site := devtoolsSite(t)
	ctx := callCtx(t, 3*time.Minute)
	console, err := f.Gateways[0].LoggedURL(ctx, 30*time.Second, "operator console serving")
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSuffix(console, "/")
	if _, err := f.StartHistory(ctx, filepath.Join(f.Dir, "history"), ""); err != nil {
		t.Fatal(err)
	}
	since := time.Now().UnixNano()
	c := initClient(t, ctx, f.Gateways[0].MCP)

	t.Run("console_messages", func(t *testing.T) {
		text(t, ctx, c, "open", map[string]any{"url": site + "/console"})
		all := eventuallyText(t, ctx, c, "console_messages", map[string]any{"level": "debug"}, "thrown at last")
		for _, want := range []string{"[debug] dbg", "[info] plain log", "[warning] careful", "[error] broken",
			"Uncaught (in promise) Error: nobody caught me", "Uncaught Error: thrown at last", site + "/console:2"} {
			if !strings.Contains(all, want) {
				t.Errorf("console_messages = %q, want %q in it", all, want)
			}
		}
		errs := text(t, ctx, c, "console_messages", map[string]any{"level": "error", "limit": 1})
		if !strings.HasPrefix(errs, "1 console message (level error") || !strings.Contains(errs, "2 older matching messages not shown") || strings.Contains(errs, "broken") {
			t.Errorf("console_messages error limit 1 = %q, want only the newest of 3 errors", errs)
		}
		res, err := c.Tool(ctx, "console_messages", map[string]any{"level": "loud"})
		if err == nil || !strings.Contains(res.Text(), `"level"`) {
			t.Errorf("console_messages level loud = %v, want an argument error", err)
		}
	})

	t.Run("network", func(t *testing.T) {
		text(t, ctx, c, "open", map[string]any{"url": site + "/fetch"})
		list := eventuallyText(t, ctx, c, "network_requests", map[string]any{"filter": "/api/"}, "items.json Fetch → 200 application/json")
		id := strings.Fields(list[strings.Index(list, "\nr")+1:])[0]
		body := text(t, ctx, c, "network_request", map[string]any{"id": id})
		if !strings.Contains(body, `{"items": ["apple", "pear"]}`) {
			t.Errorf("network_request %s = %q", id, body)
		}
		img := eventuallyText(t, ctx, c, "network_requests", map[string]any{"resource_type": "Image"}, "dot.gif Image → 200 image/gif")
		if strings.Contains(img, "items.json") {
			t.Errorf("network_requests resource_type Image = %q lists the fetch", img)
		}
		res, err := c.Tool(ctx, "network_request", map[string]any{"id": "r9999"})
		if err == nil || !strings.Contains(res.Text(), "take the id from network_requests") {
			t.Errorf("network_request r9999 = %v %q, want not found", err, res.Text())
		}
	})

	t.Run("emulate", func(t *testing.T) {
		got := text(t, ctx, c, "emulate", map[string]any{"device": "iPhone 13", "locale": "fr-FR", "timezone": "Asia/Tokyo",
			"color_scheme": "dark", "geolocation": "48.85,2.35"})
		if !strings.Contains(got, "device iPhone 13") {
			t.Errorf("emulate = %q", got)
		}
		text(t, ctx, c, "open", map[string]any{"url": site + "/env"})
		env := evalString(t, ctx, c, `[innerWidth, navigator.userAgent.includes("iPhone"), navigator.language,
			Intl.DateTimeFormat().resolvedOptions().timeZone, matchMedia("(prefers-color-scheme: dark)").matches].join(" ")`)
		if env != "390 true fr-FR Asia/Tokyo true" {
			t.Errorf("the page sees %q", env)
		}
		if tabs := text(t, ctx, c, "tab_list", nil); !strings.Contains(tabs, "emulation: device iPhone 13") {
			t.Errorf("tab_list = %q, want the emulation line", tabs)
		}
		res, err := c.Tool(ctx, "emulate", map[string]any{"device": "Nokia 3310"})
		if err == nil || !strings.Contains(res.Text(), "the devices are: iPhone SE") {
			t.Errorf("emulate Nokia 3310 = %v %q", err, res.Text())
		}
		res, err = c.Tool(ctx, "emulate", map[string]any{"timezone": "Mars/Olympus"})
		if err == nil || !strings.Contains(res.Text(), "not an IANA time zone") {
			t.Errorf("emulate Mars/Olympus = %v %q", err, res.Text())
		}
		text(t, ctx, c, "emulate", map[string]any{"reset": true})
		text(t, ctx, c, "resize", map[string]any{"width": 640, "height": 480})
		if got := evalString(t, ctx, c, `innerWidth + "x" + innerHeight`); got != "640x480" {
			t.Errorf("after resize the page sees %s", got)
		}
	})

	t.Run("pdf", func(t *testing.T) {
		_, part, pdf := callFile(t, ctx, c, "pdf", map[string]any{"format": "A4"})
		if part.Type != "resource" || part.Resource.MIMEType != "application/pdf" || !bytes.HasPrefix(pdf, []byte("%PDF")) ||
			!strings.HasSuffix(part.Resource.URI, "page.pdf") {
			t.Errorf("pdf part = %s %s %s %.8q, want an embedded application/pdf resource starting with %%PDF",
				part.Type, part.Resource.URI, part.Resource.MIMEType, pdf)
		}
		bad, err := c.Tool(ctx, "pdf", map[string]any{"page_ranges": "first"})
		if err == nil || !strings.Contains(bad.Text(), "not a list of pages") {
			t.Errorf("pdf page_ranges first = %v %q", err, bad.Text())
		}
	})

	t.Run("storage", func(t *testing.T) {
		text(t, ctx, c, "open", map[string]any{"url": site + "/login"})
		saved := tool(t, ctx, c, "storage_save", map[string]any{"name": "site-login"})
		if got := saved.Text(); !strings.Contains(got, `Saved storage "site-login": 1 cookies for 127.0.0.1; 1 local storage items of `+site) {
			t.Errorf("storage_save = %q", got)
		}
		// A new MCP session has a new browser session: it starts logged out.
		c2 := initClient(t, ctx, f.Gateways[0].MCP)
		if got := text(t, ctx, c2, "open", map[string]any{"url": site + "/check"}); !strings.Contains(got, "no storage, no cookie") {
			t.Fatalf("open in a new session = %q", got)
		}
		got := text(t, ctx, c2, "open", map[string]any{"url": site + "/check", "storage": "site-login"})
		if !strings.Contains(got, "storage ok, cookie ok") || !strings.Contains(got, `started from saved storage "site-login"`) {
			t.Errorf("open with storage = %q, want the page to see the cookie and the local storage item", got)
		}
		if list := text(t, ctx, c2, "storage_list", nil); !strings.Contains(list, "site-login (saved ") {
			t.Errorf("storage_list = %q", list)
		}
		res, err := c2.Tool(ctx, "open", map[string]any{"url": site + "/check", "storage": "nope"})
		if err == nil || !strings.Contains(res.Text(), `no saved storage "nope"`) {
			t.Errorf("open with storage nope = %v %q", err, res.Text())
		}
		for _, r := range []*harness.ToolResult{saved} {
			if b, _ := json.Marshal(r); bytes.Contains(b, []byte(loginValue)) {
				t.Errorf("a result holds the login value: %s", b)
			}
		}
		// The audit trail records the calls, never the values.
		joined := auditText(t, ctx, f, since, "storage_list")
		if strings.Contains(joined, loginValue) {
			t.Errorf("the audit trail holds the login value")
		}
		if !strings.Contains(joined, "storage_save") {
			t.Errorf("the audit trail has no storage_save record")
		}
		// The admin API exports it (storageState JSON) and imports one.
		state := adminCall(t, ctx, "GET", admin+"/admin/storage/anonymous/site-login/export", adminToken, nil)
		if !strings.Contains(state, `"name":"sid"`) || !strings.Contains(state, `"localStorage":[{"name":"token"`) {
			t.Errorf("export = %.300s", state)
		}
		sum := adminCall(t, ctx, "PUT", admin+"/admin/storage/anonymous/imported", adminToken, strings.NewReader(state))
		if !strings.Contains(sum, `"cookies": 1`) || strings.Contains(sum, loginValue) {
			t.Errorf("import = %s", sum)
		}
		c3 := initClient(t, ctx, f.Gateways[0].MCP)
		if got := text(t, ctx, c3, "open", map[string]any{"url": site + "/check", "storage": "imported"}); !strings.Contains(got, "storage ok, cookie ok") {
			t.Errorf("open with the imported storage = %q", got)
		}
		text(t, ctx, c2, "storage_delete", map[string]any{"name": "site-login"})
		if strings.Contains(f.Logs(), loginValue) { // the export's answer is not logged either
			t.Errorf("a process logged the login value")
		}
	})
}

// adminCall calls the admin API with the admin token and returns the
// body of a 200 answer.
func adminCall(t *testing.T, ctx context.Context, method, url, token string, body io.Reader) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s = %d %s", method, url, res.StatusCode, b)
	}
	return string(b)
}
