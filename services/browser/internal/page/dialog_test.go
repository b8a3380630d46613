package page

import (
	"strings"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func handleReq(accept bool, prompt *string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HandleDialog{HandleDialog: &browserv1.HandleDialog{Accept: accept, PromptText: prompt}}}
}

func modeOpts(m browserv1.DialogMode) Options {
	return Options{Dialogs: func() browserv1.DialogMode { return m }}
}

// TestDialogAskConfirmOnLoad: in ask mode a confirm that the page opens
// while it loads stops open at once; tools that need the page fail naming
// it; handle_dialog answers it and the page goes on.
func TestDialogAskConfirmOnLoad(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<title>Ask</title><script>document.title = 'answer ' + confirm('Delete account?')</script><button>After</button>`})
	tab := newTab(t, Options{})
	res := must(t, tab, openReq(srv.URL))
	got := text(res)
	if !strings.Contains(got, `a confirm dialog is open: "Delete account?"; answer it with handle_dialog`) {
		t.Fatalf("open = %q, want the open dialog named", got)
	}
	if c := changesOf(t, res); c.OpenDialog == nil || c.OpenDialog.Type != "confirm" || c.OpenDialog.Message != "Delete account?" {
		t.Errorf("changes.open_dialog = %+v", c.OpenDialog)
	}
	_, err := call(t, tab, snapReq(true, true))
	wantErr(t, err, commonv1.ErrorCode_DIALOG_OPEN, `snapshot cannot run: a confirm dialog is open: "Delete account?"; answer it with handle_dialog`)
	_, err = call(t, tab, clickReq(sel("button")))
	wantErr(t, err, commonv1.ErrorCode_DIALOG_OPEN, "click cannot run")
	_, err = call(t, tab, handleReq(true, new("text")))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "prompt_text is only for a prompt dialog; the open dialog is a confirm")
	if got := text(must(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetUrl{GetUrl: &browserv1.NoArgs{}}})); !strings.HasPrefix(got, srv.URL) {
		t.Errorf("get_url with a dialog open = %q", got)
	}
	res = must(t, tab, handleReq(false, nil))
	if got := text(res); !strings.Contains(got, `Dismissed the confirm dialog "Delete account?"`) {
		t.Errorf("handle_dialog = %q", got)
	}
	if got := evalString(t, tab, "document.title"); got != `"answer false"` {
		t.Errorf("after dismissing, title = %q, want %q", got, "answer false")
	}
	_, err = call(t, tab, handleReq(true, nil))
	wantErr(t, err, commonv1.ErrorCode_NOT_FOUND, "no dialog is open in this tab")
}

// TestDialogAskClick: a click that raises a prompt returns at once (the
// mouse event waits on the dialog), and handle_dialog answers with text.
func TestDialogAskClick(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<title>Prompt</title>
		<button id=p onclick="this.textContent = 'name ' + prompt('Name?', 'Ada')">Ask</button>
		<button id=a onclick="alert('Saved'); this.textContent = 'alerted'">Alert</button>`})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	// An alert is accepted in ask mode.
	if got := text(must(t, tab, clickReq(sel("#a")))); !strings.Contains(got, `alert dialog said "Saved"; it was accepted`) {
		t.Errorf("click raising an alert = %q", got)
	}
	res := must(t, tab, clickReq(sel("#p")))
	if got := text(res); !strings.Contains(got, `Clicked button "Ask"`) || !strings.Contains(got, `a prompt dialog is open: "Name?"`) {
		t.Fatalf("click raising a prompt = %q", got)
	}
	_, err := call(t, tab, handleReq(true, new(strings.Repeat("x", maxPromptText+1))))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "prompt_text has 65537 bytes; the limit is 65536")
	res = must(t, tab, handleReq(true, new("Grace")))
	if got := text(res); !strings.Contains(got, `Accepted the prompt dialog "Name?" with "Grace"`) {
		t.Errorf("handle_dialog = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("#p")))); got != "name Grace" {
		t.Errorf("after the prompt the button says %q", got)
	}
}

