package browser

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/guard"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

var tracer = otel.Tracer("github.com/sovereign-fleet/sovereign/services/browser")

// session is one isolated browser context (own cookies and storage) and its
// tabs. Calls on a session run one at a time.
type session struct {
	id      string
	owner   string
	browser context.Context // the chromedp browser context it was opened on
	lock    chan struct{}   // one call at a time; a channel so waiting honours deadlines

	// ctx ends when the session closes; every tab's context ends with it,
	// so closing aborts a running call instead of waiting for it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards lastUsed and busy
	lastUsed time.Time
	busy     int

	// Owned by the holder of lock.
	bcid   cdp.BrowserContextID
	tabs   []*tab
	active int

	// URL policy (policy.go). guard is the worker's guard of the Chromium
	// the session lives in; pol is nil while the session has no enforced
	// policy, and then nothing is intercepted. policy is the policy in
	// force as the gateway sent it. Owned by the holder of lock.
	guard  *guard.Guard
	pol    *guard.Context
	policy *browserv1.UrlPolicy

	// Nostr identity (nostr.go): the logged-in pubkey, "" if none, and
	// window.nostr's bridge (nil until the first identity). Owned by the
	// holder of lock. bus (the signer's) and log are set by the worker.
	pubkey string
	nostr  *nostrBridge
	bus    *bus.Conn
	log    *slog.Logger

	// Base profile (profile.go): own is the Chromium of its own that a
	// session opened on a base profile runs in (nil for a session of the
	// worker's shared Chromium), profile the profile's name.
	own     *ownChrome
	profile string

	// emu is how the session's tabs present themselves (emulate.go).
	// Owned by the holder of lock.
	emu page.Emulation
	// dialogs is how the session's tabs answer dialogs (page/dialog.go).
	dialogs dialogMode
	// Files (files.go): the limits of upload_file, set by the worker, and
	// the session's temporary directory ("" until used). Owned by the
	// holder of lock.
	limits   FileLimits
	fileRoot string // where dir is made: the worker's files/ ("": the temp dir)
	dir      string
	// Downloads (downloads.go): what the session knows of them, their
	// limits and the fleet's object store (nil: the worker's disk only),
	// set by the worker.
	dl       downloads
	dlLimits DownloadLimits
	dlStore  jetstream.ObjectStore
}

// dialogMode is a session's dialog mode: the one a call set (open's or
// tab_new's dialogs argument), else the gateway's default of the latest
// call. The tabs read it when a dialog opens, on their event loops.
type dialogMode struct {
	mu       sync.Mutex
	set, def browserv1.DialogMode
}

// note takes the modes of req.
func (d *dialogMode) note(req *browserv1.ToolRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := req.GetDialogs(); m != browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
		d.set = m
	}
	if m := req.GetDefaultDialogs(); m != browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
		d.def = m
	}
}

// mode is the mode in force (unspecified: the page package's default, ask).
func (d *dialogMode) mode() browserv1.DialogMode {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.set != browserv1.DialogMode_DIALOG_MODE_UNSPECIFIED {
		return d.set
	}
	return d.def
}

type tab struct {
	id     target.ID
	ctx    context.Context
	cancel context.CancelFunc
	page   *page.Tab
}

func newSession(id, owner string, browser context.Context, g *guard.Guard) *session {
	ctx, cancel := context.WithCancel(context.Background())
	// busy until started: the idle reaper must not close a session that is
	// still opening.
	return &session{id: id, owner: owner, browser: browser, guard: g, lock: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, lastUsed: time.Now(), busy: 1}
}

// start creates the browser context and its first tab, with the URL
// policy p in force before the tab loads anything.
func (s *session) start(ctx context.Context, opts page.Options, p *browserv1.UrlPolicy) error {
	params, err := s.prepareGuard(p)
	if err != nil {
		return err
	}
	cctx, cancel := within(s.browser, ctx)
	defer cancel()
	res, err := chromedp.CallBrowser(cctx, target.CreateBrowserContext, params)
	if err != nil {
		return fmt.Errorf("create browser context: %w", err)
	}
	s.bcid = res.BrowserContextID
	if s.pol != nil {
		if err := s.guard.Protect(ctx, s.bcid, s.pol); err != nil {
			s.dispose()
			return fmt.Errorf("put the url policy in force: %w", err)
		}
	}
	t, err := s.newTab(ctx, "", opts)
	if err != nil {
		s.dispose()
		return err
	}
	s.tabs, s.active = []*tab{t}, 0
	return nil
}

