package page

// Tests of the change report on its own: what report makes of what a tab
// recorded while a tool ran. They need no Chromium (see chromium in
// page_test.go): go test -run 'TestReport|TestMergeStructured' ./internal/page/.

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// TestReport: the text lines and the structured "changes" that report
// adds to a result, from the page as the last tool saw it, what settling
// saw, and what the page did meanwhile.
func TestReport(t *testing.T) {
	t.Parallel()
	seen := pageSeen{url: "https://a.example/", title: "A"}
	settledAt := func(url, title string) *settleResult {
		return &settleResult{URL: url, Title: title, Waited: 120 * time.Millisecond}
	}
	for _, c := range []struct {
		name     string
		req      *browserv1.ToolRequest
		tab      *Tab
		dialogs  []string
		text     string
		changes  string
		seenThen pageSeen
	}{
		{
			name: "nothing changed",
			req:  clickReq(ref("e1")),
			tab:  &Tab{seen: seen, call: callState{settled: settledAt(seen.url, seen.title)}},
			text: "Clicked", changes: `{"settled":true,"settle_ms":120}`, seenThen: seen,
		},
		{
			name:     "an action moved the page",
			req:      clickReq(ref("e1")),
			tab:      &Tab{seen: seen, call: callState{settled: settledAt("https://b.example/", "B")}},
			text:     "Clicked\n- URL: https://b.example/ (was https://a.example/)\n- title: \"B\"",
			changes:  `{"url":"https://b.example/","previous_url":"https://a.example/","title":"B","settled":true,"settle_ms":120}`,
			seenThen: pageSeen{url: "https://b.example/", title: "B"},
		},
		{
			name: "a navigation says nothing of its new address",
			req:  openReq("https://b.example/"),
			tab:  &Tab{seen: seen, call: callState{settled: settledAt("https://b.example/", "B")}},
			text: "Clicked", changes: `{"settled":true,"settle_ms":120}`,
			seenThen: pageSeen{url: "https://b.example/", title: "B"},
		},
		{
			name: "not settled",
			req:  clickReq(ref("e1")),
			tab:  &Tab{seen: seen, call: callState{settled: &settleResult{Timeout: true, Pending: "1 request", Waited: time.Second, URL: seen.url, Title: seen.title}}},
			text: "Clicked\n- not settled after 1000 ms: 1 request", changes: `{"settled":false,"pending":"1 request","settle_ms":1000}`, seenThen: seen,
		},
		{
			name: "windows, dialogs, choosers and console errors",
			req:  clickReq(ref("e1")),
			tab: &Tab{seen: seen, act: activity{errors: 2, firstErr: "boom", opened: []string{"https://c.example/"}},
				pending: &openDialog{typ: page.DialogTypeConfirm, msg: "Sure?"},
				call:    callState{choosers: []string{"a file chooser opened"}}},
			dialogs: []string{"an alert said hi"},
			text:    "Clicked\n- the page opened a new tab: https://c.example/\n- an alert said hi\n- a file chooser opened\n- 2 new console errors; the first: boom",
			changes: `{"opened_tabs":["https://c.example/"],"file_choosers":["a file chooser opened"],"dialogs":["an alert said hi"],` +
				`"open_dialog":{"type":"confirm","message":"Sure?"},"console_errors":2,"first_console_error":"boom","settled":true,"settle_ms":0}`,
			seenThen: seen,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := textResult("Clicked")
			c.tab.report(c.req, res, c.dialogs)
			if got := res.GetContent()[0].GetText(); got != c.text {
				t.Errorf("text = %q, want %q", got, c.text)
			}
			var got struct {
				Changes json.RawMessage `json:"changes"`
			}
			if err := json.Unmarshal([]byte(res.GetStructuredJson()), &got); err != nil || string(got.Changes) != c.changes {
				t.Errorf("changes = %s (%v), want %s", got.Changes, err, c.changes)
			}
			if c.tab.seen != c.seenThen {
				t.Errorf("seen = %+v, want %+v", c.tab.seen, c.seenThen)
			}
		})
	}
}

// TestMergeStructured: the keys of b join the JSON object a, b's win, and
// anything that is not an object leaves a as it was.
func TestMergeStructured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, want string }{
		{"", "", ""},
		{`{"x":1}`, "", `{"x":1}`},
		{"", `{"y":2}`, `{"y":2}`},
		{`{"x":1,"y":1}`, `{"y":2}`, `{"x":1,"y":2}`},
		{`{"x":1}`, `[1]`, `{"x":1}`},
		{`{"u":"<a>"}`, `{"v":"&"}`, `{"u":"<a>","v":"&"}`},
	} {
		if got := MergeStructured(c.a, c.b); got != c.want {
			t.Errorf("MergeStructured(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}
