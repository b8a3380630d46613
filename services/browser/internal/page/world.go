package page

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// pageJS installs the snapshot walker and the ref table in an isolated world,
// with forms.js's api beside them.
//
//go:embed page.js
var pageJS string

// worldName names Sovereign's isolated world in each frame. Chromium keeps
// one world per name and frame document, so creating it again returns the
// same world.
const worldName = "__sovereign__"

// objectGroup holds the remote objects that one tool call makes; Do
// releases it at the end.
const objectGroup = "sovereign-tool"

// frameTable numbers frames for refs: the main frame is 0 (refs e5), child
// frames get 1, 2, ... the first time a snapshot sees them (refs f1e2), and
// keep their number for the tab's life.
type frameTable struct {
	num  map[cdp.FrameID]int
	byID map[int]cdp.FrameID
	// next is the next ref number per frame number: a new document in the
	// frame starts there, so a stale ref never names a new element.
	next map[int]int64
	last int
}

func newFrameTable() frameTable {
	return frameTable{num: map[cdp.FrameID]int{}, byID: map[int]cdp.FrameID{}, next: map[int]int64{}}
}

// worldTable maps frames to the execution context of their isolated world,
// for the documents they hold now.
type worldTable struct {
	byFrame map[cdp.FrameID]runtime.ExecutionContextID
	// unique maps the unique id of each of our worlds (which the destroyed
	// event names) to its context id.
	unique map[string]runtime.ExecutionContextID
}

func newWorldTable() worldTable {
	return worldTable{byFrame: map[cdp.FrameID]runtime.ExecutionContextID{}, unique: map[string]runtime.ExecutionContextID{}}
}

// forget drops the world with context id.
func (w *worldTable) forget(id runtime.ExecutionContextID) {
	for f, v := range w.byFrame {
		if v == id {
			delete(w.byFrame, f)
		}
	}
}

// frames are the tab's frames as its tools name them: the main frame, the
// frames attached to the tab, their numbers in refs and where a new
// document's refs start (nums), and Sovereign's isolated world in each
// frame document (worlds). The event listener writes them with the rest of
// what it writes, under the tab's mu.
type frames struct {
	mu       *sync.Mutex // Tab.mu
	mainID   cdp.FrameID
	nums     frameTable
	worlds   worldTable
	attached map[cdp.FrameID]bool
}

func newFrames(mu *sync.Mutex) frames {
	return frames{mu: mu, nums: newFrameTable(), worlds: newWorldTable(), attached: map[cdp.FrameID]bool{}}
}

// onEvent runs in the tab's event loop, in order, and must not block or
// call the browser. It keeps the frame and world tables current and notes
// a renderer crash.
func (t *Tab) onEvent(ev any) {
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent, *network.EventLoadingFinished, *network.EventLoadingFailed,
		*runtime.EventConsoleAPICalled, *runtime.EventExceptionThrown, *page.EventWindowOpen:
		t.mu.Lock()
		t.onActivity(ev)
		t.devtools.onConsole(ev) // console.go
		t.devtools.onNetwork(ev) // network.go
		t.mu.Unlock()
	case *network.EventResponseReceived:
		t.mu.Lock()
		t.devtools.onNetwork(ev)
		t.mu.Unlock()
	case *page.EventJavascriptDialogOpening:
		t.dialogs.onOpening(ev, t.ready.Load())
	case *page.EventJavascriptDialogClosed:
		t.dialogs.onClosed()
	case *page.EventFileChooserOpened:
		t.noteChooser(ev) // files.go
	case *inspector.EventTargetCrashed:
		// The browser sends no reply to the commands that are pending now
		// nor to later ones; ending gone ends them (see runCtx).
		t.markGone()
	case *runtime.EventExecutionContextCreated:
		if ev.Context.Name == worldName {
			t.mu.Lock()
			t.frames.worlds.unique[ev.Context.UniqueID] = ev.Context.ID
			t.mu.Unlock()
		}
	case *runtime.EventExecutionContextDestroyed:
		t.mu.Lock()
		if id, ok := t.frames.worlds.unique[ev.ExecutionContextUniqueID]; ok {
			delete(t.frames.worlds.unique, ev.ExecutionContextUniqueID)
			t.frames.worlds.forget(id)
		}
		t.mu.Unlock()
	case *runtime.EventExecutionContextsCleared:
		t.mu.Lock()
		t.frames.worlds = newWorldTable()
		t.mu.Unlock()
	case *page.EventFrameAttached:
		t.mu.Lock()
		t.frames.attached[ev.FrameID] = true
		t.mu.Unlock()
	case *page.EventFrameNavigated:
		t.mu.Lock()
		t.frames.attached[ev.Frame.ID] = true
		delete(t.frames.worlds.byFrame, ev.Frame.ID)
		if ev.Frame.ParentID == "" {
			t.frames.mainID = ev.Frame.ID
		}
		t.mu.Unlock()
	case *page.EventFrameDetached:
		t.mu.Lock()
		delete(t.frames.attached, ev.FrameID)
		delete(t.frames.worlds.byFrame, ev.FrameID)
		t.mu.Unlock()
	}
}