// newTab opens a blank tab in the session's browser context, or attaches to
// an existing target when id is set.
func (s *session) newTab(ctx context.Context, id target.ID, opts page.Options) (*tab, error) {
	var copts []chromedp.ContextOption
	switch {
	case id != "":
		copts = append(copts, chromedp.WithTargetID(id))
	case s.own != nil:
		// The default browser context of its own Chromium: the profile's.
	default:
		copts = append(copts, chromedp.WithExistingBrowserContext(s.bcid))
	}
	// The tab listens from the target's first message: a popup may open
	// a dialog while it is attached (page.NewContext).
	opts.Dialogs = s.dialogs.mode
	tctx, cancel, pt := page.NewContext(s.browser, opts, copts...)
	// The first Do creates (or attaches to) the target. It must run on the
	// tab context itself, whose life is the tab's; the request deadline is
	// enforced by abandoning the wait.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(tctx) }()
	select {
	case err := <-done:
		if err != nil {
			cancel()
			return nil, fmt.Errorf("open tab: %w", err)
		}
	case <-ctx.Done():
		cancel()
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "opening a tab did not finish before the deadline")
	}
	context.AfterFunc(s.ctx, cancel)
	t := &tab{id: chromedp.FromContext(tctx).Target.TargetID, ctx: tctx, cancel: cancel, page: pt}
	t.page.SetBlocked(s.blockedList)
	if err := s.emulateNew(ctx, t); err != nil {
		cancel()
		return nil, err
	}
	return t, nil
}

func (s *session) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "browser session %s stayed busy with an earlier call until the deadline", s.id)
	}
	s.mu.Lock()
	s.busy++
	s.lastUsed = time.Now()
	s.mu.Unlock()
	return nil
}

func (s *session) release() {
	s.mu.Lock()
	s.busy--
	s.lastUsed = time.Now()
	s.mu.Unlock()
	<-s.lock
}

// idleSince is when the last call ended; a busy session is never idle.
func (s *session) idleSince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 {
		return time.Now()
	}
	return s.lastUsed
}

// A sessionTool is the handler of a tool that the browser session runs
// (catalog.OnSession). Each file registers its tools in a table of its own
// (tabTools below, emulateTools in emulate.go, …); sessionTools joins them.
type sessionTool struct {
	// run runs the tool, reading its own message of req; the caller holds
	// the session's lock.
	run func(s *session, ctx context.Context, req *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error)
	// afterTabGone tools run when the active tab has just gone away (the
	// page closed it, or it crashed): they do not act on it. Any other
	// call fails then, saying so.
	afterTabGone bool
}

// sessionTools are the session's tools by catalog name.
var sessionTools = catalog.Join(tabTools, policyTools, emulateTools, fileTools, downloadTools, identityTools)

// tabTools open, list, switch and close the session's tabs.
var tabTools = map[string]sessionTool{
	"close": {run: func(s *session, ctx context.Context, _ *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
		return s.closeTab(ctx, s.active, opts)
	}},
	"tab_close": {run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
		i := s.active
		if r.GetTabClose().GetHasIndex() {
			i = int(r.GetTabClose().GetIndex())
		}
		return s.closeTab(ctx, i, opts)
	}},
	"tab_list": {afterTabGone: true, run: func(s *session, ctx context.Context, _ *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
		return s.tabList(ctx, opts)
	}},
	"tab_switch": {afterTabGone: true, run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
		return s.tabSwitch(ctx, int(r.GetTabSwitch().GetIndex()), opts)
	}},
	"tab_new": {afterTabGone: true, run: (*session).tabNew},
}

