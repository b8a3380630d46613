package page

import (
	"context"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func TestWait(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	// The tab's first tool attaches to it (several round trips to
	// Chromium): do that before the timed waits, so they time the wait
	// alone (on a loaded machine the attach alone can take most of the
	// "explicit" case's second).
	must(t, tab, getTitleReq)
	// A wait cut short by the deadline answers a tenth of the deadline
	// before it (at least 100 ms): with deadlines of 3 s that margin is
	// 300 ms, which a loaded machine's scheduling does not eat (with 800
	// and 500 ms deadlines it was 80 and 100 ms).
	tests := []struct {
		name     string
		ms       int32
		deadline time.Duration
		want     string
		min, max time.Duration
	}{
		{"explicit", 120, 5 * time.Second, "Waited 120 ms", 120 * time.Millisecond, time.Second},
		{"default", 0, 5 * time.Second, "Waited 1000 ms", time.Second, 2 * time.Second},
		{"capped_by_deadline", 60000, 3 * time.Second, "cut short by the request deadline", 1500 * time.Millisecond, 3 * time.Second},
		{"capped_at_a_minute", 90000, 3 * time.Second, "cut short", 1500 * time.Millisecond, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
			defer cancel()
			start := time.Now()
			res, err := tab.Do(ctx, waitReq(tt.ms))
			d := time.Since(start)
			if err != nil {
				t.Fatalf("wait(%d): %v", tt.ms, err)
			}
			if got := text(res); !strings.Contains(got, tt.want) {
				t.Errorf("wait(%d) = %q, want %q", tt.ms, got, tt.want)
			}
			if d < tt.min || d > tt.max {
				t.Errorf("wait(%d) took %v, want %v to %v", tt.ms, d, tt.min, tt.max)
			}
		})
	}
	_, err := call(t, tab, waitReq(-1))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "wait needs ms >= 0")
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/": `<title>Late</title><div id=shy style="display:none">shy</div><script>
			setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<button id=late>Late button</button>'), 300);
		</script>`,
		"/later": `<title>Later</title><script>setTimeout(() => location.href = '/final', 100)</script>`,
		"/final": `<h1 id=done>Done</h1>`,
	})
	must(t, tab, openReq(srv.URL))
	start := time.Now()
	res := must(t, tab, waitForReq("#late", 0))
	if got := text(res); !strings.HasPrefix(got, `Found #late: button "Late button" [ref=e`) {
		t.Errorf("wait_for = %q", got)
	}
	// Bounds on how long a call took leave a loaded machine seconds, and
	// still tell the right answer from the wrong one (here: waiting out
	// the default timeout, 10 s, instead of looking every 50 ms).
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("wait_for took %v for an element that came after 300 ms", d)
	}
	// The ref it hands out works.
	r := refFor(t, text(res), "Late button")
	must(t, tab, clickReq(ref(r)))

	start = time.Now()
	_, err := call(t, tab, waitForReq("#never", 300))
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, `no element matched "#never" within`, "ms (the timeout)")
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("wait_for with timeout_ms 300 took %v (the default timeout is 10 s)", d)
	}
	_, err = call(t, tab, waitForReq("#shy", 200))
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, `"#shy" matches an element, but it stayed hidden`)

	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, err = tab.Do(ctx, waitForReq("#never", 0))
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "wait_for", "request deadline")

	_, err = call(t, tab, waitForReq("((", 0))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `selector "((" is not valid CSS`)
	_, err = call(t, tab, waitForReq(" ", 0))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for needs one condition")
	_, err = call(t, tab, waitForReq("#x", -5))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "timeout_ms >= 0")

	// It keeps looking while the page navigates.
	must(t, tab, openReq(srv.URL+"/later"))
	must(t, tab, waitForReq("#done", 5000))
}

func TestScroll(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/":      `<body style="margin:0"><div style="width:3000px;height:5000px">tall</div></body>`,
		"/inner": `<body style="margin:0;overflow:hidden;height:100vh"><div id=pane style="height:100vh;overflow:auto"><div style="height:4000px">x</div></div></body>`,
	})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		dir    string
		amount int32
		want   string
	}{
		{"down", 0, "by 500 px; now at y=500"},
		{"down", 1200, "now at y=1700 of 5000"},
		{"up", 700, "now at y=1000"},
		{"right", 300, "now at x=300 of 3000"},
		{"left", 1000, "now at x=0"},
		{"left", 100, "already at the end"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			if got := text(must(t, tab, scrollReq(tt.dir, tt.amount))); !strings.Contains(got, tt.want) {
				t.Errorf("scroll %s %d = %q, want %q", tt.dir, tt.amount, got, tt.want)
			}
		})
	}
	if got := evalString(t, tab, `scrollY`); got != "1000" {
		t.Errorf("scrollY = %s", got)
	}
	must(t, tab, openReq(srv.URL+"/inner"))
	if got := text(must(t, tab, scrollReq("down", 400))); !strings.Contains(got, "the main scrollable area down by 400 px") {
		t.Errorf("scroll of an inner pane = %q", got)
	}
	if got := evalString(t, tab, `document.getElementById('pane').scrollTop`); got != "400" {
		t.Errorf("pane scrollTop = %s", got)
	}
	_, err := call(t, tab, scrollReq("sideways", 0))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `direction up, down, left or right, not "sideways"`)
	_, err = call(t, tab, scrollReq("down", -5))
	wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "amount >= 0")
}