// setMain records the main frame, as the frame tree names it.
func (f *frames) setMain(id cdp.FrameID) {
	f.mu.Lock()
	f.mainID = id
	f.mu.Unlock()
}

// main returns the main frame.
func (f *frames) main() cdp.FrameID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mainID
}

// num returns the number of frame id (0 for the main frame), giving it
// one when it has none.
func (f *frames) num(id cdp.FrameID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == f.mainID {
		return 0
	}
	if n, ok := f.nums.num[id]; ok {
		return n
	}
	f.nums.last++
	n := f.nums.last
	f.nums.num[id] = n
	f.nums.byID[n] = id
	return n
}

// byNum returns the frame with number n.
func (f *frames) byNum(n int) (cdp.FrameID, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		return f.mainID, f.mainID != ""
	}
	id, ok := f.nums.byID[n]
	return id, ok
}

// noteNext records the next ref number of frame n.
func (f *frames) noteNext(n int, next int64) {
	f.mu.Lock()
	if next > f.nums.next[n] {
		f.nums.next[n] = next
	}
	f.mu.Unlock()
}

// noteDesc records the ref in desc, a snapshot line that page.js's
// describe made (it gives a ref to an element that no snapshot showed
// yet), so that a new document in the frame never reuses its number.
// It returns desc cut to maxPageText characters for messages (the page
// controls its name and value).
func (f *frames) noteDesc(desc string) string {
	if r, _, ok := lineRef("- " + desc); ok {
		if m := refPattern.FindStringSubmatch(r); m != nil {
			num, _ := strconv.Atoi(m[1])
			n, _ := strconv.ParseInt(m[2], 10, 64)
			f.noteNext(num, n+1)
		}
	}
	return clipText(desc)
}

// refStart returns the number where the refs of a new document in frame n
// start.
func (f *frames) refStart(n int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.nums.next[n], 1)
}

// world returns the execution context of Sovereign's isolated world in
// frame, creating the world and installing page.js and forms.js when the
// frame's document has none yet. forms.js used to come with each call of
// a form tool; installed with page.js, it is parsed once per document
// (V8 compiles its methods on first use) and calls send only a name.
func (f *frames) world(ctx context.Context, frame cdp.FrameID) (runtime.ExecutionContextID, error) {
	f.mu.Lock()
	id, ok := f.worlds.byFrame[frame]
	f.mu.Unlock()
	if ok {
		return id, nil
	}
	res, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frame, WorldName: worldName})
	if err != nil {
		return 0, fmt.Errorf("create the isolated world: %w", err)
	}
	num := f.num(frame)
	r, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
		Expression:    "(" + pageJS + ")(" + strconv.FormatInt(f.refStart(num), 10) + ", " + formsJS + ")",
		ContextID:     res.ExecutionContextID,
		ReturnByValue: new(true),
		Silent:        new(true),
	})
	if err != nil {
		return 0, fmt.Errorf("install page.js: %w", err)
	}
	if r.ExceptionDetails != nil {
		return 0, fmt.Errorf("install page.js: %s", exceptionText(r.ExceptionDetails))
	}
	f.mu.Lock()
	f.worlds.byFrame[frame] = res.ExecutionContextID
	f.mu.Unlock()
	return res.ExecutionContextID, nil
}

