package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
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
}

// Tab runs page-scoped tools in one browser tab. Its methods are safe for
// concurrent use; Do runs one tool at a time.
type Tab struct {
	ctx     context.Context
	allowed map[string]bool
	// sem serializes Do: the actions of one tab must not interleave.
	sem chan struct{}

	initMu sync.Mutex
	inited bool

	// madeObjects says that the running tool made remote objects in
	// objectGroup, which Do releases. Only the holder of sem uses it.
	madeObjects bool
	// unreleased counts tool calls whose objects are not released yet.
	unreleased int

	// mu guards the fields below, which the event listener also writes.
	mu        sync.Mutex
	mainFrame cdp.FrameID
	frames    frameTable
	worlds    worldTable
	dialogs   []string
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
	return &Tab{
		ctx:     tabCtx,
		allowed: allowed,
		sem:     make(chan struct{}, 1),
		frames:  newFrameTable(),
		worlds:  newWorldTable(),
	}
}

// Context returns the chromedp context of the tab.
func (t *Tab) Context() context.Context { return t.ctx }

// URL returns the address of the page in the tab (for tab_list).
func (t *Tab) URL(ctx context.Context) (string, error) {
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
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return "", t.fail(ctx, rctx, "get_title", err)
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
	if req == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the request names no tool")
	}
	tool := toolName(req)
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s: the tab was busy with another tool until the request deadline", tool)
	}
	rctx, cancel := t.runCtx(ctx)
	defer cancel()
	if err := t.init(rctx); err != nil {
		return nil, t.fail(ctx, rctx, tool, err)
	}
	t.madeObjects = false
	res, err := t.dispatch(rctx, req)
	if t.madeObjects {
		// Release in batches: a round trip per tool call costs more than
		// holding a few element handles for a while (a navigation frees
		// them anyway).
		if t.unreleased++; t.unreleased >= releaseEvery || err != nil {
			t.releaseObjects(rctx)
			t.unreleased = 0
		}
	}
	if err != nil {
		return nil, t.fail(ctx, rctx, tool, err)
	}
	t.noteDialogs(res)
	return res, nil
}

// dispatch runs the tool of req.
func (t *Tab) dispatch(ctx context.Context, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	switch x := req.GetTool().(type) {
	case *browserv1.ToolRequest_Open:
		return t.open(ctx, x.Open.GetUrl())
	case *browserv1.ToolRequest_Back:
		return t.history(ctx, -1)
	case *browserv1.ToolRequest_Forward:
		return t.history(ctx, +1)
	case *browserv1.ToolRequest_Reload:
		return t.reload(ctx)
	case *browserv1.ToolRequest_GetUrl:
		return t.getURL(ctx)
	case *browserv1.ToolRequest_GetTitle:
		return t.getTitle(ctx)
	case *browserv1.ToolRequest_Snapshot:
		return t.snapshot(ctx, x.Snapshot.GetInteractive(), x.Snapshot.GetCompact())
	case *browserv1.ToolRequest_GetText:
		return t.getText(ctx, x.GetText)
	case *browserv1.ToolRequest_GetHtml:
		return t.getHTML(ctx, x.GetHtml)
	case *browserv1.ToolRequest_GetAttr:
		return t.getAttr(ctx, x.GetAttr.GetElement(), x.GetAttr.GetAttr())
	case *browserv1.ToolRequest_Eval:
		return t.eval(ctx, x.Eval.GetScript())
	case *browserv1.ToolRequest_Click:
		return t.click(ctx, x.Click)
	case *browserv1.ToolRequest_Fill:
		return t.fill(ctx, x.Fill.GetElement(), x.Fill.GetValue())
	case *browserv1.ToolRequest_Type:
		return t.typeText(ctx, x.Type.GetElement(), x.Type.GetValue())
	case *browserv1.ToolRequest_Press:
		return t.press(ctx, x.Press.GetKey())
	case *browserv1.ToolRequest_Scroll:
		return t.scroll(ctx, x.Scroll.GetDirection(), x.Scroll.GetAmount())
	case *browserv1.ToolRequest_Hover:
		return t.hover(ctx, x.Hover)
	case *browserv1.ToolRequest_Focus:
		return t.focus(ctx, x.Focus)
	case *browserv1.ToolRequest_Wait:
		return t.wait(ctx, x.Wait.GetMs())
	case *browserv1.ToolRequest_WaitFor:
		return t.waitFor(ctx, x.WaitFor.GetSelector(), x.WaitFor.GetTimeoutMs())
	case *browserv1.ToolRequest_Screenshot:
		return t.screenshot(ctx, x.Screenshot)
	case *browserv1.ToolRequest_Close, *browserv1.ToolRequest_TabList, *browserv1.ToolRequest_TabNew,
		*browserv1.ToolRequest_TabSwitch, *browserv1.ToolRequest_TabClose:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"%s is a session tool: the browser session handles it, not a single tab", toolName(req))
	case nil:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the request names no tool")
	default:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "tool %s is not supported by this worker", toolName(req))
	}
}