// TestDialogDismissMode: dismiss mode answers confirms with false at once.
func TestDialogDismissMode(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{"/": `<button onclick="this.textContent = 'confirm ' + confirm('Sure?')">C</button>`})
	tab := newTab(t, modeOpts(browserv1.DialogMode_DIALOG_MODE_DISMISS))
	must(t, tab, openReq(srv.URL))
	if got := text(must(t, tab, clickReq(sel("button")))); !strings.Contains(got, `confirm dialog said "Sure?"; it was dismissed`) {
		t.Errorf("click = %q", got)
	}
	if got := text(must(t, tab, textReq(sel("button")))); got != "confirm false" {
		t.Errorf("button = %q, want confirm false", got)
	}
}

// TestDialogBeforeunload: leaving a page with a beforeunload handler asks;
// accepting leaves, and open with the dialog open leaves too.
func TestDialogBeforeunload(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{
		"/":      `<title>Form</title><input><script>addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = 'x'; })</script><a href="/other">Other</a>`,
		"/other": `<title>Other</title>`,
	})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	must(t, tab, fillReq(sel("input"), "unsaved")) // beforeunload needs a user gesture
	res := must(t, tab, clickReq(sel("a")))
	if got := text(res); !strings.Contains(got, "a beforeunload dialog is open") {
		t.Fatalf("click on a link away = %q", got)
	}
	res = must(t, tab, handleReq(true, nil))
	if got := text(res); !strings.Contains(got, "Accepted the beforeunload dialog") || !strings.Contains(got, "the page navigated to "+srv.URL+"/other") {
		t.Errorf("handle_dialog = %q", got)
	}
	// open answers an open beforeunload dialog itself.
	must(t, tab, openReq(srv.URL))
	must(t, tab, fillReq(sel("input"), "unsaved"))
	must(t, tab, clickReq(sel("a")))
	res = must(t, tab, openReq(srv.URL+"/other"))
	if got := text(res); !strings.Contains(got, `Opened `+srv.URL+`/other`) || !strings.Contains(got, "beforeunload dialog") {
		t.Errorf("open with a beforeunload dialog open = %q", got)
	}
}

// TestDialogLoop: a page that raises an alert each time one is accepted
// gets maxDialogsInARow answers, then the next one is left open; the
// notes are bounded.
func TestDialogLoop(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{
		"/":     `<title>Loop</title><button onclick="for (;;) alert('again')">Loop</button>`,
		"/calm": `<title>Calm</title>`,
	})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	res := must(t, tab, clickReq(sel("button")))
	got := text(res)
	if !strings.Contains(got, "more than 20 dialogs in a row") || !strings.Contains(got, `an alert dialog is open: "again"`) ||
		!strings.Contains(got, "more dialogs.)") {
		t.Fatalf("click starting an alert loop = %q", got)
	}
	if len(got) > 3000 {
		t.Errorf("the result of an alert loop has %d characters; the notes should be bounded", len(got))
	}
	// The page cannot be left (its script would run on): open says so at
	// once; closing the tab works (the session's tests show it).
	_, err := call(t, tab, openReq(srv.URL+"/calm"))
	wantErr(t, err, commonv1.ErrorCode_DIALOG_OPEN, "open cannot leave this page: it keeps opening dialogs", "tab_close")
	if got := text(must(t, tab, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}})); got != "Loop" {
		t.Errorf("get_title with the loop stopped = %q", got)
	}
}

// TestDialogInFrame: a confirm that an iframe raises is handled like one
// of the main frame.
func TestDialogInFrame(t *testing.T) {
	t.Parallel()
	srv := serve(t, map[string]string{
		"/":      `<title>Outer</title><iframe src="/inner"></iframe>`,
		"/inner": `<button onclick="this.textContent = 'inner ' + confirm('From the frame?')">Inner</button>`,
	})
	tab := newTab(t, Options{})
	must(t, tab, openReq(srv.URL))
	r := refFor(t, text(must(t, tab, snapReq(true, true))), `"Inner"`)
	res := must(t, tab, clickReq(ref(r)))
	if got := text(res); !strings.Contains(got, `a confirm dialog is open: "From the frame?"`) {
		t.Fatalf("click in the frame = %q", got)
	}
	must(t, tab, handleReq(false, nil))
	if got := text(must(t, tab, textReq(ref(r)))); got != "inner false" {
		t.Errorf("the frame's button says %q", got)
	}
}
