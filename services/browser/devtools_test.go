package browser_test

import (
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
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
	f := newFleet(t)
	f.worker(browser.Config{MaxSessions: 1, WarmSessions: -1})
	// The page's own server, reached as localhost: not allowed.
	o := newOrigin(t, map[string]string{"/": `<!doctype html><title>x</title><script>fetch("http://localhost:" + location.port + "/secret.json")</script>`})
	s := f.openWith(enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}))
	f.mustCall(s, openReq(o.URL))
	f.waitBlocked(s, "/secret.json", "XHR")
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Status: "failed"}}})
		if strings.Contains(got, "/secret.json Fetch — blocked by the URL policy: not in the allow list of the global tier") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("network_requests never marked the blocked fetch: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