// toolName returns the name of the tool in req, as the catalog spells it.
func toolName(req *browserv1.ToolRequest) string {
	m := req.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("tool")); fd != nil {
		return string(fd.Name())
	}
	return "tool"
}

// runCtx returns a context for browser calls: derived from the tab context
// (chromedp needs it) and ending when ctx ends or at ctx's deadline
// (DefaultTimeout when it has none).
func (t *Tab) runCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultTimeout)
	}
	rctx, cancel := context.WithDeadline(t.ctx, dl)
	stop := context.AfterFunc(ctx, cancel)
	return rctx, func() {
		stop()
		cancel()
	}
}

// init attaches to the tab (once) and sets up what every tool needs: the
// event listener that tracks frames and isolated worlds, the dialog
// handler and focus emulation, so that focus and key events work in a tab
// that is not in front.
func (t *Tab) init(ctx context.Context) error {
	t.initMu.Lock()
	defer t.initMu.Unlock()
	if t.inited {
		return nil
	}
	if err := t.attach(ctx); err != nil {
		return err
	}
	if err := chromedp.Listen(t.ctx, t.onEvent); err != nil {
		return fmt.Errorf("listen to the tab: %w", err)
	}
	go t.acceptDialogs(chromedp.Events(t.ctx, page.JavascriptDialogOpening))
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		return fmt.Errorf("enable focus emulation: %w", err)
	}
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return fmt.Errorf("read the frame tree: %w", err)
	}
	t.setMainFrame(tree.FrameTree.Frame.ID)
	t.inited = true
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
// one pass through, a deadline becomes TIMEOUT, a closed tab SESSION_LOST
// and anything else INTERNAL.
func (t *Tab) fail(ctx, rctx context.Context, tool string, err error) error {
	var be *bus.Error
	if errors.As(err, &be) {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(rctx.Err(), context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s did not finish before the request deadline; the page may be busy or still loading", tool)
	case t.ctx.Err() != nil || errors.Is(err, chromedp.ErrTargetDetached):
		return bus.Errorf(commonv1.ErrorCode_SESSION_LOST, "%s: the tab is closed or its browser exited; open a new tab", tool)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s was canceled by the caller", tool)
	}
	return bus.Errorf(commonv1.ErrorCode_INTERNAL, "%s: %v", tool, err)
}

// noteDialogs appends the dialogs that were accepted during the tool to the
// text of res, so the model knows they happened.
func (t *Tab) noteDialogs(res *browserv1.ToolResult) {
	t.mu.Lock()
	d := t.dialogs
	t.dialogs = nil
	t.mu.Unlock()
	if len(d) == 0 {
		return
	}
	note := strings.Join(d, "\n")
	for _, c := range res.Content {
		if tc, ok := c.Part.(*browserv1.Content_Text); ok {
			tc.Text += "\n" + note
			return
		}
	}
	res.Content = append(res.Content, textContent(note))
}

// marshal returns the JSON encoding of v, without escaping <, > and &
// (the JSON is for models and programs, not for HTML).
func marshal(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// textContent returns a text content part.
func textContent(s string) *browserv1.Content {
	return &browserv1.Content{Part: &browserv1.Content_Text{Text: s}}
}

// textResult returns a result with one text part.
func textResult(format string, args ...any) *browserv1.ToolResult {
	return &browserv1.ToolResult{Content: []*browserv1.Content{textContent(fmt.Sprintf(format, args...))}}
}
