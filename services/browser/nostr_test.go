package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
	"github.com/sovereign-fleet/sovereign/services/signer"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Test keys (not secrets: fixed test vectors).
const (
	nostrUserHex = "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a"
	nostrPeerHex = "c15d739894c81a2fcfd3a2df85a0d2c0dbc47a280d092799f144d73d7ae78add"
)

// asker is the signer's approval hook in these tests: it records what the
// signer asked about (the origins as the signer got them) and answers with
// decide.
type asker struct {
	mu     sync.Mutex
	asked  []signer.Request
	decide func(signer.Request) error
}

func (a *asker) ask(ctx context.Context, _ string, r signer.Request) error {
	a.mu.Lock()
	a.asked = append(a.asked, r)
	decide := a.decide
	a.mu.Unlock()
	if decide == nil {
		return errors.New("nobody approved it (test)")
	}
	return decide(r)
}

func (a *asker) set(decide func(signer.Request) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked, a.decide = nil, decide
}

func (a *asker) requests() []signer.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]signer.Request(nil), a.asked...)
}

// nostrSites serves the test pages on two origins: top
// (http://127.0.0.1:<port>) and other (http://localhost:<another port>).
// Every page records typeof window.nostr from an inline script in its
// head (window.early), before anything else of its own runs; /frames
// embeds /child of both origins; /child signs on a postMessage and posts
// the outcome back.
func nostrSites(t *testing.T) (top, other string) {
	t.Helper()
	var otherURL string
	mux := http.NewServeMux()
	head := `<!doctype html><html><head><script>window.early = typeof window.nostr;</script>`
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `%s<title>nostr %s</title></head><body>page</body></html>`, head, r.URL.Path)
	})
	mux.HandleFunc("/frames", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `%s<title>frames</title></head><body>
<iframe id="same" src="/child"></iframe>
<iframe id="cross" src="%s/child"></iframe></body></html>`, head, otherURL)
	})
	mux.HandleFunc("/child", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `%s<title>child</title>
<script>
addEventListener('message', async (e) => {
  const out = {early: window.early, origin: location.origin};
  try {
    out.event = await window.nostr.signEvent({kind: e.data.kind, created_at: 1700000000, tags: [['t', 'frame']], content: 'from ' + location.origin});
  } catch (err) {
    out.error = err.message;
  }
  e.source.postMessage(out, '*');
});
</script></head><body>child</body></html>`, head)
	})
	a := httptest.NewServer(mux)
	t.Cleanup(a.Close)
	b := httptest.NewServer(mux)
	t.Cleanup(b.Close)
	otherURL = "http://localhost:" + b.URL[strings.LastIndex(b.URL, ":")+1:]
	return a.URL, otherURL
}

// evalValue runs script in the session's active tab and decodes its
// value into out.
func (f *fleet) evalValue(s *browserv1.OpenSessionResponse, script string, out any) {
	f.t.Helper()
	res, err := f.call(s, evalReq(script))
	if err != nil {
		f.t.Fatalf("eval %s: %v", script, err)
	}
	var v struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), &v); err != nil {
		f.t.Fatalf("eval %s: result %q: %v", script, string(structured.JSON(res.GetStructured())), err)
	}
	if err := json.Unmarshal(v.Value, out); err != nil {
		f.t.Fatalf("eval %s: value %s: %v", script, v.Value, err)
	}
}

func (f *fleet) evalString(s *browserv1.OpenSessionResponse, script string) string {
	f.t.Helper()
	var out string
	f.evalValue(s, script, &out)
	return out
}

// login logs the test identity in at the signer for session s and tells
// the worker, as the gateway does; it returns the public key.
func (f *fleet) login(s *browserv1.OpenSessionResponse) string {
	f.t.Helper()
	var res signerv1.LoginResponse
	err := f.c.Request(context.Background(), f.c.Subject("signer", "login"),
		&signerv1.Login{Scope: s.SessionId, Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: nostrUserHex}, &res)
	if err != nil {
		f.t.Fatalf("signer login: %v", err)
	}
	f.setIdentity(s, res.GetPubkey())
	return res.GetPubkey()
}

