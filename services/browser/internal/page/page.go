package page

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// DefaultSchemes are the URL schemes that open accepts when
// Options.AllowedSchemes is empty. "about" allows about:blank only.
var DefaultSchemes = []string{"http", "https", "about"}

// DefaultTimeout bounds a tool whose request context has no deadline.
const DefaultTimeout = 60 * time.Second

// Options configure a Tab.
type Options struct {
	// AllowedSchemes are the URL schemes that open accepts, such as "http"
	// (case-insensitive, with or without the colon). Empty means
	// DefaultSchemes. The worker fills it from --allow-scheme /
	// SOVEREIGN_ALLOW_SCHEMES.
	AllowedSchemes []string
	// ConsoleBuffer and NetworkBuffer are how many console messages and
	// requests a tab keeps for console_messages and network_requests (0:
	// DefaultConsoleBuffer, DefaultNetworkBuffer); MaxPDFBytes caps a pdf
	// (0: DefaultMaxPDFBytes). The worker fills them from its flags.
	ConsoleBuffer int
	NetworkBuffer int
	MaxPDFBytes   int
	// Dialogs returns the session's dialog mode when a dialog opens (nil
	// or unspecified: ask; see dialog.go).
	Dialogs func() browserv1.DialogMode
	// MaxProfileFileBytes caps the gzipped file performance_stop and
	// heap_snapshot attach (0: DefaultMaxProfileFileBytes);
	// MaxProfileReadBytes how much of a trace or heap snapshot the tab
	// reads (0: DefaultMaxProfileReadBytes). The worker fills them from its
	// flags.
	MaxProfileFileBytes int
	MaxProfileReadBytes int
	// LighthouseDir is the directory of the Lighthouse runner that
	// lighthouse_audit runs (run.mjs and its node_modules; see
	// lighthouse.go); "" for none: the tool answers FAILED_PRECONDITION. The
	// worker fills it from --lighthouse-dir.
	LighthouseDir string
	// LighthouseSlot, shared by the worker's tabs, bounds the Lighthouse
	// runs at once to its capacity (each runner is a Node process of about
	// 250 MB that takes a core); an audit waits for a slot within its
	// call's deadline. nil: no bound.
	LighthouseSlot chan struct{}
	// Traces, shared by the tabs of one browser, lets their performance
	// recordings take turns (Chromium records one trace at a time; see
	// perfturns.go). nil: a performance_start that finds the browser
	// tracing fails.
	Traces *TraceTurns
}

