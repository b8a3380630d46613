package browser_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

func emulateReq(e *browserv1.Emulate) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: e}}
}

func tabNewReq(url string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Url: url}}}
}

func tabListReq() *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}}
}

// TestEmulateSession: emulation belongs to the session: a tab opened
// after it presents itself the same way, tab_list says what is emulated,
// resize keeps the rest, and a time zone Chromium refuses leaves the
// session as it was.
func TestEmulateSession(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	ts := site(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	msg := f.mustCall(s, emulateReq(&browserv1.Emulate{Device: "iPhone 13", Timezone: "America/New_York", ColorScheme: "dark"}))
	if !strings.Contains(msg, "device iPhone 13") || !strings.Contains(msg, "timezone America/New_York") {
		t.Errorf("emulate = %q", msg)
	}
	f.mustCall(s, tabNewReq(ts.URL+"/second"))
	probe := `[navigator.userAgent.includes("iPhone"), Intl.DateTimeFormat().resolvedOptions().timeZone, matchMedia("(prefers-color-scheme: dark)").matches, screen.width].join(" ")`
	if got := f.mustCall(s, evalReq(probe)); got != `"true America/New_York true 390"` {
		t.Errorf("the new tab sees %s, want the session's emulation", got)
	}
	if got := f.mustCall(s, tabListReq()); !strings.Contains(got, "emulation: device iPhone 13, viewport 390x844 @3x mobile") {
		t.Errorf("tab_list = %q, want the emulation line", got)
	}
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 700, Height: 500}}})
	// screen: the page has no viewport meta tag, so a mobile layout stays 980 wide.
	if got := f.mustCall(s, evalReq(`screen.width + " " + Intl.DateTimeFormat().resolvedOptions().timeZone`)); got != `"700 America/New_York"` {
		t.Errorf("after resize the page sees %s", got)
	}
	_, err := f.call(s, emulateReq(&browserv1.Emulate{Timezone: "Mars/Olympus"}))
	wantCode(t, "emulate a bad time zone", err, commonv1.ErrorCode_INVALID_ARGUMENT, "not an IANA time zone")
	if got := f.mustCall(s, evalReq(`Intl.DateTimeFormat().resolvedOptions().timeZone`)); got != `"America/New_York"` {
		t.Errorf("after a refused time zone the page sees %s", got)
	}
	_, err = f.call(s, emulateReq(&browserv1.Emulate{Device: "Nokia 3310"}))
	wantCode(t, "emulate an unknown device", err, commonv1.ErrorCode_INVALID_ARGUMENT, "the devices are: iPhone SE")
	f.mustCall(s, emulateReq(&browserv1.Emulate{ResetAll: true}))
	if got := f.mustCall(s, tabListReq()); strings.Contains(got, "emulation:") {
		t.Errorf("tab_list after reset = %q", got)
	}
}

// TestNetworkRequestsBlocked: a request the session's URL policy refused
// is listed by network_requests with the rule.
func TestNetworkRequestsBlocked(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	// The page's own server, reached as localhost: not allowed.
	o := newOrigin(t, map[string]string{"/": `<!doctype html><title>x</title><script>fetch("http://localhost:" + location.port + "/secret.json")</script>`})
	s := f.openWith(enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}))
	f.mustCall(s, openReq(o.URL))
	f.waitBlocked(s, "/secret.json", "XHR")
	kittest.Eventually(t, 30*time.Second, func() error {
		got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Status: "failed"}}})
		return kittest.Check(strings.Contains(got, "/secret.json Fetch — blocked by the URL policy: not in the allow list of the global tier"), "network_requests has not marked the blocked fetch: %q", got)
	})
}

func storageReq(tool, name string) *browserv1.ToolRequest {
	n := &browserv1.StorageName{Name: name}
	switch tool {
	case "save":
		return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_StorageSave{StorageSave: n}}
	case "delete":
		return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_StorageDelete{StorageDelete: n}}
	}
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_StorageList{StorageList: &browserv1.NoArgs{}}}
}