// do runs one tool; the caller holds the lock.
func (s *session) do(ctx context.Context, req *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
	tool, ok := catalog.ForRequest(req)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the request names no tool")
	}
	ctx, span := tracer.Start(ctx, "browser."+tool.Name)
	defer span.End()
	span.SetAttributes(attribute.String("sovereign.session", s.id))
	s.dialogs.note(req)
	if err := s.applyPolicy(ctx, req.GetPolicy()); err != nil {
		return nil, err
	}
	st, onSession := sessionTools[tool.Name]
	if gone := s.prune(ctx, opts); gone != "" && !st.afterTabGone {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s; tab %d is active now: take a snapshot before acting on it", gone, s.active)
	}
	if onSession {
		return st.run(s, ctx, req, opts)
	}
	active := s.tabs[s.active]
	mark := s.navMark(active.id)
	start := time.Now()
	res, err := active.page.Do(ctx, req)
	if err != nil && req.GetOpen() != nil && s.downloadBegan(ctx, start) {
		// The navigation became a download (Chromium aborts it).
		res, err = result(fmt.Sprintf("%s is a download, not a page; the tab stays where it was", req.GetOpen().GetUrl()), nil)
	}
	if err != nil && req.GetOpen() != nil && active.page.DialogLoop() {
		// The page keeps opening dialogs and cannot be left: open the
		// address in a new tab in its place.
		var nt *tab
		if nt, err = s.replaceTab(ctx, opts); err == nil {
			active, mark = nt, s.navMark(nt.id)
			if res, err = active.page.Do(ctx, req); err == nil {
				page.AppendText(res, "- the old page kept opening dialogs, so its tab was closed and this one opened in its place (its history is gone)")
			}
		}
	}
	if tool.CanNavigate(req) {
		if blocked := s.navBlocked(active.id, mark); blocked != nil {
			if req.GetPerformanceStart() != nil {
				active.page.DropRecording(ctx)
			}
			return nil, blocked
		}
	}
	if err == nil {
		s.noteOpenedTabs(ctx, active, res, opts)
		s.collectDownloads(ctx, start, res, s.dlStore) // downloads.go; after the new tabs, which may have begun one
		s.noteClosedTabs(ctx, active, res, opts)
	}
	if err != nil && s.tabs[s.active].page.Closed() {
		// The tab went away during the call: drop it now, so that this
		// error is the only one the caller sees about it.
		if gone := s.prune(ctx, opts); gone != "" {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s; tab %d is active now: take a snapshot before acting on it", gone, s.active)
		}
	}
	return res, err
}

// replaceTab closes the active tab and puts a new blank tab in its place.
func (s *session) replaceTab(ctx context.Context, opts page.Options) (*tab, error) {
	t, err := s.newTab(ctx, "", opts)
	if err != nil {
		return nil, err
	}
	s.tabs[s.active].cancel()
	s.tabs[s.active] = t
	return t, nil
}

// prune drops tabs that closed themselves (window.close) or whose renderer
// crashed. When the active tab was among them it says so (the caller's
// next action would otherwise land on another page unannounced), and the
// last remaining tab becomes active; a session left with none gets a blank
// tab.
func (s *session) prune(ctx context.Context, opts page.Options) (activeGone string) {
	live := s.tabs[:0]
	for i, t := range s.tabs {
		if !t.page.Closed() {
			live = append(live, t)
			continue
		}
		t.cancel()
		if i == s.active {
			activeGone = fmt.Sprintf("the active tab (%d) was closed by the page or crashed", i)
		}
	}
	n := len(s.tabs) - len(live)
	s.tabs = live
	if n == 0 {
		return ""
	}
	if len(s.tabs) == 0 {
		if t, err := s.newTab(ctx, "", opts); err == nil {
			s.tabs = []*tab{t}
		}
	}
	if activeGone != "" || s.active >= len(s.tabs) {
		s.active = max(len(s.tabs)-1, 0)
	}
	return activeGone
}

// adopt attaches tabs the page opened itself (window.open, target=_blank),
// so that tab_list shows them and tab_switch reaches them.
func (s *session) adopt(ctx context.Context, opts page.Options) {
	cctx, cancel := within(s.tabs[s.active].ctx, ctx)
	defer cancel()
	infos, err := chromedp.Targets(cctx)
	if err != nil {
		return
	}
	known := make(map[target.ID]bool, len(s.tabs))
	for _, t := range s.tabs {
		known[t.id] = true
	}
	for _, info := range infos {
		if info.Type != "page" || info.BrowserContextID != s.bcid || known[info.TargetID] {
			continue
		}
		if t, err := s.newTab(ctx, info.TargetID, opts); err == nil {
			s.tabs = append(s.tabs, t)
		}
	}
}