func (o Options) consoleBuffer() int { return orDefault(o.ConsoleBuffer, DefaultConsoleBuffer) }
func (o Options) networkBuffer() int { return orDefault(o.NetworkBuffer, DefaultNetworkBuffer) }
func (o Options) maxPDFBytes() int   { return orDefault(o.MaxPDFBytes, DefaultMaxPDFBytes) }
func (o Options) maxProfileFileBytes() int {
	return orDefault(o.MaxProfileFileBytes, DefaultMaxProfileFileBytes)
}
func (o Options) maxProfileReadBytes() int {
	return orDefault(o.MaxProfileReadBytes, DefaultMaxProfileReadBytes)
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// Tab runs page-scoped tools in one browser tab. Its methods are safe for
// concurrent use; Do runs one tool at a time.
type Tab struct {
	ctx     context.Context
	allowed map[string]bool
	opts    Options
	// sem serializes Do: the actions of one tab must not interleave.
	sem chan struct{}

	initMu sync.Mutex
	inited bool
	// listening says that init registered the event listener and started
	// the dialog goroutine. Both last for the life of the tab context, so
	// they are registered once; a later init step that fails is retried
	// on the next call without registering them again. Guarded by initMu.
	listening bool
	// early says that the tab context was made by NewContext, with the
	// event listener on it from the target's first message.
	early bool
	// ready says that init finished once: a dialog before it (while the
	// target is attached) is answered at once whatever the mode.
	ready atomic.Bool

	// gone ends when the tab's target went away: the browser detached it
	// (the page called window.close(), or something closed the target) or
	// its renderer crashed (onEvent sees Inspector.targetCrashed). Every
	// browser call of a tool ends with it (see runCtx): a crashed renderer
	// answers no command, and a tool that polls would keep polling.
	gone     context.Context
	markGone context.CancelFunc

	// madeObjects says that the running tool made remote objects in
	// objectGroup, which Do releases. Only the holder of sem uses it.
	madeObjects bool
	// unreleased counts tool calls whose objects are not released yet.
	unreleased int
	// call is what Do keeps about the running tool; lastSnap the lines of
	// the last whole interactive snapshot (for snapshot "diff"). Only the
	// holder of sem uses them.
	call     callState
	lastSnap []string
	// pointer is what the mouse and keyboard hold between tools (mouse
	// down, press down). Only the holder of sem uses it.
	pointer pointerState
	// emu is the tab's emulation (emulate.go). Only the holder of sem
	// uses it.
	emu Emulation
	// emuLater is an emulation Emulate could not apply while a dialog
	// froze the page (nil for none): the next tool applies it.
	emuLater *Emulation
	// perf are the performance and memory tools (perf.go) and their
	// recordings. Only the holder of sem uses them.
	perf perfTools
	// dialogs are the page's JavaScript dialogs (dialog.go), with a lock
	// of their own: the event listener writes them too.
	dialogs dialogs

	// mu guards the fields below, which the event listener also writes.
	mu sync.Mutex
	// frames are the tab's frames, their refs and worlds (world.go).
	frames frames
	act    activity
	// choosers are the file choosers the page opened (files.go).
	choosers []*page.EventFileChooserOpened
	seen     pageSeen
	// devtools are the console messages and requests the tab keeps
	// (console.go, network.go).
	devtools devtools
}

// New returns a Tab for tabCtx, a chromedp context bound to one tab target.
// The Tab never cancels tabCtx; the tab's owner does.
func New(tabCtx context.Context, opts Options) *Tab {
	schemes := opts.AllowedSchemes
	if len(schemes) == 0 {
		schemes = DefaultSchemes
	}
	allowed := make(map[string]bool, len(schemes))
	for _, s := range schemes {
		allowed[normScheme(s)] = true
	}
	gone, markGone := context.WithCancel(context.Background())
	t := &Tab{
		ctx:      tabCtx,
		allowed:  allowed,
		opts:     opts,
		sem:      make(chan struct{}, 1),
		gone:     gone,
		markGone: markGone,
		dialogs:  dialogs{ctx: tabCtx, modeOf: opts.Dialogs},
	}
	t.frames = newFrames(&t.mu)
	t.perf.tab = t
	t.devtools = devtools{tab: t, console: consoleRing{size: opts.consoleBuffer()}, network: netRing{size: opts.networkBuffer()}}
	return t
}

// NewContext returns a chromedp context for a tab (chromedp.NewContext on
// parent with copts) and its Tab, whose event listener is on the context
// before the target is attached. A popup that opens a dialog while the
// session attaches to it is then seen and answered: attaching evaluates
// in the page, which would wait for the dialog until the deadline.
func NewContext(parent context.Context, opts Options, copts ...chromedp.ContextOption) (context.Context, context.CancelFunc, *Tab) {
	var t *Tab
	ctx, cancel := chromedp.NewContext(parent, append(copts, chromedp.WithListener(func(ev any) { t.onEvent(ev) }))...)
	t = New(ctx, opts)
	t.early = true
	return ctx, cancel, t
}

// Context returns the chromedp context of the tab.
func (t *Tab) Context() context.Context { return t.ctx }

// Closed reports whether the tab is gone for good: its chromedp context
// ended, the browser detached its target (the page called window.close(),
// or something else closed it) or its renderer crashed. Every tool call on
// a closed tab fails with NOT_FOUND, so the session layer should drop it
// (and cancel its context). Closed can run on any goroutine.
func (t *Tab) Closed() bool {
	if t.ctx.Err() != nil || t.gone.Err() != nil {
		return true
	}
	ch, err := chromedp.Detached(t.ctx)
	if err != nil {
		// Not a chromedp context, or no target yet: nothing detached.
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closedError is the error of a tool called on a closed tab. It is
// NOT_FOUND, not SESSION_LOST: the other tabs of the session (and its
// browser) still work.
func closedError(tool string) error {
	return bus.Errorf(commonv1.ErrorCode_NOT_FOUND,
		"%s: this tab was closed (by the page, or its renderer crashed); use tab_list and tab_switch to pick another tab, or tab_new", tool)
}

// URL returns the address of the page in the tab (for tab_list).
func (t *Tab) URL(ctx context.Context) (string, error) {
	if t.Closed() {
		return "", closedError("get_url")
	}
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return "", t.fail(ctx, rctx, "get_url", err)
	}
	u, err := t.currentURL(rctx)
	if err != nil {
		return "", t.fail(ctx, rctx, "get_url", err)
	}
	return u, nil
}

// Title returns the title of the page in the tab (for tab_list).
func (t *Tab) Title(ctx context.Context) (string, error) {
	if t.Closed() {
		return "", closedError("get_title")
	}
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return "", t.fail(ctx, rctx, "get_title", err)
	}
	if t.dialogs.open() != nil {
		// The page is frozen; the browser knows the title.
		return t.targetTitle(rctx), nil
	}
	s, err := t.title(rctx)
	if err != nil {
		return "", t.fail(ctx, rctx, "get_title", err)
	}
	return s, nil
}

// releaseEvery is how many tool calls may leave remote objects behind
// before they are released together.
const releaseEvery = 16

// Do runs one page-scoped tool. ctx is the request context: every browser
// call ends at its deadline or cancellation. Failures are *bus.Error values
// whose messages say what was wrong and what to do about it.
func (t *Tab) Do(ctx context.Context, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	return t.do(ctx, req, nil)
}

// Upload runs upload_file (req) with the files of req already written to
// paths, one per file, in order (the session writes them; see files.go).
func (t *Tab) Upload(ctx context.Context, req *browserv1.ToolRequest, paths []string) (*browserv1.ToolResult, error) {
	return t.do(ctx, req, paths)
}

// do runs one tool; files are the paths of upload_file's files.
func (t *Tab) do(ctx context.Context, req *browserv1.ToolRequest, files []string) (*browserv1.ToolResult, error) {
	tool, ok := catalog.ForRequest(req)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the request names no tool")
	}
	run, ok := handlers[tool.Name]
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"%s is a session tool: the browser session handles it, not a single tab", tool.Name)
	}
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s: the tab was busy with another tool until the request deadline", tool.Name)
	}
	if t.Closed() {
		return nil, closedError(tool.Name)
	}
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return nil, t.fail(ctx, rctx, tool.Name, err)
	}
	if d := t.dialogs.open(); d != nil && !tool.WithDialog {
		return nil, dialogError(tool.Name, d)
	}
	t.madeObjects = false
	if e := t.emuLater; e != nil && t.dialogs.open() == nil {
		if err := applyEmulation(rctx, *e); err == nil {
			t.emu, t.emuLater = *e, nil
		}
	}
	t.beginCall(req)
	t.call.files = files
	t.call.secretInput = secretInput(ctx)
	navigates, acts := tool.Navigates.Of(req), tool.Acts.Of(req)
	dctx, stopDialogs := t.dialogs.watch(rctx, navigates)
	defer stopDialogs()
	res, err := t.dispatch(dctx, tool.Name, navigates, run, req)
	if t.dialogs.open() != nil {
		// The page is frozen: no snapshot, no release of objects.
		if errors.Is(context.Cause(dctx), errDialogOpened) && (err != nil || res == nil) {
			res, err = t.interrupted(tool.Name), nil
		}
		t.madeObjects = false
	} else if err == nil && acts && req.GetSnapshotAfter() != browserv1.SnapshotAfter_SNAPSHOT_AFTER_NONE {
		err = t.snapshotAfter(rctx, req.GetSnapshotAfter(), res)
	}
	if t.madeObjects {
		// Release in batches: a round trip per tool call costs more than
		// holding a few element handles for a while (a navigation frees
		// them anyway).
		if t.unreleased++; t.unreleased >= releaseEvery || err != nil {
			releaseObjects(rctx)
			t.unreleased = 0
		}
	}
	if err != nil {
		return nil, t.fail(ctx, rctx, tool.Name, err)
	}
	if t.dialogs.open() == nil {
		t.call.choosers = t.chooserNotes(rctx)
	}
	dialogs := t.dialogs.take()
	if acts {
		t.report(navigates, res, dialogs)
	} else if len(dialogs) > 0 {
		appendText(res, strings.Join(dialogs, "\n"))
	}
	return res, nil
}