// inWorld runs fn with the isolated world of frame. When the world went
// away under fn or while it was made (the frame navigated), it drops it
// and tries again in the new document, a few times: a page that reloads
// itself in a loop fails with errNavigated, which Do reports as "the page
// navigated while …".
func (f *frames) inWorld(ctx context.Context, frame cdp.FrameID, fn func(runtime.ExecutionContextID) error) error {
	for attempt := 0; ; attempt++ {
		id, err := f.world(ctx, frame)
		if err == nil {
			err = fn(id)
		}
		if err == nil || !contextGone(err) {
			return err
		}
		if attempt >= worldAttempts-1 {
			return fmt.Errorf("%w: %w", errNavigated, err)
		}
		f.mu.Lock()
		f.worlds.forget(id)
		delete(f.worlds.byFrame, frame)
		f.mu.Unlock()
		if attempt > 0 {
			// Give the new document a moment to exist.
			select {
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// has reports whether frame is the main frame or one attached to the tab.
func (f *frames) has(frame cdp.FrameID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return frame == f.mainID || f.attached[frame]
}

// worldAttempts is how many documents inWorld tries before it gives up on
// a page that keeps navigating.
const worldAttempts = 4

// errNavigated says that the page kept replacing its document while a tool
// ran.
var errNavigated = errors.New("the page navigated while the tool ran")

// contextGone reports whether err says that an execution context no longer
// exists.
func contextGone(err error) bool {
	var ce *cdproto.Error
	if !errors.As(err, &ce) {
		return false
	}
	m := strings.ToLower(ce.Message)
	return strings.Contains(m, "cannot find context") || strings.Contains(m, "context was destroyed") ||
		strings.Contains(m, "inspected target navigated")
}

// callMain calls decl, the function declaration of one of eval's scripts
// (eval.go), with this bound to obj, a remote object of the page's main
// world, and with arg when it is not nil, and decodes its JSON result into
// out (when out is not nil). arg travels as one JSON value, which must not
// be "", null, [] or {}: the protocol client leaves those out.
func callMain(ctx context.Context, obj runtime.RemoteObjectID, decl string, out, arg any) error {
	var argv []*runtime.CallArgument
	if arg != nil {
		b, err := json.Marshal(arg)
		if err != nil {
			return err
		}
		argv = []*runtime.CallArgument{{Value: b}}
	}
	r, err := chromedp.Call(ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: decl,
		ObjectID:            obj,
		Arguments:           argv,
		ReturnByValue:       new(true),
		AwaitPromise:        new(true),
		Silent:              new(true),
	})
	return decodeCall(r, err, out)
}

// decodeCall decodes the result of Runtime.callFunctionOn into out.
func decodeCall(r runtime.CallFunctionOnResult, err error, out any) error {
	if err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return &jsError{details: r.ExceptionDetails}
	}
	if out == nil || r.Result == nil || len(r.Result.Value) == 0 {
		return nil
	}
	v, err := resolveJSONClips(r.Result.Value)
	if err != nil {
		return err
	}
	return json.Unmarshal(v, out)
}

// resolveJSONClips resolves the clips that page.js marked in the strings of
// a JSON value (limits.go).
func resolveJSONClips(raw []byte) ([]byte, error) {
	if !bytes.Contains(raw, []byte(clipOpen)) && !bytes.Contains(raw, []byte(`\ue000`)) && !bytes.Contains(raw, []byte(`\uE000`)) {
		return raw, nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return resolveClips(x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	return json.Marshal(walk(v))
}

// releaseObjects releases the remote objects that the tool call made. It
// is best effort: they go with their document anyway.
func releaseObjects(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	_, _ = chromedp.Call(ctx, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: objectGroup})
}

// jsError is an exception thrown by JavaScript.
type jsError struct {
	details *runtime.ExceptionDetails
}

func (e *jsError) Error() string { return exceptionText(e.details) }

// exceptionText returns the message of an exception, such as
// "Error: boom", with at most a few lines of its stack. The page controls
// the thrown value, so the text is cut to maxPageText characters.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "unknown exception"
	}
	if ex := d.Exception; ex != nil {
		if ex.Description != "" {
			return clipText(firstLines(ex.Description, 4))
		}
		if len(ex.Value) > 0 {
			return clipText(strings.TrimSpace(d.Text + " " + string(ex.Value)))
		}
		if ex.UnserializableValue != "" {
			return clipText(strings.TrimSpace(d.Text + " " + string(ex.UnserializableValue)))
		}
	}
	return clipText(d.Text)
}

// maxPageText is the most characters of text that the page controls (a
// thrown value, a dialog message, an element's description, a frame's
// address) that one error message or note quotes. A page can throw a
// string of megabytes; the model should not get it back whole.
const maxPageText = 2000

// clipText cuts s, text that the page controls, to maxPageText characters
// (runes) and says how many it left out: "… (N more characters)".
func clipText(s string) string { return clipTo(s, maxPageText) }

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