type tabInfo struct {
	Index  int    `json:"index"`
	URL    string `json:"url"`
	Title  string `json:"title"`
	Active bool   `json:"active"`
}

func (s *session) tabList(ctx context.Context, opts page.Options) (*browserv1.ToolResult, error) {
	s.adopt(ctx, opts)
	infos := make([]tabInfo, 0, len(s.tabs))
	var b strings.Builder
	for i, t := range s.tabs {
		url, _ := t.page.URL(ctx)
		title, _ := t.page.Title(ctx)
		// A page controls its title and address: cut them to a sane
		// length (page.ClipTab says so in the text).
		url, title = page.ClipTab(url, title)
		infos = append(infos, tabInfo{Index: i, URL: url, Title: title, Active: i == s.active})
		mark := " "
		if i == s.active {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s %d: %q %s\n", mark, i, title, url)
	}
	out := map[string]any{"tabs": infos, "active": s.active}
	if !s.emu.IsZero() {
		fmt.Fprintf(&b, "emulation: %s\n", s.emu.Summary())
		out["emulation"] = s.emu.Shown()
	}
	return result(strings.TrimRight(b.String(), "\n"), out)
}

func (s *session) tabNew(ctx context.Context, req *browserv1.ToolRequest, opts page.Options) (*browserv1.ToolResult, error) {
	url := req.GetTabNew().GetUrl()
	t, err := s.newTab(ctx, "", opts)
	if err != nil {
		return nil, err
	}
	var res *browserv1.ToolResult
	if url != "" {
		mark := s.navMark(t.id)
		// The open settles and reports as open does, with the call's
		// settle budget, snapshot and cap.
		res, err = t.page.Do(ctx, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: url}},
			SettleMs: req.SettleMs, SnapshotAfter: req.GetSnapshotAfter(), MaxChars: req.GetMaxChars()})
		if blocked := s.navBlocked(t.id, mark); blocked != nil {
			err = blocked
		}
		if err != nil {
			// Leave the session as it was: the model believes it is still
			// on its old tab.
			t.cancel()
			return nil, err
		}
	}
	s.tabs = append(s.tabs, t)
	s.active = len(s.tabs) - 1
	msg := fmt.Sprintf("Opened tab %d (now active)", s.active)
	out, err := result(msg, map[string]any{"index": s.active, "tabs": len(s.tabs)})
	if err != nil || res == nil {
		return out, err
	}
	// The open's result (where the tab is, what changed, a snapshot) after
	// the tab's index, with its structured facts.
	if c := res.GetContent(); len(c) > 0 {
		if tc, ok := c[0].GetPart().(*browserv1.Content_Text); ok {
			tc.Text = msg + ". " + tc.Text
		}
		out.Content = c
	}
	out.Structured = structured.Merge(out.Structured, res.Structured)
	return out, nil
}

// noteOpenedTabs adopts the tabs that the page of tab t opened during the
// call (window.open, target=_blank) and says in res which index each got.
func (s *session) noteOpenedTabs(ctx context.Context, t *tab, res *browserv1.ToolResult, opts page.Options) {
	opened := len(t.page.Opened())
	if opened == 0 {
		return
	}
	before := len(s.tabs)
	// The new target may come a moment after the page asked for it.
	for try := 0; try < 10 && len(s.tabs)-before < opened && ctx.Err() == nil; try++ {
		if try > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		s.adopt(ctx, opts)
	}
	for i := before; i < len(s.tabs); i++ {
		u, _ := s.tabs[i].page.URL(ctx)
		u, _ = page.ClipTab(u, "")
		page.AppendText(res, fmt.Sprintf("- new tab %d: %s (tab_switch %d to use it)", i, u, i))
	}
}

