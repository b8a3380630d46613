package page

// Tests of the change report on its own: what report makes of what a tab
// recorded while a tool ran. They need no Chromium (see chromium in
// page_test.go): go test -run 'TestReport' ./internal/page/.

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
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
				dialogs: dialogs{pending: &openDialog{typ: page.DialogTypeConfirm, msg: "Sure?"}},
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
			tool, _ := catalog.ForRequest(c.req)
			c.tab.report(tool.Navigates.Of(c.req), res, c.dialogs)
			if got := res.GetContent()[0].GetText(); got != c.text {
				t.Errorf("text = %q, want %q", got, c.text)
			}
			var want any
			if err := json.Unmarshal([]byte(c.changes), &want); err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(map[string]any{"changes": want})
			if got, _ := json.Marshal(res.GetStructured().AsMap()); string(got) != string(wantJSON) {
				t.Errorf("structured content = %s, want %s", got, wantJSON)
			}
			if c.tab.seen != c.seenThen {
				t.Errorf("seen = %+v, want %+v", c.tab.seen, c.seenThen)
			}
		})
	}
}