// dispatch runs the tool of req with its handler; a tool that navigates
// answers a dialog in its way first.
func (t *Tab) dispatch(ctx context.Context, tool string, navigates bool, run handler, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	if navigates {
		if err := t.dialogs.leave(ctx, tool); err != nil {
			return nil, err
		}
	}
	return run(t, ctx, req)
}

// A handler runs one tool in a tab, reading its own message of req.
// Each domain file registers its tools' handlers in a table of its own
// (navHandlers in nav.go, …); handlers joins them.
type handler func(t *Tab, ctx context.Context, req *browserv1.ToolRequest) (*browserv1.ToolResult, error)

// handlers are the tab's tools by catalog name. The session tools
// (catalog.OnSession) that act in a tab are here too: the session runs
// them through Do (resize, emulate) or Upload (upload_file, drop).
var handlers = catalog.Join(navHandlers, readingHandlers, inputHandlers, formHandlers, devtoolsHandlers, perfHandlers,
	emulateHandlers, filesHandlers, dialogHandlers)

// Handles reports whether the tab has a handler for the tool called name
// (for the worker's test that every tool has one).
func Handles(name string) bool {
	_, ok := handlers[name]
	return ok
}

// on makes a handler of a tool method that takes the tool's own message,
// which msg reads from the request.
func on[M any](msg func(*browserv1.ToolRequest) M, run func(*Tab, context.Context, M) (*browserv1.ToolResult, error)) handler {
	return func(t *Tab, ctx context.Context, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return run(t, ctx, msg(req))
	}
}

