package page

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// slowSite serves pages, plus /slow.js (after a delay, a script that runs
// the page's render()), /data (JSON after a delay) and /hang (never
// answers until the test ends).
func slowSite(t *testing.T, delay time.Duration, pages map[string]string) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow.js":
			time.Sleep(delay) // a slow server, not a wait
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `render();`)
			return
		case "/data":
			time.Sleep(delay) // a slow server, not a wait
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items": ["from the server"]}`)
			return
		case "/hang":
			select {
			case <-done:
			case <-r.Context().Done():
			}
			return
		}
		servePage(w, r, pages)
	}))
	t.Cleanup(func() {
		close(done)
		srv.Close()
	})
	return srv
}

// settleMs sets the settle budget of req.
func settleMs(req *browserv1.ToolRequest, ms int32) *browserv1.ToolRequest {
	req.SettleMs = &ms
	return req
}

// changesOf decodes the change report of a result.
func changesOf(t *testing.T, res *browserv1.ToolResult) Changes {
	t.Helper()
	var m struct {
		Changes *Changes `json:"changes"`
	}
	if err := json.Unmarshal(structured.JSON(res.GetStructured()), &m); err != nil || m.Changes == nil {
		t.Fatalf("structured result %q has no changes (%v)", string(structured.JSON(res.GetStructured())), err)
	}
	return *m.Changes
}

// asyncApp loads its code after the load event, as RequireJS apps do,
// and only then renders its input.
const asyncApp = `<!doctype html><title>Async app</title><div id=app></div>
<script>
function render() { document.getElementById('app').innerHTML = '<input aria-label="What needs to be done?">'; }
addEventListener('load', () => setTimeout(() => {
  const s = document.createElement('script'); s.src = '/slow.js'; document.head.appendChild(s);
}, 0));
</script>`

func TestSettleOpenAsyncApp(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 700*time.Millisecond, map[string]string{"/": asyncApp})
	tab := newTab(t, Options{})
	res := must(t, tab, openReq(srv.URL))
	if c := changesOf(t, res); !c.Settled {
		t.Errorf("open did not settle: %+v", c)
	}
	if snap := text(must(t, tab, snapReq(true, true))); !strings.Contains(snap, `textbox "What needs to be done?"`) {
		t.Errorf("the first snapshot after open shows the page before the app rendered:\n%s", snap)
	}
	// settle_ms 0 returns at the load event: the app's code is still on
	// its way (the server holds it back).
	res = must(t, tab, settleMs(openReq(srv.URL+"/?again"), 0))
	if snap := text(must(t, tab, snapReq(true, true))); strings.Contains(snap, "textbox") {
		t.Errorf("with settle_ms 0 open waited for the app anyway (%q):\n%s", text(res), snap)
	}
}

const routerApp = `<!doctype html><title>Router</title>
<nav><a href="#/">All</a> <a href="#/active">Active</a> <button id=load onclick="load()">Load</button>
<button id=hang onclick="fetch('/hang')">Hang</button></nav>
<h1 id=view>all</h1><ul id=list></ul>
<script>
addEventListener('hashchange', () => setTimeout(() => {
  document.getElementById('view').textContent = location.hash.slice(2) || 'all';
}, 20));
function load() {
  fetch('/data').then(r => r.json()).then(d => setTimeout(() => {
    for (const it of d.items) { const li = document.createElement('li'); li.textContent = it; document.getElementById('list').appendChild(li); }
  }, 10));
}
</script>`

func TestSettleAfterClick(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 300*time.Millisecond, map[string]string{"/": routerApp})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	snap := text(must(t, tab, snapReq(true, true)))

	// A router link: the hashchange handler renders in a later task.
	res := must(t, tab, clickReq(ref(refFor(t, snap, `link "Active"`))))
	if got := text(must(t, tab, textReq(sel("#view")))); got != "active" {
		t.Errorf("after the click on a router link the view is %q, want active (click said %q)", got, text(res))
	}
	c := changesOf(t, res)
	if !c.Settled || !strings.HasSuffix(c.URL, "#/active") {
		t.Errorf("changes of a route click = %+v", c)
	}
	if !strings.Contains(text(res), "- URL: "+srv.URL+"/#/active") {
		t.Errorf("click result does not say that the URL changed: %q", text(res))
	}

	// A button that fetches, then renders.
	must(t, tab, clickReq(sel("#load")))
	if got := text(must(t, tab, textReq(sel("#list")))); got != "from the server" {
		t.Errorf("after a click that fetches, the list holds %q", got)
	}

	// A request that never ends: the budget runs out, the call succeeds
	// and says what is pending.
	res = must(t, tab, settleMs(clickReq(sel("#hang")), 300))
	c = changesOf(t, res)
	if c.Settled || !strings.Contains(c.Pending, "1 request still in flight ("+srv.URL+"/hang)") {
		t.Errorf("changes after a hanging request = %+v", c)
	}
	if !strings.Contains(text(res), "- not settled after") || !strings.Contains(text(res), "/hang") {
		t.Errorf("result after a hanging request = %q", text(res))
	}
}