func (f *fleet) setIdentity(s *browserv1.OpenSessionResponse, pubkey string) {
	f.t.Helper()
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SetIdentity{SetIdentity: &browserv1.SetIdentity{Pubkey: pubkey}}})
}

func (f *fleet) signerState(scope string) signerv1.LoginState {
	f.t.Helper()
	var res signerv1.StatusResponse
	if err := f.c.Request(context.Background(), f.c.Subject("signer", "status"), &signerv1.Status{Scope: scope}, &res); err != nil {
		f.t.Fatalf("signer status: %v", err)
	}
	return res.GetState()
}

// startSigner runs the real signer on the fleet's NATS server.
func (f *fleet) startSigner(a *asker) {
	f.t.Helper()
	svc, err := signer.New(f.t.Context(), signer.Config{Ask: a.ask}, natstest.Bus(f.t, f.srv))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = svc.Close(context.Background()) })
}

// signedEvent is window.nostr.signEvent's result.
type signedEvent struct {
	ID        string     `json:"id"`
	Pubkey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// verify checks the event's id and BIP-340 signature, and its author.
func (e signedEvent) verify(t *testing.T, pubkey string) {
	t.Helper()
	ev := nostr.Event{ID: e.ID, PubKey: e.Pubkey, CreatedAt: e.CreatedAt, Kind: e.Kind, Tags: e.Tags, Content: e.Content, Sig: e.Sig}
	if err := nostr.VerifyEvent(&ev); err != nil {
		t.Fatalf("event %+v does not verify: %v", e, err)
	}
	if e.Pubkey != pubkey {
		t.Fatalf("event signed by %s, want %s", e.Pubkey, pubkey)
	}
}

// settle is a page script that awaits a window.nostr promise and returns
// {ok} or {error: message}.
func settle(expr string) string {
	return `(async () => { try { return {ok: await ` + expr + `}; } catch (e) { return {error: String(e && e.message)}; } })()`
}

type settled[T any] struct {
	OK    T      `json:"ok"`
	Error string `json:"error"`
}

// TestNostr drives window.nostr end to end: a real signer on the bus, a
// real worker and Chromium, pages served on two origins.
func TestNostr(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a := &asker{}
	f.startSigner(a)
	f.worker(browser.Config{ID: "nostr", MaxSessions: 4})
	top, other := nostrSites(t)
	userKey, err := nostr.ParseSecretKey(nostrUserHex)
	if err != nil {
		t.Fatal(err)
	}
	userPub := userKey.PublicKey()
	peerKey, err := nostr.ParseSecretKey(nostrPeerHex)
	if err != nil {
		t.Fatal(err)
	}
	peerPub := peerKey.PublicKey()
	const noGlobals = `Object.getOwnPropertyNames(window).filter(n => n.startsWith('__sovNostr')).length`

	t.Run("NoIdentityNoNostr", func(t *testing.T) {
		s := f.mustOpen()
		defer f.close(s)
		f.mustCall(s, openReq(top+"/"))
		if got := f.evalString(s, `[window.early, typeof window.nostr].join()`); got != "undefined,undefined" {
			t.Fatalf("without an identity: early, typeof window.nostr = %s, want undefined,undefined", got)
		}
		var n int
		if f.evalValue(s, noGlobals, &n); n != 0 {
			t.Fatalf("without an identity the page has %d window.nostr globals", n)
		}
		nsec := "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
		_, err := f.call(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SetIdentity{SetIdentity: &browserv1.SetIdentity{Pubkey: nsec}}})
		wantCode(t, "set_identity with a secret key", err, commonv1.ErrorCode_INVALID_ARGUMENT, "pubkey must be a Nostr public key of 64 lowercase hex characters")
		if strings.Contains(err.Error(), nsec[5:20]) {
			t.Fatalf("the error quotes the secret: %v", err)
		}
	})

	s := f.mustOpen()
	f.mustCall(s, openReq(top+"/"))
	if got := f.evalString(s, `typeof window.nostr`); got != "undefined" {
		t.Fatalf("before login: typeof window.nostr = %s", got)
	}
	if got := f.login(s); got != userPub {
		t.Fatalf("signer login pubkey %s, want %s", got, userPub)
	}

	t.Run("LoadedPageGetsItWithoutReload", func(t *testing.T) {
		if got := f.evalString(s, `[window.early, typeof window.nostr, typeof window.nostr.nip44.encrypt].join()`); got != "undefined,object,function" {
			t.Fatalf("after set_identity, without reload: %s, want undefined,object,function", got)
		}
		var n int
		if f.evalValue(s, noGlobals, &n); n != 1 { // the reply function only: the binding was taken off the window
			t.Fatalf("window.nostr left %d globals on the window, want 1 (the reply function)", n)
		}
	})

	t.Run("BeforePageScripts", func(t *testing.T) {
		f.mustCall(s, openReq(top+"/"))
		if got := f.evalString(s, `window.early`); got != "object" {
			t.Fatalf("an inline script in <head> saw typeof window.nostr = %s, want object", got)
		}
	})

	t.Run("GetPublicKey", func(t *testing.T) {
		var got settled[string]
		f.evalValue(s, settle(`window.nostr.getPublicKey()`), &got)
		if got.OK != userPub {
			t.Fatalf("getPublicKey = %+v, want %s", got, userPub)
		}
		// The page can neither replace the reply function nor answer a
		// call without the document's token.
		f.evalValue(s, settle(`(() => {
			const n = Object.getOwnPropertyNames(window).find(n => n.startsWith('__sovNostrReply'));
			const reply = window[n];
			try { window[n] = () => {}; } catch (e) {}
			try { delete window[n]; } catch (e) {}
			const p = window.nostr.getPublicKey();
			for (let i = 0; i < 1000; i++) { reply('guess', i, 'ok', 'forged'); reply(undefined, i, 'ok', 'forged'); }
			return p;
		})()`), &got)
		if got.OK != userPub {
			t.Fatalf("getPublicKey after the page tried to forge replies = %+v, want %s", got, userPub)
		}
		var relays settled[map[string]any]
		if f.evalValue(s, settle(`window.nostr.getRelays()`), &relays); relays.Error != "" || len(relays.OK) != 0 {
			t.Fatalf("getRelays = %+v, want {}", relays)
		}
	})

	t.Run("SignEvent", func(t *testing.T) {
		a.set(nil)
		var got settled[signedEvent]
		f.evalValue(s, settle(`window.nostr.signEvent({kind: 1, created_at: 1700000000, tags: [['t', 'sovereign'], ['p', '`+peerPub+`']], content: 'hello "nostr"\n☕'})`), &got)
		if got.Error != "" {
			t.Fatalf("signEvent: %s", got.Error)
		}
		got.OK.verify(t, userPub)
		if got.OK.Kind != 1 || got.OK.CreatedAt != 1700000000 || got.OK.Content != "hello \"nostr\"\n☕" || len(got.OK.Tags) != 2 || got.OK.Tags[1][1] != peerPub {
			t.Fatalf("signed event %+v differs from the one asked for", got.OK)
		}
		// No created_at: the signer stamps it now.
		f.evalValue(s, settle(`window.nostr.signEvent({kind: 7, tags: [], content: '+'})`), &got)
		got.OK.verify(t, userPub)
		if d := time.Since(time.Unix(got.OK.CreatedAt, 0)); d < -time.Minute || d > time.Minute {
			t.Fatalf("created_at %d is not now", got.OK.CreatedAt)
		}
		if asked := a.requests(); len(asked) != 0 {
			t.Fatalf("the top-level page's kind 1 and 7 needed approval: %+v", asked)
		}
	})

	t.Run("Kind0NeedsApproval", func(t *testing.T) {
		a.set(nil) // nobody approves
		var got settled[signedEvent]
		f.evalValue(s, settle(`window.nostr.signEvent({kind: 0, tags: [], content: '{"name":"x"}'})`), &got)
		want := "window.nostr: signing a kind 0 event for " + top + " needs approval"
		if !strings.HasPrefix(got.Error, want) {
			t.Fatalf("kind 0 from the page: %+v, want a rejection starting %q", got, want)
		}
		asked := a.requests()
		if len(asked) != 1 || asked[0].Origin != top || asked[0].TopOrigin != top || asked[0].Kind != 0 {
			t.Fatalf("the signer asked about %+v, want kind 0 from %s in %s", asked, top, top)
		}
	})

	t.Run("Encrypt", func(t *testing.T) {
		var got settled[string]
		f.evalValue(s, settle(`window.nostr.nip44.encrypt('`+peerPub+`', 'secret message ☕')`), &got)
		if got.Error != "" {
			t.Fatalf("nip44.encrypt: %s", got.Error)
		}
		ck, err := nostr.ConversationKey(peerKey, userPub)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := nostr.Nip44Decrypt(got.OK, ck); err != nil || plain != "secret message ☕" {
			t.Fatalf("the peer decrypts nip44 %q to %q, %v", got.OK, plain, err)
		}
		f.evalValue(s, settle(`window.nostr.nip04.encrypt('`+peerPub+`', 'legacy')`), &got)
		if plain, err := nostr.Nip04Decrypt(peerKey, userPub, got.OK); err != nil || plain != "legacy" {
			t.Fatalf("the peer decrypts nip04 %+v to %q, %v", got, plain, err)
		}
		// Decrypting needs approval by default.
		ct, err := nostr.Nip44Encrypt("to you", ck)
		if err != nil {
			t.Fatal(err)
		}
		f.evalValue(s, settle(`window.nostr.nip44.decrypt('`+peerPub+`', '`+ct+`')`), &got)
		if !strings.HasPrefix(got.Error, "window.nostr: decrypting for "+top+" needs approval") {
			t.Fatalf("nip44.decrypt from the page: %+v, want it to need approval", got)
		}
		a.set(func(signer.Request) error { return nil }) // approved
		f.evalValue(s, settle(`window.nostr.nip44.decrypt('`+peerPub+`', '`+ct+`')`), &got)
		if got.OK != "to you" {
			t.Fatalf("approved nip44.decrypt = %+v", got)
		}
	})

	t.Run("BadArguments", func(t *testing.T) {
		for _, tc := range []struct{ call, want string }{
			{`window.nostr.signEvent({kind: 70000, tags: [], content: ''})`, "window.nostr.signEvent: kind must be an integer from 0 to 65535, not 70000"},
			{`window.nostr.signEvent({kind: 1.5, tags: [], content: ''})`, "kind must be an integer from 0 to 65535, not 1.5"},
			{`window.nostr.signEvent({kind: 1, tags: [['e', 7]], content: ''})`, "tags[0][1] must be a string, not 7"},
			{`window.nostr.signEvent({kind: 1, tags: 'x', content: ''})`, "tags must be an array of arrays of strings"},
			{`window.nostr.signEvent({kind: 1, tags: []})`, "content must be a string, not undefined"},
			{`window.nostr.signEvent({kind: 1, tags: [], content: 'x'.repeat(300000)})`, "window.nostr: signEvent is too large"},
			// Under the page script's limit in characters, over the
			// worker's in bytes: the worker refuses it.
			{`window.nostr.signEvent({kind: 1, tags: [], content: '☕'.repeat(100000)})`, "bytes, the limit is 262144"},
			{`window.nostr.nip44.encrypt('npub1nope', 'x')`, "pubkey must be a public key of 64 hex characters"},
			{`window.nostr.nip04.decrypt('` + peerPub + `', 42)`, "the text must be a string, not 42"},
		} {
			var got settled[any]
			if f.evalValue(s, settle(tc.call), &got); !strings.Contains(got.Error, tc.want) {
				t.Errorf("%s: %+v, want a rejection containing %q", tc.call, got, tc.want)
			}
		}
	})

	t.Run("Frames", func(t *testing.T) {
		a.set(func(signer.Request) error { return nil })
		f.mustCall(s, openReq(top+"/frames"))
		if got := f.evalString(s, `[window.early, document.getElementById('same').contentWindow.early].join()`); got != "object,object" {
			t.Fatalf("top and same-origin iframe saw window.nostr early: %s, want object,object", got)
		}
		for _, frame := range []struct{ id, origin string }{{"same", top}, {"cross", other}} {
			var got struct {
				Early  string      `json:"early"`
				Origin string      `json:"origin"`
				Event  signedEvent `json:"event"`
				Error  string      `json:"error"`
			}
			a.set(func(signer.Request) error { return nil })
			f.evalValue(s, `new Promise(r => { addEventListener('message', e => r(e.data), {once: true});
				document.getElementById('`+frame.id+`').contentWindow.postMessage({kind: 1}, '*'); })`, &got)
			if got.Early != "object" || got.Origin != frame.origin || got.Error != "" {
				t.Fatalf("%s iframe: %+v, want window.nostr early in %s and a signed event", frame.id, got, frame.origin)
			}
			got.Event.verify(t, userPub)
			if got.Event.Content != "from "+frame.origin {
				t.Fatalf("%s iframe signed %q", frame.id, got.Event.Content)
			}
			asked := a.requests()
			if frame.origin == top {
				if len(asked) != 0 { // the top-level origin's frames are allowed kind 1
					t.Fatalf("same-origin iframe needed approval: %+v", asked)
				}
				continue
			}
			// The signer saw the iframe's own origin (from Chromium, not
			// the page) and the tab's top-level origin.
			if len(asked) != 1 || asked[0].Origin != other || asked[0].TopOrigin != top || asked[0].Op != signer.OpSign || asked[0].Kind != 1 {
				t.Fatalf("cross-origin iframe: the signer asked about %+v, want kind 1 from %s in %s", asked, other, top)
			}
		}
	})

	t.Run("OpaqueOrigin", func(t *testing.T) {
		// A sandboxed frame has an opaque origin: the signer gets "null"
		// (never "", which would mean the agent itself).
		a.set(func(signer.Request) error { return nil })
		got := f.evalString(s, `(async () => {
			const f = document.createElement('iframe');
			f.sandbox = 'allow-scripts';
			f.srcdoc = '<script>window.nostr.signEvent({kind: 1, tags: [], content: "x"}).then(e => parent.postMessage("signed " + e.kind, "*"), e => parent.postMessage(e.message, "*"))</script>';
			document.body.append(f);
			return await new Promise(r => addEventListener('message', e => r(e.data), {once: true}));
		})()`)
		asked := a.requests()
		if got != "signed 1" || len(asked) != 1 || asked[0].Origin != "null" || asked[0].TopOrigin != top {
			t.Fatalf("sandboxed iframe: %q, the signer asked about %+v; want origin null in %s", got, asked, top)
		}
	})

	t.Run("Popup", func(t *testing.T) {
		f.mustCall(s, evalReq(`window.open('/popup', '_blank'); 1`))
		kittest.Eventually(t, 30*time.Second, func() error {
			tabs := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}})
			return kittest.Check(strings.Contains(tabs, "/popup"), "the popup is not in tab_list: %q", tabs)
		})
		f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: 1}}})
		if got := f.evalString(s, `window.early`); got != "object" {
			t.Fatalf("popup: an inline script in <head> saw typeof window.nostr = %s", got)
		}
		var got settled[string]
		if f.evalValue(s, settle(`window.nostr.getPublicKey()`), &got); got.OK != userPub {
			t.Fatalf("popup getPublicKey = %+v", got)
		}
		f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Close{Close: &browserv1.NoArgs{}}})
	})

	t.Run("CallsDoNotHoldTheSession", func(t *testing.T) {
		release := make(chan struct{})
		a.set(func(signer.Request) error { <-release; return nil })
		f.mustCall(s, openReq(top+"/frames"))
		// 16 calls wait for a person; the session keeps taking tool calls.
		f.mustCall(s, evalReq(`window.waiting = []; for (let i = 0; i < 16; i++) window.waiting.push(window.nostr.signEvent({kind: 0, tags: [], content: '{}'})); 1`))
		if got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}); !strings.Contains(got, "frames") {
			t.Fatalf("get_title while signs wait = %q", got)
		}
		// The page's own limit, then the session's (from another frame).
		var got settled[any]
		f.evalValue(s, settle(`window.nostr.getPublicKey()`), &got)
		if !strings.Contains(got.Error, "too many pending window.nostr calls") {
			t.Fatalf("17th call in a document: %+v", got)
		}
		kittest.Eventually(t, 30*time.Second, func() error {
			n := len(a.requests())
			return kittest.Check(n >= 16, "the signer has %d of the popup's 16 requests", n)
		})
		f.evalValue(s, settle(`document.getElementById('same').contentWindow.nostr.getPublicKey()`), &got)
		if !strings.Contains(got.Error, "too many pending window.nostr calls (at most 16 per session)") {
			t.Fatalf("17th call in the session: %+v", got)
		}
		close(release)
		var events []signedEvent
		f.evalValue(s, `Promise.all(window.waiting)`, &events)
		if len(events) != 16 {
			t.Fatalf("%d events signed, want 16", len(events))
		}
		events[15].verify(t, userPub)
	})

	t.Run("Logout", func(t *testing.T) {
		a.set(nil)
		f.mustCall(s, openReq(top+"/"))
		f.mustCall(s, evalReq(`window.kept = window.nostr; 1`))
		f.setIdentity(s, "")
		var got settled[any]
		if f.evalValue(s, settle(`window.kept.getPublicKey()`), &got); got.Error != "window.nostr: logged out" {
			t.Fatalf("a loaded page after logout: %+v, want logged out", got)
		}
		// Logging in again revives the loaded page's window.nostr.
		f.setIdentity(s, userPub)
		if f.evalValue(s, settle(`window.kept.getPublicKey()`), &got); got.OK != userPub {
			t.Fatalf("the loaded page after logging in again: %+v", got)
		}
		f.setIdentity(s, "")
		f.mustCall(s, openReq(top+"/"))
		if got := f.evalString(s, `[window.early, typeof window.nostr].join()`); got != "undefined,undefined" {
			t.Fatalf("a new document after logout: %s, want undefined,undefined", got)
		}
		var n int
		if f.evalValue(s, noGlobals, &n); n != 0 {
			t.Fatalf("a new document after logout has %d window.nostr globals", n)
		}
		// Logging in again puts it in the document loaded meanwhile.
		f.setIdentity(s, userPub)
		if f.evalValue(s, settle(`window.nostr.getPublicKey()`), &got); got.OK != userPub {
			t.Fatalf("after logging in again: %+v", got)
		}
	})

	t.Run("CloseLogsOut", func(t *testing.T) {
		if st := f.signerState(s.SessionId); st != signerv1.LoginState_LOGIN_STATE_LOGGED_IN {
			t.Fatalf("signer state before close: %v", st)
		}
		if err := f.close(s); err != nil {
			t.Fatal(err)
		}
		if st := f.signerState(s.SessionId); st != signerv1.LoginState_LOGIN_STATE_LOGGED_OUT {
			t.Fatalf("signer state after the session closed: %v, want logged out", st)
		}
	})
}