// loginSite sets a cookie and a local storage item holding value on
// /login; /check says whether both came back, without showing them.
func loginSite(t *testing.T, value string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: value, Path: "/", HttpOnly: true})
		fmt.Fprintf(w, `<!doctype html><title>logged in</title><script>localStorage.setItem("token", %q)</script>`, value)
	})
	mux.HandleFunc("/check", func(w http.ResponseWriter, r *http.Request) {
		cookie := "no cookie"
		if c, err := r.Cookie("sid"); err == nil && c.Value == value {
			cookie = "cookie ok"
		}
		fmt.Fprintf(w, `<!doctype html><title>check</title><p id="c">%s</p><script>
			document.title = (localStorage.getItem("token") === %q ? "storage ok" : "no storage") + ", %s"</script>`, cookie, value, cookie)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestStorageSaveRestore: a login saved in one session is back in a new
// one (the cookie for the server, the local storage item for the page's
// script), and no result shows a value.
func TestStorageSaveRestore(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 3, WarmSessions: -1, SecretKey: key, CheckpointEvery: -1})
	const value = "s3cr3t-session-value-4711"
	ts := loginSite(t, value)
	s1 := f.mustOpen()
	f.mustCall(s1, openReq(ts.URL+"/login"))
	res, err := f.call(s1, storageReq("save", "site-login"))
	if err != nil {
		t.Fatalf("storage_save: %v", err)
	}
	host := strings.TrimPrefix(ts.URL, "http://")
	host = host[:strings.Index(host, ":")]
	if got := res.GetContent()[0].GetText(); !strings.Contains(got, `Saved storage "site-login": 1 cookies for `+host+"; 1 local storage items of "+ts.URL) {
		t.Errorf("storage_save = %q", got)
	}
	if strings.Contains(res.String(), value) {
		t.Errorf("storage_save result shows the value: %s", res)
	}
	list, err := f.call(s1, storageReq("list", ""))
	if err != nil || !strings.Contains(list.GetContent()[0].GetText(), "1 saved storages\nsite-login (saved ") || strings.Contains(list.String(), value) {
		t.Errorf("storage_list = %v %v", list, err)
	}

	s2 := f.mustOpen()
	if got := f.mustCall(s2, openReq(ts.URL+"/check")); !strings.Contains(got, "no storage, no cookie") {
		t.Fatalf("a new session without storage = %q, want neither", got)
	}
	open := openReq(ts.URL + "/check")
	open.GetOpen().Storage = "site-login"
	got := f.mustCall(s2, open)
	if !strings.Contains(got, "storage ok, cookie ok") || !strings.Contains(got, `started from saved storage "site-login": 1 cookies`) || strings.Contains(got, value) {
		t.Errorf("open with storage = %q, want the page to see both, and no value", got)
	}

	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
		code commonv1.ErrorCode
		want string
	}{
		{"bad name", storageReq("save", "Bad Name"), commonv1.ErrorCode_INVALID_ARGUMENT, "a lowercase letter, then"},
		{"unknown storage", func() *browserv1.ToolRequest { r := openReq(ts.URL); r.GetOpen().Storage = "nope"; return r }(), commonv1.ErrorCode_NOT_FOUND, `no saved storage "nope"`},
		{"delete unknown", storageReq("delete", "nope"), commonv1.ErrorCode_NOT_FOUND, `no saved storage "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.call(s2, tc.req)
			wantCode(t, tc.name, err, tc.code, tc.want)
		})
	}
	// tab_new with storage: the new tab's page sees both too.
	s3 := f.mustOpen()
	tabNew := tabNewReq(ts.URL + "/check")
	tabNew.GetTabNew().Storage = "site-login"
	if got := f.mustCall(s3, tabNew); !strings.HasPrefix(got, "Opened tab 1 (now active). ") || !strings.Contains(got, "storage ok, cookie ok") {
		t.Errorf("tab_new with storage = %q", got)
	}
	noURL := tabNewReq("")
	noURL.GetTabNew().Storage = "site-login"
	_, err = f.call(s3, noURL)
	wantCode(t, "tab_new with storage and no url", err, commonv1.ErrorCode_INVALID_ARGUMENT, "needs the url")
	f.mustCall(s3, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Close{Close: &browserv1.NoArgs{}}})
	f.mustCall(s2, storageReq("delete", "site-login"))
	if got := f.mustCall(s2, storageReq("list", "")); !strings.HasPrefix(got, "no saved storage") {
		t.Errorf("storage_list after delete = %q", got)
	}
}

// TestStorageLimits: a saved storage larger than MaxStorageBytes is
// refused naming the limit; a worker without the operator key says what
// saved storage needs.
func TestStorageLimits(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1, SecretKey: key, CheckpointEvery: -1, MaxStorageBytes: 2000})
	ts := loginSite(t, strings.Repeat("x", 3000))
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/login"))
	_, err := f.call(s, storageReq("save", "big"))
	wantCode(t, "storage_save over the limit", err, commonv1.ErrorCode_TOO_LARGE, "more than the limit of 2000 (the worker's --max-storage-kb)")

	g := newFleet(t)
	g.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	_, err = g.call(g.mustOpen(), storageReq("list", ""))
	wantCode(t, "storage_list without a key", err, commonv1.ErrorCode_INVALID_ARGUMENT, "needs the operator secret key")
}

func testKey(t *testing.T) *secrets.Key {
	t.Helper()
	text, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestDevtoolsScrubbed: a secret the page logs or loads comes back as its
// placeholder in console_messages, network_requests and network_request.
func TestDevtoolsScrubbed(t *testing.T) {
	t.Parallel()
	f := httpFleet(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>leaky</title><script>console.log("key is %s"); fetch("/api?k=%s"); fetch("/bin")</script>`, httpSecret, httpSecret)
	})
	mux.HandleFunc("/bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprintf(w, "\xff\xfe\x00%s\x00\x01", httpSecret) // not UTF-8: returned as base64
	})
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"echo": %q}`, r.URL.Query().Get("k"))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	consoleRes, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ConsoleMessages{ConsoleMessages: &browserv1.ConsoleMessages{}}})
	if err != nil || !strings.Contains(consoleRes.GetContent()[0].GetText(), "key is {{secrets.API_KEY}}") {
		t.Errorf("console_messages = %v %v, want the placeholder", consoleRes, err)
	}
	noSecret(t, "console_messages", consoleRes.String())
	list := kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		list := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Filter: "/api"}}})
		return list, kittest.Check(strings.Contains(list, "→ 200"), "network_requests has not shown the fetch: %q", list)
	})
	if !strings.Contains(list, "/api?k={{secrets.API_KEY}}") {
		t.Errorf("network_requests = %q, want the placeholder", list)
	}
	noSecret(t, "network_requests", list)
	id := strings.Fields(list[strings.Index(list, "\nr")+1:])[0]
	body := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: id}}})
	if !strings.Contains(body, `{"echo": "{{secrets.API_KEY}}"}`) {
		t.Errorf("network_request = %q, want the placeholder", body)
	}
	noSecret(t, "network_request", body)
	// A binary body is returned in base64, where the scrubbing of the
	// result's text could not find the secret: it is scrubbed before.
	bin := kittest.EventuallyValue(t, 30*time.Second, func() (string, error) {
		bin := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Filter: "/bin"}}})
		return bin, kittest.Check(strings.Contains(bin, "/bin Fetch → 200"), "network_requests has not shown /bin: %q", bin)
	})
	id = strings.Fields(bin[strings.Index(bin, "\nr")+1:])[0]
	body = f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: id}}})
	enc := body[strings.LastIndex(body, "\n")+1:]
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || !strings.Contains(body, "base64") {
		t.Fatalf("network_request of a binary body = %q (%v), want base64", body, err)
	}
	noSecret(t, "network_request of a binary body, decoded", string(raw))
	if !strings.Contains(string(raw), "{{secrets.API_KEY}}") {
		t.Errorf("the decoded binary body %q lacks the placeholder", raw)
	}
}

// TestDevtoolsConfig: the developer tools' limits have defaults and
// refuse values out of range, naming them.
func TestDevtoolsConfig(t *testing.T) {
	t.Parallel()
	cfg, err := browser.Config{ID: "x"}.Resolve()
	if err != nil || cfg.ConsoleBuffer != 500 || cfg.NetworkBuffer != 500 || cfg.MaxPDFBytes != 10<<20 || cfg.MaxStorageBytes != browser.DefaultMaxStorageBytes {
		t.Errorf("defaults = %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		cfg  browser.Config
		want string
	}{
		{browser.Config{ID: "x", ConsoleBuffer: -1}, "console buffer -1: must be 1-100000"},
		{browser.Config{ID: "x", NetworkBuffer: 200000}, "network buffer 200000: must be 1-100000"},
		{browser.Config{ID: "x", MaxPDFBytes: -5}, "max pdf bytes -5"},
		{browser.Config{ID: "x", MaxStorageBytes: -5}, "max storage bytes -5"},
	} {
		if _, err := tc.cfg.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRestoreEmulation: a session's emulation is in its checkpoint, and
// its restore presents itself the same way.
func TestRestoreEmulation(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ts := site(t)
	key := testKey(t)
	f.worker(browser.Config{ID: "ckem", MaxSessions: 3, SecretKey: key, CheckpointEvery: time.Second})
	s := f.mustOpen()
	f.mustCall(s, emulateReq(&browserv1.Emulate{Device: "Pixel 7", Timezone: "Europe/Berlin"}))
	f.mustCall(s, openReq(ts.URL+"/emulated"))
	f.waitCheckpoint(key, s.SessionId, `"device":"Pixel 7"`, "/emulated")
	r, err := f.restore(s.SessionId)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	probe := `[navigator.userAgent.includes("Pixel 7"), Intl.DateTimeFormat().resolvedOptions().timeZone, screen.width, location.pathname].join(" ")`
	if got := f.mustCall(r, evalReq(probe)); got != `"true Europe/Berlin 412 /emulated"` {
		t.Errorf("the restored session's page sees %s", got)
	}
	if got := f.mustCall(r, tabListReq()); !strings.Contains(got, "emulation: device Pixel 7") {
		t.Errorf("tab_list of the restored session = %q", got)
	}
}

// TestDevtoolsFlags: the limits' flags set the worker's config.
func TestDevtoolsFlags(t *testing.T) {
	t.Parallel()
	var errs []error
	fs := flag.NewFlagSet("browser", flag.ContinueOnError)
	cfg := browser.RegisterFlags(fs, &errs)
	if err := fs.Parse([]string{"--console-buffer", "7", "--network-buffer", "8", "--max-pdf-mb", "2", "--max-storage-kb", "64"}); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if cfg.ConsoleBuffer != 7 || cfg.NetworkBuffer != 8 || cfg.MaxPDFBytes != 2<<20 || cfg.MaxStorageBytes != 64<<10 {
		t.Errorf("config = %+v", cfg)
	}
}

func (f *fleet) transfer(req *browserv1.StorageTransferRequest) (*browserv1.StorageTransferResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return browserbus.Storage.Call(ctx, f.c, req)
}

// TestStorageTransfer: a Playwright storageState imported for a caller is
// what that caller's session starts from; export gives it back in the
// same shape; bad input says what is expected.
func TestStorageTransfer(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1, SecretKey: key, CheckpointEvery: -1})
	const value = "imported-value-93d1"
	ts := loginSite(t, value)
	host := strings.TrimPrefix(ts.URL, "http://")
	host = host[:strings.Index(host, ":")]
	state := fmt.Sprintf(`{"cookies": [{"name": "sid", "value": %q, "domain": %q, "path": "/", "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
		"origins": [{"origin": %q, "localStorage": [{"name": "token", "value": %q}]}]}`, value, host, ts.URL, value)
	res, err := f.transfer(&browserv1.StorageTransferRequest{Op: "import", Owner: testOwner, Name: "imported", StateJson: []byte(state)})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if !strings.Contains(res.GetSummaryJson(), `"cookies":1`) || strings.Contains(res.GetSummaryJson(), value) {
		t.Errorf("import summary = %s", res.GetSummaryJson())
	}
	s := f.mustOpen() // owner testOwner
	open := openReq(ts.URL + "/check")
	open.GetOpen().Storage = "imported"
	if got := f.mustCall(s, open); !strings.Contains(got, "storage ok, cookie ok") {
		t.Errorf("open with the imported storage = %q", got)
	}
	out, err := f.transfer(&browserv1.StorageTransferRequest{Op: "export", Owner: testOwner, Name: "imported"})
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	if st := string(out.GetStateJson()); !strings.Contains(st, `"value":"`+value+`"`) || !strings.Contains(st, `"localStorage":[{"name":"token","value":"`+value+`"}]`) {
		t.Errorf("export = %s", st)
	}
	for _, tc := range []struct {
		name string
		req  *browserv1.StorageTransferRequest
		code commonv1.ErrorCode
		want string
	}{
		{"another owner's", &browserv1.StorageTransferRequest{Op: "export", Owner: otherOwner, Name: "imported"}, commonv1.ErrorCode_NOT_FOUND, `no saved storage "imported"`},
		{"no owner", &browserv1.StorageTransferRequest{Op: "export", Name: "imported"}, commonv1.ErrorCode_INVALID_ARGUMENT, "names no owner"},
		{"a label for an owner", &browserv1.StorageTransferRequest{Op: "export", Owner: "token:abcdef", Name: "imported"}, commonv1.ErrorCode_FAILED_PRECONDITION, "upgrade the gateways"},
		{"bad name", &browserv1.StorageTransferRequest{Op: "export", Owner: testOwner, Name: "../x"}, commonv1.ErrorCode_INVALID_ARGUMENT, "a lowercase letter"},
		{"bad op", &browserv1.StorageTransferRequest{Op: "copy", Owner: testOwner, Name: "x"}, commonv1.ErrorCode_INVALID_ARGUMENT, "import, export, move or legacy"},
		{"not json", &browserv1.StorageTransferRequest{Op: "import", Owner: testOwner, Name: "x", StateJson: []byte("cookies")}, commonv1.ErrorCode_INVALID_ARGUMENT, "not a storageState JSON object"},
		{"cookie without domain", &browserv1.StorageTransferRequest{Op: "import", Owner: testOwner, Name: "x", StateJson: []byte(`{"cookies": [{"name": "a", "value": "b"}]}`)},
			commonv1.ErrorCode_INVALID_ARGUMENT, "cookie 0 has no name or no domain"},
		{"bad origin", &browserv1.StorageTransferRequest{Op: "import", Owner: testOwner, Name: "x", StateJson: []byte(`{"origins": [{"origin": "file:///etc"}]}`)},
			commonv1.ErrorCode_INVALID_ARGUMENT, "not an http(s) origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.transfer(tc.req)
			wantCode(t, tc.name, err, tc.code, tc.want)
		})
	}
}

// Owners of saved storage as the gateway sends them: digests of caller
// identities.
var (
	testOwner  = strings.Repeat("ab", 32)
	otherOwner = strings.Repeat("cd", 32)
)

// TestStorageMoveLegacy: "legacy" lists what gateways before owner
// digests saved under a caller's label scope; "move" re-seals it for an
// owner (who then exports it), never over a saved storage of that name
// the owner has already; what moved is no longer listed.
func TestStorageMoveLegacy(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1, SecretKey: key, CheckpointEvery: -1})
	sum := sha256.Sum256([]byte("token:abcdef"))
	scope := hex.EncodeToString(sum[:12])
	k := scope + ".old-login"
	sealed, err := key.Seal("browser-storage/"+k, []byte(`{"name":"old-login","cookies":[{"name":"sid","value":"legacy-value","domain":"example.com","path":"/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := jetstream.New(f.c.NATS())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(f.c.Prefix(), "_browser_storage"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, k, sealed); err != nil {
		t.Fatal(err)
	}
	list, err := f.transfer(&browserv1.StorageTransferRequest{Op: "legacy"})
	if err != nil || list.GetSummaryJson() != `[{"scope":"`+scope+`","name":"old-login"}]` {
		t.Fatalf("legacy = %v, %v; want the one legacy storage", list, err)
	}
	state := `{"cookies": [{"name": "sid", "value": "new-value", "domain": "example.com", "path": "/"}]}`
	if _, err := f.transfer(&browserv1.StorageTransferRequest{Op: "import", Owner: otherOwner, Name: "old-login", StateJson: []byte(state)}); err != nil {
		t.Fatal(err)
	}
	_, err = f.transfer(&browserv1.StorageTransferRequest{Op: "move", FromScope: scope, Owner: otherOwner, Name: "old-login"})
	wantCode(t, "move over an existing name", err, commonv1.ErrorCode_FAILED_PRECONDITION, "has a saved storage \"old-login\" already")
	_, err = f.transfer(&browserv1.StorageTransferRequest{Op: "move", FromScope: "not-a-scope", Owner: testOwner, Name: "old-login"})
	wantCode(t, "move from a bad scope", err, commonv1.ErrorCode_INVALID_ARGUMENT, "not a legacy scope")
	if _, err := f.transfer(&browserv1.StorageTransferRequest{Op: "move", FromScope: scope, Owner: testOwner, Name: "old-login"}); err != nil {
		t.Fatalf("move: %v", err)
	}
	out, err := f.transfer(&browserv1.StorageTransferRequest{Op: "export", Owner: testOwner, Name: "old-login"})
	if err != nil || !strings.Contains(string(out.GetStateJson()), "legacy-value") {
		t.Fatalf("export of the moved storage = %v, %v", out, err)
	}
	if list, err := f.transfer(&browserv1.StorageTransferRequest{Op: "legacy"}); err != nil || list.GetSummaryJson() != "[]" {
		t.Errorf("legacy after the move = %v, %v; want none", list, err)
	}
	_, err = f.transfer(&browserv1.StorageTransferRequest{Op: "move", FromScope: scope, Owner: testOwner, Name: "old-login"})
	wantCode(t, "move again", err, commonv1.ErrorCode_NOT_FOUND, `no saved storage "old-login"`)
}

// TestEmulateHeadersHidden: the values of emulate's extra headers reach
// neither the result (text or structured) nor tab_list.
func TestEmulateHeadersHidden(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	ts := site(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL))
	res, err := f.call(s, emulateReq(&browserv1.Emulate{SetHeaders: true, Headers: []*browserv1.Header{{Name: "Authorization", Value: "Bearer SUPERSECRET123"}}}))
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.call(s, tabListReq())
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]*browserv1.ToolResult{"emulate": res, "tab_list": list} {
		all := string(structured.JSON(r.GetStructured()))
		for _, c := range r.GetContent() {
			all += c.GetText()
		}
		if strings.Contains(all, "SUPERSECRET123") {
			t.Errorf("%s shows the header's value: %s", what, all)
		}
		if !strings.Contains(all, "Authorization") {
			t.Errorf("%s does not name the header: %s", what, all)
		}
	}
}

// TestEmulateBackgroundDialog: emulate does not wait on a tab whose page
// a dialog froze: that tab gets the emulation once the dialog is answered.
func TestEmulateBackgroundDialog(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ask" {
			fmt.Fprint(w, `<!doctype html><title>ask</title><script>setTimeout(() => { document.title = 'answered ' + confirm('Go on?'); }, 50)</script>`)
			return
		}
		fmt.Fprint(w, `<!doctype html><title>plain</title>`)
	}))
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	f.mustCall(s, tabNewReq(ts.URL+"/ask"))
	// The confirm opens and waits (ask mode): wait until the tab says so
	// (a fixed 300 ms could end before its timer ran on a loaded machine,
	// and the emulate below would then meet no dialog, or one opening
	// under it).
	kittest.Eventually(t, 30*time.Second, func() error {
		_, err := f.call(s, evalReq("1"))
		return kittest.Check(err != nil && strings.Contains(err.Error(), "confirm dialog is open"), "the confirm has not opened in the new tab (eval: %v)", err)
	})
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: 0}}})
	start := time.Now()
	if _, err := f.call(s, emulateReq(&browserv1.Emulate{Timezone: "Europe/Berlin"})); err != nil {
		t.Fatalf("emulate with a dialog open in another tab: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
	}
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: 1}}})
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: &browserv1.HandleDialog{Accept: true}}})
	if got := f.mustCall(s, evalReq(`Intl.DateTimeFormat().resolvedOptions().timeZone`)); got != `"Europe/Berlin"` {
		t.Errorf("after its dialog was answered the tab sees time zone %s, want the session's emulation", got)
	}
}

// TestPerformanceStartBlocked: a performance_start whose reload the URL
// policy refuses leaves no recording running.
func TestPerformanceStartBlocked(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	ts := site(t)
	call := f.openUnder(enforced(false, &browserv1.UrlRules{Tier: "global", Block: []string{"localhost"}}))
	blocked := strings.Replace(ts.URL, "127.0.0.1", "localhost", 1)
	_, _ = call(openReq(blocked)) // refused: the tab shows the browser's error page
	_, err := call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}})
	wantCode(t, "performance_start reloading a blocked page", err, commonv1.ErrorCode_FORBIDDEN, "localhost")
	_, err = call(&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStop{PerformanceStop: &browserv1.NoArgs{}}})
	wantCode(t, "performance_stop after a refused start", err, commonv1.ErrorCode_INVALID_ARGUMENT, "no performance recording is running")
}