func TestDialogsAreAccepted(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{Dialogs: func() browserv1.DialogMode { return browserv1.DialogMode_DIALOG_MODE_ACCEPT }})
	srv := serve(t, map[string]string{"/": `<title>Dialogs</title>
		<button id=a onclick="alert('Saved!'); this.textContent = 'after alert'">Alert</button>
		<button id=c onclick="this.textContent = 'confirm ' + confirm('Sure?')">Confirm</button>
		<button id=p onclick="this.textContent = 'prompt ' + prompt('Name?', 'Ada')">Prompt</button>`})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		sel, note, after string
	}{
		{"#a", `alert dialog said "Saved!"`, "after alert"},
		{"#c", `confirm dialog said "Sure?"`, "confirm true"},
		{"#p", `prompt dialog said "Name?"`, "prompt Ada"},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			res := must(t, tab, clickReq(sel(tt.sel)))
			if got := text(res); !strings.Contains(got, tt.note) {
				t.Errorf("click = %q, want a note %q", got, tt.note)
			}
			if got := text(must(t, tab, textReq(sel(tt.sel)))); got != tt.after {
				t.Errorf("after the dialog the button says %q, want %q", got, tt.after)
			}
		})
	}
	res := must(t, tab, evalReq(`alert('from eval'); 7`))
	if got := text(res); !strings.HasPrefix(got, "7\n") || !strings.Contains(got, "from eval") {
		t.Errorf("eval with an alert = %q", got)
	}
	// The page controls the message: the note quotes at most 2000
	// characters of it.
	res = must(t, tab, evalReq(`alert('w'.repeat(1e5)); 8`))
	if got := text(res); !strings.HasPrefix(got, "8\n") || !strings.Contains(got, "more characters)") || len(got) > 2500 {
		t.Errorf("eval with a long alert = %d bytes, %.80q…%q", len(got), got, got[max(0, len(got)-80):])
	}
}

func TestDeadlines(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<button id=b>B</button>`})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		name  string
		run   func(ctx context.Context) error
		parts []string
	}{
		{"eval_never_settles", func(ctx context.Context) error {
			_, err := tab.Do(ctx, evalReq(`new Promise(() => {})`))
			return err
		}, []string{"eval did not finish before the request deadline"}},
		{"eval_long_await", func(ctx context.Context) error {
			_, err := tab.Do(ctx, evalReq(`await new Promise(r => setTimeout(r, 5000))`))
			return err
		}, []string{"eval"}},
		{"wait_for", func(ctx context.Context) error {
			_, err := tab.Do(ctx, waitForReq("#nope", 30000))
			return err
		}, []string{"wait_for"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tt.run(ctx)
			wantErr(t, err, commonv1.ErrorCode_TIMEOUT, tt.parts...)
			// Without the deadline these run 5 s or more (forever, or
			// the script's or wait_for's own 5 and 30 s): 3.5 s leaves a
			// loaded machine 3 s past the deadline and tells them apart.
			if d := time.Since(start); d > 3500*time.Millisecond {
				t.Errorf("%s returned after %v with a 500 ms deadline", tt.name, d)
			}
		})
	}
	// A caller that cancels gets its answer at once too.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := tab.Do(ctx, evalReq(`new Promise(() => {})`))
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "canceled")
	// A tool that waits for the tab gives up at its deadline too. The
	// wait that keeps the tab busy ends well before its own deadline (a
	// 900 ms wait under a 1 s deadline was cut to 100 ms before it, and
	// a late wake-up on a loaded machine could see the deadline first).
	busyCtx, busyCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer busyCancel()
	busy := make(chan error, 1)
	go func() { _, err := tab.Do(busyCtx, waitReq(1500)); busy <- err }()
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(len(tab.sem) > 0, "the wait has not started") })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = tab.Do(ctx2, getTitleReq)
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "busy")
	if err := <-busy; err != nil {
		t.Errorf("the wait that kept the tab busy: %v", err)
	}
	// And the tab still works afterwards.
	if got := text(must(t, tab, textReq(sel("#b")))); got != "B" {
		t.Errorf("get_text after the timeouts = %q", got)
	}
}