// logRecords is a slog handler that keeps the messages and attributes of
// the records it gets.
type logRecords struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs(attrs []slog.Attr) slog.Handler {
	return l // the worker's own attributes do not matter here
}
func (l *logRecords) WithGroup(string) slog.Handler { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

func (l *logRecords) has(sub ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, s := range sub {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		return true
	}
	return false
}

// TestNostrOutOfProcessIframe runs Chromium with --site-per-process, so
// that a cross-origin iframe is a target of its own: it gets window.nostr
// through its own session, before its scripts, and the signer sees its
// origin and its page's top-level origin. Then Chromium dies, and the
// signer forgets the lost session's key.
func TestNostrOutOfProcessIframe(t *testing.T) {
	chrome := os.Getenv("SOVEREIGN_CHROME")
	if chrome == "" {
		var err error
		if chrome, err = osexec.LookPath("chromium"); err != nil {
			t.Skip("no chromium on PATH to wrap:", err)
		}
	}
	wrapper := filepath.Join(t.TempDir(), "chromium-site-per-process")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+chrome+" \"$@\" --site-per-process\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &logRecords{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs)) // the worker takes its logger in New
	f := newFleet(t)
	a := &asker{}
	f.startSigner(a)
	w := f.worker(browser.Config{ID: "oopif", MaxSessions: 1, Chrome: wrapper})
	slog.SetDefault(prev)
	top, other := nostrSites(t)

	s := f.mustOpen()
	userPub := f.login(s)
	f.mustCall(s, openReq(top+"/frames"))
	if !logs.has("window.nostr: hooked a target", "type=iframe") {
		t.Fatal("the cross-origin iframe did not become a target of its own: Chromium kept it in its page's process")
	}
	var got struct {
		Early  string      `json:"early"`
		Origin string      `json:"origin"`
		Event  signedEvent `json:"event"`
		Error  string      `json:"error"`
	}
	a.set(func(signer.Request) error { return nil })
	f.evalValue(s, `new Promise(r => { addEventListener('message', e => r(e.data), {once: true});
		document.getElementById('cross').contentWindow.postMessage({kind: 1}, '*'); })`, &got)
	if got.Early != "object" || got.Origin != other || got.Error != "" {
		t.Fatalf("out-of-process iframe: %+v, want window.nostr early in %s and a signed event", got, other)
	}
	got.Event.verify(t, userPub)
	asked := a.requests()
	if len(asked) != 1 || asked[0].Origin != other || asked[0].TopOrigin != top {
		t.Fatalf("the signer asked about %+v, want kind 1 from %s in %s", asked, other, top)
	}

	// When Chromium dies, the lost session's key is logged out.
	if err := w.KillChromium(); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		st := f.signerState(s.SessionId)
		return kittest.Check(st == signerv1.LoginState_LOGIN_STATE_LOGGED_OUT, "the signer still holds the key of a session lost with its Chromium (%s)", st)
	})
}

