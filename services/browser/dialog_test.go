package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
)

func dialogSite(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>opener</title><a href="/pop?`+r.URL.RawQuery+`" target="_blank">pop</a>
<button id=c onclick="this.textContent = 'confirm ' + confirm('Sure?')">C</button>
<button id=loop onclick="for (;;) alert('again')">Loop</button>
<button id=p onclick="this.textContent = 'got ' + prompt('Token?')">P</button>`)
	})
	mux.HandleFunc("/pop", func(w http.ResponseWriter, r *http.Request) {
		// The dialog opens while the session attaches to the popup.
		fmt.Fprint(w, `<!doctype html><title>pop</title><script>setTimeout(() => document.title = 'pop ' + `+r.URL.RawQuery+`('hello from the popup'), 10)</script>`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func tabList(f *fleet, s *browserv1.OpenSessionResponse) string {
	return f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}})
}

func clickSel(s string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: &browserv1.Element{By: &browserv1.Element_Selector{Selector: s}}}}}
}

// TestPopupDialogBeforeAdoption: a popup that opens an alert or a confirm
// while the session adopts it does not wedge the click nor tab_list (it
// did for 20 s: attaching evaluates in the page, which waited for the
// dialog). The confirm gets the safe answer, false.
func TestPopupDialogBeforeAdoption(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "popdialog", MaxSessions: 2})
	ts := dialogSite(t)
	for _, kind := range []string{"alert", "confirm"} {
		t.Run(kind, func(t *testing.T) {
			s := f.mustOpen()
			f.mustCall(s, openReq(ts.URL+"/?"+kind))
			f.mustCall(s, clickSel("a"))
			if got := tabList(f, s); !strings.Contains(got, "/pop?"+kind) {
				t.Fatalf("tab_list = %q", got)
			}
		})
	}
}

// TestDialogModeOfSession: the session's mode comes from the gateway's
// default, and a call's dialogs argument replaces it for later calls.
func TestDialogModeOfSession(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "dialogmode", MaxSessions: 2})
	ts := dialogSite(t)
	s := f.mustOpen()
	open := openReq(ts.URL + "/")
	open.DefaultDialogs = browserv1.DialogMode_DIALOG_MODE_ACCEPT
	f.mustCall(s, open)
	if got := f.mustCall(s, clickSel("#c")); !strings.Contains(got, "it was accepted") {
		t.Errorf("click in accept mode = %q", got)
	}
	open = openReq(ts.URL + "/")
	open.Dialogs = browserv1.DialogMode_DIALOG_MODE_ASK
	open.DefaultDialogs = browserv1.DialogMode_DIALOG_MODE_ACCEPT
	f.mustCall(s, open)
	if got := f.mustCall(s, clickSel("#c")); !strings.Contains(got, `a confirm dialog is open: "Sure?"`) {
		t.Errorf("click in ask mode = %q", got)
	}
	_, err := f.call(s, evalReq("1"))
	wantCode(t, "eval with a dialog open", err, commonv1.ErrorCode_DIALOG_OPEN, `a confirm dialog is open: "Sure?"; answer it with handle_dialog`)
	got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: &browserv1.HandleDialog{Accept: true}}})
	if !strings.Contains(got, `Accepted the confirm dialog "Sure?"`) {
		t.Errorf("handle_dialog = %q", got)
	}
}

// TestDialogLoopTabClose: a page that opens alert after alert leaves the
// session usable: tab_list answers, open leaves it (in a new tab in its
// place) and closing the tab works.
func TestDialogLoopTabClose(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "dialogloop", MaxSessions: 2})
	ts := dialogSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	if got := f.mustCall(s, clickSel("#loop")); !strings.Contains(got, "more than 20 dialogs in a row") {
		t.Fatalf("click = %q", got)
	}
	if got := tabList(f, s); !strings.Contains(got, `"opener"`) {
		t.Fatalf("tab_list = %q", got)
	}
	// open leaves it: the session opens the address in a new tab in its
	// place.
	got := f.mustCall(s, openReq(ts.URL+"/?calm"))
	if !strings.Contains(got, "Opened "+ts.URL+"/?calm") || !strings.Contains(got, "the old page kept opening dialogs, so its tab was closed and this one opened in its place") {
		t.Fatalf("open away from the looping page = %q", got)
	}
	if got := tabList(f, s); strings.Count(got, "\n") != 0 || !strings.Contains(got, "/?calm") {
		t.Errorf("tab_list after leaving the loop = %q", got)
	}
	// And closing a looping tab works.
	f.mustCall(s, clickSel("#loop"))
	f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Close{Close: &browserv1.NoArgs{}}})
	if got := f.mustCall(s, openReq(ts.URL+"/")); !strings.Contains(got, "Opened") {
		t.Fatalf("open after closing the looping tab = %q", got)
	}
}

// TestPromptSecret: handle_dialog's prompt_text may name an operator
// secret: the page gets the value, the result only the placeholder.
func TestPromptSecret(t *testing.T) {
	t.Parallel()
	f := httpFleet(t)
	ts := dialogSite(t)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	f.mustCall(s, clickSel("#p"))
	got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: &browserv1.HandleDialog{Accept: true, PromptText: new("{{secrets.API_KEY}}")}}})
	noSecret(t, "handle_dialog", got)
	if !strings.Contains(got, `Accepted the prompt dialog "Token?" with "{{secrets.API_KEY}}"`) {
		t.Errorf("handle_dialog = %q", got)
	}
	if got := f.mustCall(s, evalReq("document.getElementById('p').textContent.length")); got != fmt.Sprint(len("got ")+len(httpSecret)) {
		t.Errorf("the page got a value of %s characters, want the secret's", got)
	}
}

// TestChangeReportClosedTabs: a tab that the page closes during an action
// is named in the action's result and dropped.
func TestChangeReportClosedTabs(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.worker(browser.Config{ID: "closedtabs", MaxSessions: 2})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>opener</title>
<button id=open onclick="window.pop = window.open('/pop')">Open</button>
<button id=close onclick="window.pop.close()">Close</button>`)
	})
	mux.HandleFunc("/pop", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `<!doctype html><title>pop</title>`) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	if got := f.mustCall(s, clickSel("#open")); !strings.Contains(got, "new tab 1") {
		t.Fatalf("click that opens a popup = %q", got)
	}
	if got := f.mustCall(s, clickSel("#close")); !strings.Contains(got, "- the page closed tab 1; this tab is tab 0 now") {
		t.Errorf("click that closes the popup = %q", got)
	}
	if got := tabList(f, s); strings.Contains(got, "pop") {
		t.Errorf("tab_list after the popup closed = %q", got)
	}
}