// noArgs makes a handler of a tool method that takes no arguments.
func noArgs(run func(*Tab, context.Context) (*browserv1.ToolResult, error)) handler {
	return func(t *Tab, ctx context.Context, _ *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return run(t, ctx)
	}
}

// runCtx returns a context for browser calls: derived from the tab context
// (chromedp needs it) and ending when ctx ends, at ctx's deadline
// (DefaultTimeout when it has none) or when the tab's target goes away.
func (t *Tab) runCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultTimeout)
	}
	rctx, cancel := context.WithDeadline(t.ctx, dl)
	// The tool's span, so that the page's spans are its children.
	rctx = trace.ContextWithSpan(rctx, trace.SpanFromContext(ctx))
	stop := context.AfterFunc(ctx, cancel)
	stopGone := context.AfterFunc(t.gone, cancel)
	return rctx, func() {
		stop()
		stopGone()
		cancel()
	}
}

// init attaches to the tab (once) and sets up what every tool needs: the
// event listener that tracks frames and isolated worlds, the dialog
// handler and focus emulation, so that focus and key events work in a tab
// that is not in front.
//
// When a step fails, the next tool call runs init again. Each step is safe
// to repeat except the registration of the listener and the start of the
// dialog and detach goroutines, which live as long as the tab context: a
// second listener would see every event twice and a second dialog
// goroutine would answer every dialog twice. So they are set up once
// (t.listening), and only the steps after them are retried.
func (t *Tab) init(ctx context.Context) (err error) {
	t.initMu.Lock()
	defer t.initMu.Unlock()
	if t.inited {
		return nil
	}
	ctx, span := startSpan(ctx, spanAttach)
	defer func() { endSpan(span, err) }()
	if err := t.attach(ctx); err != nil {
		return err
	}
	if !t.listening {
		if !t.early {
			if err := chromedp.Listen(t.ctx, t.onEvent); err != nil {
				return fmt.Errorf("listen to the tab: %w", err)
			}
		}
		if detached, err := chromedp.Detached(t.ctx); err == nil {
			go func() {
				select {
				case <-detached:
					t.markGone()
				case <-t.ctx.Done():
				}
			}()
		}
		t.listening = true
	}
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		return fmt.Errorf("enable focus emulation: %w", err)
	}
	// A file chooser becomes an event (files.go), not a dialog nobody sees.
	if _, err := chromedp.Call(ctx, page.SetInterceptFileChooserDialog, page.SetInterceptFileChooserDialogParams{Enabled: true}); err != nil {
		return fmt.Errorf("intercept file choosers: %w", err)
	}
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return fmt.Errorf("read the frame tree: %w", err)
	}
	t.frames.setMain(tree.FrameTree.Frame.ID)
	t.inited = true
	t.ready.Store(true)
	return nil
}

// attach makes sure that the tab context has its target. The first run of
// a chromedp context binds the target to the context it runs with, so it
// runs with the tab context, while the caller waits no longer than ctx.
func (t *Tab) attach(ctx context.Context) error {
	c := chromedp.FromContext(t.ctx)
	if c == nil {
		return errors.New("the tab context is not a chromedp context")
	}
	if c.Target != nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(t.ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail turns err into a *bus.Error for the model: errors that already are
// one pass through, a closed tab becomes NOT_FOUND (see closedError), a
// deadline TIMEOUT and anything else INTERNAL.
//
// This package never says SESSION_LOST: a closed tab leaves the session
// and its other tabs working, and only the worker knows that the whole
// Chromium died.
func (t *Tab) fail(ctx, rctx context.Context, tool string, err error) error {
	var be *bus.Error
	if errors.As(err, &be) {
		return err
	}
	switch {
	case t.Closed() || errors.Is(err, chromedp.ErrTargetDetached):
		// First: whatever else went wrong, calling again cannot help.
		return closedError(tool)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(rctx.Err(), context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s did not finish before the request deadline; the page may be busy or still loading", tool)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s was canceled by the caller", tool)
	case errors.Is(err, errNavigated) || contextGone(err):
		return bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED,
			"the page navigated while %s ran (it kept loading new documents); call it again, or wait until the page stops reloading", tool)
	}
	return bus.Errorf(commonv1.ErrorCode_INTERNAL, "%s: %s", tool, clipText(err.Error()))
}

// textContent returns a text content part.
func textContent(s string) *browserv1.Content {
	return &browserv1.Content{Part: &browserv1.Content_Text{Text: s}}
}

// textResult returns a result with one text part.
func textResult(format string, args ...any) *browserv1.ToolResult {
	return &browserv1.ToolResult{Content: []*browserv1.Content{textContent(fmt.Sprintf(format, args...))}}
}