// BenchmarkNostrSign measures window.nostr.signEvent from a page: page →
// binding → worker → NATS → signer (local key) → back into the page. One
// eval runs 20 signs one after another, or 16 at once, so the eval tool's
// own cost is left out (the page times them).
func BenchmarkNostrSign(b *testing.B) {
	// One log record per call would drown the table.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	b.Cleanup(func() { slog.SetDefault(prev) })
	f := newFleet(b)
	f.startSigner(&asker{})
	f.worker(browser.Config{ID: "bench", MaxSessions: 2})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>bench</title>")
	}))
	b.Cleanup(srv.Close)
	s := f.mustOpen()
	defer f.close(s)
	f.mustCall(s, openReq(srv.URL+"/"))
	f.login(s)
	for _, bc := range []struct {
		name   string
		n      int
		script string
	}{
		{"sequential", 20, `(async () => { const t0 = performance.now(); for (let i = 0; i < 20; i++) await window.nostr.signEvent({kind: 1, created_at: 1700000000 + i, tags: [], content: "bench " + i}); return performance.now() - t0; })()`},
		// 16: the most calls a page may have pending.
		{"concurrent", 16, `(async () => { const t0 = performance.now(); await Promise.all(Array.from({length: 16}, (_, i) => window.nostr.signEvent({kind: 1, created_at: 1700000000 + i, tags: [], content: "bench " + i}))); return performance.now() - t0; })()`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var total float64
			for b.Loop() {
				var ms float64
				f.evalValue(s, bc.script, &ms)
				total += ms
			}
			b.ReportMetric(total/float64(b.N*bc.n), "ms/sign")
		})
	}
}