func TestSettleArgumentLimits(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 0, map[string]string{"/": `<button onclick="1">Quiet</button>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	// A negative budget is no wait at all, as 0.
	res := must(t, tab, settleMs(clickReq(sel("button")), -5))
	if c := changesOf(t, res); !c.Settled {
		t.Errorf("changes = %+v", c)
	}
	// A quiet page reports no change lines.
	res = must(t, tab, clickReq(sel("button")))
	if got := text(res); strings.Contains(got, "\n") {
		t.Errorf("a click that changed nothing reports %q", got)
	}
}

func TestFillHonest(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 0, map[string]string{"/": `<!doctype html>
<ul id=items></ul>
<input id=adds aria-label="New todo" onchange="const li = document.createElement('li'); li.textContent = this.value; items.appendChild(li); this.value = ''">
<input id=blocks aria-label="Blocked" onbeforeinput="event.preventDefault()">
<input id=num type=number aria-label="Count">
<input id=upper aria-label="Upper" oninput="this.value = this.value.toUpperCase()">`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))

	res := must(t, tab, fillReq(sel("#adds"), "buy milk"))
	if got := text(res); !strings.Contains(got, `Filled textbox "New todo"`) || !strings.Contains(got, "the page then cleared the field") {
		t.Errorf("fill of a field the app empties on change = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("#items")))); got != "buy milk" {
		t.Errorf("the app added %q", got)
	}
	if got := text(must(t, tab, fillReq(sel("#upper"), "abc"))); !strings.Contains(got, `the field holds "ABC" now`) {
		t.Errorf("fill of a field that rewrites its value = %q", got)
	}
	if got := text(must(t, tab, fillReq(sel("#num"), "12"))); !strings.Contains(got, `its value is now "12"`) {
		t.Errorf("fill of a number field = %q", got)
	}
	_, err := call(t, tab, fillReq(sel("#blocks"), "x"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "did not take the text: no input event fired")
	_, err = call(t, tab, fillReq(sel("#num"), "twelve"))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `is a number field and takes only a number, not "twelve"`)
}

func TestChangeReport(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 0, map[string]string{"/": `<!doctype html><title>Before</title>
<button id=all onclick="document.title = 'After'; history.pushState({}, '', '/moved'); console.error('boom', 42); console.error('second'); alert('hi'); window.open('/popup')">All</button>
<button id=none onclick="1">None</button>`, "/popup": `<title>Popup</title>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, clickReq(sel("#all")))
	got := text(res)
	for _, want := range []string{
		"- URL: " + srv.URL + "/moved (was " + srv.URL + "/)",
		`- title: "After"`,
		"- 2 new console errors; the first: boom 42",
		`alert dialog said "hi"`,
		"- the page opened a new tab: " + srv.URL + "/popup",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("change report lacks %q:\n%s", want, got)
		}
	}
	c := changesOf(t, res)
	if c.URL != srv.URL+"/moved" || c.Title == nil || *c.Title != "After" || c.ConsoleErrors != 2 ||
		c.FirstConsoleError != "boom 42" || len(c.Dialogs) != 1 || len(c.OpenedTabs) != 1 {
		t.Errorf("structured changes = %+v", c)
	}
	// Nothing changed: one line, no report lines.
	if got := text(must(t, tab, clickReq(sel("#none")))); strings.Contains(got, "\n") {
		t.Errorf("click that changed nothing = %q", got)
	}
}

func TestSnapshotAfterAction(t *testing.T) {
	t.Parallel()
	srv := slowSite(t, 0, map[string]string{"/": `<!doctype html>
<button id=add onclick="const b = document.createElement('button'); b.textContent = 'New ' + document.querySelectorAll('button').length; document.body.appendChild(b)">Add</button>
<input aria-label="Name">`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	req := clickReq(sel("#add"))
	req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_FULL
	res := must(t, tab, req)
	if len(res.GetContent()) != 2 || !strings.Contains(res.GetContent()[1].GetText(), `button "New 1"`) {
		t.Fatalf("click with snapshot true = %v", res.GetContent())
	}
	req = clickReq(sel("#add"))
	req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF
	res = must(t, tab, req)
	diff := res.GetContent()[1].GetText()
	if !strings.Contains(diff, `+ - button "New 2"`) || strings.Contains(diff, `"Add"`) || strings.Contains(diff, `"New 1"`) {
		t.Errorf("diff after adding a button:\n%s", diff)
	}
	req = fillReq(sel("input"), "Ada")
	req.SnapshotAfter = browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF
	diff = must(t, tab, req).GetContent()[1].GetText()
	if !strings.Contains(diff, `~ - textbox "Name" [ref=`) || !strings.Contains(diff, ": Ada") || strings.Contains(diff, "New 2") {
		t.Errorf("diff after fill:\n%s", diff)
	}
}

// TestStaleRequests: a request in flight for longer than staleRequest (a
// long poll) is not waited for, and the table of requests stays bounded.
func TestStaleRequests(t *testing.T) {
	t.Parallel()
	tab := &Tab{}
	now := time.Now()
	tab.act.inflight = map[network.RequestID]request{
		"old": {url: "http://x/poll", start: now.Add(-staleRequest - time.Second)},
		"new": {url: "http://x/data", start: now},
	}
	if n, first, _, _ := tab.netState(); n != 1 || first != "http://x/data" {
		t.Errorf("netState = %d, %q; want 1, http://x/data", n, first)
	}
	for i := 0; i < maxInflight+10; i++ {
		tab.onActivity(&network.EventRequestWillBeSent{RequestID: network.RequestID(fmt.Sprint(i)), Request: &network.Request{URL: "http://x/"}, Type: network.ResourceTypeFetch})
	}
	if n := len(tab.act.inflight); n > maxInflight {
		t.Errorf("%d requests tracked, bound %d", n, maxInflight)
	}
	if tab.act.started != maxInflight+10 {
		t.Errorf("started = %d", tab.act.started)
	}
}