// noteClosedTabs drops the other tabs that closed during the call (a page
// called window.close(), or closed a popup it opened) and says so in res,
// with the active tab's new index when it moved.
func (s *session) noteClosedTabs(ctx context.Context, active *tab, res *browserv1.ToolResult, opts page.Options) {
	var gone []string
	for i, t := range s.tabs {
		if t != active && t.page.Closed() {
			gone = append(gone, strconv.Itoa(i))
		}
	}
	if len(gone) == 0 {
		return
	}
	s.prune(ctx, opts)
	line := fmt.Sprintf("- the page closed tab %s", strings.Join(gone, ", "))
	if i := slices.Index(s.tabs, active); i >= 0 {
		line += fmt.Sprintf("; this tab is tab %d now", i)
		s.active = i
	}
	page.AppendText(res, line+" (tab_list shows the tabs)")
}

func (s *session) tabSwitch(ctx context.Context, i int, opts page.Options) (*browserv1.ToolResult, error) {
	if i < 0 || i >= len(s.tabs) {
		s.adopt(ctx, opts) // it may be a tab the page opened
	}
	if i < 0 || i >= len(s.tabs) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "there is no tab %d; the session has tabs 0 to %d (tab_list shows them)", i, len(s.tabs)-1)
	}
	s.active = i
	cctx, cancel := within(s.tabs[i].ctx, ctx)
	defer cancel()
	_, _ = chromedp.CallBrowser(cctx, target.ActivateTarget, target.ActivateTargetParams{TargetID: s.tabs[i].id})
	url, _ := s.tabs[i].page.URL(ctx)
	return result(fmt.Sprintf("Switched to tab %d: %s", i, url), map[string]any{"index": i, "url": url})
}

// closeTab closes tab i. A session always keeps one tab: closing the last
// one opens a blank tab in its place.
func (s *session) closeTab(ctx context.Context, i int, opts page.Options) (*browserv1.ToolResult, error) {
	if i < 0 || i >= len(s.tabs) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "there is no tab %d; the session has tabs 0 to %d (tab_list shows them)", i, len(s.tabs)-1)
	}
	msg := fmt.Sprintf("Closed tab %d", i)
	if len(s.tabs) == 1 {
		// Open the replacement first: a session never has no tab, even
		// when opening one fails.
		t, err := s.newTab(ctx, "", opts)
		if err != nil {
			return nil, err
		}
		s.tabs = append(s.tabs, t)
		msg += "; it was the last one, so a blank tab replaces it"
	}
	s.tabs[i].cancel()
	s.tabs = append(s.tabs[:i], s.tabs[i+1:]...)
	if s.active >= i && s.active > 0 {
		s.active--
	}
	msg += fmt.Sprintf(". Active tab: %d of %d", s.active, len(s.tabs))
	return result(msg, map[string]any{"active": s.active, "tabs": len(s.tabs)})
}

// closeTabs closes every tab and disposes of the browser context. Ending
// the session's context first aborts a running call (its tab contexts end),
// so waiting for the lock afterwards is short, and the tabs are never
// changed under a running call.
func (s *session) closeTabs() {
	s.cancel()
	s.lock <- struct{}{}
	defer func() { <-s.lock }()
	for _, t := range s.tabs {
		t.cancel()
	}
	s.tabs = nil
	s.closeGuard()
	s.closeNostr()
	s.dispose()
	s.removeDownloads(s.dlStore) // downloads.go
	s.removeFiles()              // files.go
}

func (s *session) dispose() {
	if s.own != nil {
		s.own.close() // its Chromium and the profile copy (profile.go)
		return
	}
	if s.bcid == "" || s.browser.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.browser, 5*time.Second)
	defer cancel()
	_, _ = chromedp.CallBrowser(ctx, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: s.bcid})
}

// within derives a context from base (a chromedp context) that also ends
// when req ends, so a CDP call honours the request's deadline.
func within(base, req context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(base)
	if d, ok := req.Deadline(); ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, d)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	stop := context.AfterFunc(req, cancel)
	return ctx, func() { stop(); cancel() }
}

func result(text string, facts any) (*browserv1.ToolResult, error) {
	res := &browserv1.ToolResult{Content: []*browserv1.Content{{Part: &browserv1.Content_Text{Text: text}}}}
	if facts != nil {
		s, err := structured.Object(facts)
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode result: %v", err)
		}
		res.Structured = s
	}
	return res, nil
}
