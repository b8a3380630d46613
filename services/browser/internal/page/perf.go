package page

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	cdpio "github.com/chromedp/cdproto/io"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Limits of the profiling tools (performance_stop, heap_snapshot).
const (
	// DefaultMaxProfileFileBytes caps the file a profile attaches (the
	// gzipped trace or heap snapshot) when Options.MaxProfileFileBytes is 0:
	// a larger one is left out, and the result says so.
	DefaultMaxProfileFileBytes = 20 << 20
	// DefaultMaxProfileReadBytes caps how much of a trace or heap snapshot
	// the worker reads (uncompressed) when Options.MaxProfileReadBytes is
	// 0: a trace is analysed up to there, a heap snapshot is refused.
	DefaultMaxProfileReadBytes = 128 << 20
)

// traceCategories are the categories of DevTools' Performance panel,
// without screenshots and the high-resolution sampler (they make the
// trace large and the summary does not use them).
var traceCategories = []string{
	"blink.console", "blink.user_timing", "devtools.timeline", "disabled-by-default-devtools.timeline",
	"disabled-by-default-devtools.timeline.frame", "disabled-by-default-devtools.timeline.stack",
	"disabled-by-default-v8.cpu_profiler", "disabled-by-default-lighthouse", "latencyInfo", "loading", "v8.execute", "v8",
}

// perfRecording is a trace the tab records between performance_start and
// performance_stop. Only the holder of Tab.sem uses it.
type perfRecording struct {
	// turn is its place at the browser (perfturns.go); nil without
	// Options.Traces.
	turn *traceTurn
	// queued says that it waits for its turn: nothing is recorded yet.
	queued  bool
	started time.Time
	url     string
	reload  bool
	// kept is the result of a recording stopped at the longest a trace
	// may hold the browser, and keptErr why one could not be stopped or
	// (queued) started: performance_stop answers with them.
	kept    *browserv1.ToolResult
	keptErr error
}

// perfHandlers are the performance and memory tools, which the tab's
// perfTools run.
var perfHandlers = map[string]handler{
	"performance_start": on((*browserv1.ToolRequest).GetPerformanceStart, func(t *Tab, ctx context.Context, r *browserv1.PerformanceStart) (*browserv1.ToolResult, error) {
		return t.perf.start(ctx, r)
	}),
	"performance_stop": noArgs(func(t *Tab, ctx context.Context) (*browserv1.ToolResult, error) { return t.perf.stop(ctx) }),
	"performance_insight": func(t *Tab, _ context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.perf.insight(r.GetPerformanceInsight().GetInsight())
	},
	"performance_metrics": noArgs(func(t *Tab, ctx context.Context) (*browserv1.ToolResult, error) { return t.perf.metrics(ctx) }),
	"heap_snapshot":       noArgs(func(t *Tab, ctx context.Context) (*browserv1.ToolResult, error) { return t.perf.heapSnapshot(ctx) }),
	"screencast_start": on((*browserv1.ToolRequest).GetScreencastStart, func(t *Tab, ctx context.Context, r *browserv1.ScreencastStart) (*browserv1.ToolResult, error) {
		return t.perf.screencastStart(ctx, r)
	}),
	"screencast_stop": noArgs(func(t *Tab, ctx context.Context) (*browserv1.ToolResult, error) { return t.perf.screencastStop(ctx) }),
	"lighthouse_audit": on((*browserv1.ToolRequest).GetLighthouseAudit, func(t *Tab, ctx context.Context, r *browserv1.LighthouseAudit) (*browserv1.ToolResult, error) {
		return t.perf.lighthouseAudit(ctx, r)
	}),
}

// perfTools are the tab's performance and memory tools (perf.go,
// perfmetrics.go, heap.go, screencast.go, lighthouse.go) and what they
// keep between calls. Only the holder of Tab.sem uses them.
type perfTools struct {
	// tab is the tab they run in: its CDP context, its turn (sem) for a
	// recording that starts or stops on its own, the page's URL.
	tab *Tab
	// rec is the running performance recording, or nil.
	rec *perfRecording
	// lastTrace is the summary of the tab's last performance_stop, for
	// performance_insight (nil before one).
	lastTrace *traceSummary
	// metricsOn says that performance_metrics enabled the Performance
	// domain, whose counters run from then on.
	metricsOn bool
	// cast is the running screencast (screencast.go), or nil; the
	// recording has its own lock.
	cast *screencast
}

// start starts a trace of the tab (and reloads the page with reload, so
// the trace holds its load), or queues it while another tab of the browser
// records one (perfturns.go).
func (p *perfTools) start(ctx context.Context, req *browserv1.PerformanceStart) (*browserv1.ToolResult, error) {
	if rec := p.rec; rec != nil {
		switch {
		case rec.queued:
			ahead, held := rec.turn.status()
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"this tab's performance recording is still queued: %s; it starts by itself. Call performance_stop to give up its place", p.queueNote(ahead, held))
		case rec.kept != nil:
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"this tab's performance recording has ended (it held the browser for the longest a recording may, %s): call performance_stop for its result", p.tab.opts.Traces.maxDuration())
		case rec.keptErr != nil:
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"this tab's performance recording has ended with an error: call performance_stop to read it, then start a new one")
		}
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"a performance recording of this tab is already running (started %s ago): call performance_stop first", time.Since(rec.started).Round(time.Second))
	}
	rec := &perfRecording{reload: req.GetReload()}
	if q := p.tab.opts.Traces; q != nil {
		ahead, held := q.join(p, rec)
		if ahead > 0 {
			rec.queued = true
			p.rec = rec
			then := ""
			if rec.reload {
				then = ", reloading the page then (as asked)"
			}
			return textResult("Queued: %s. This tab's recording starts by itself when its turn comes%s; call performance_start again to see whether it runs, and performance_stop when you are done (before it starts, performance_stop gives up its place and returns nothing).",
				p.queueNote(ahead, held), then), nil
		}
	}
	return p.beginTrace(ctx, rec)
}

// queueNote says why and behind what a recording waits.
func (p *perfTools) queueNote(ahead int, held time.Duration) string {
	others := ""
	if ahead > 1 {
		others = fmt.Sprintf(", and %d more wait before this one", ahead-1)
	}
	return fmt.Sprintf("this worker's browser records one performance trace at a time (a Chromium limit), and another session's or tab's recording holds it (for %s so far; a recording is stopped after at most %s)%s",
		held.Round(time.Second), p.tab.opts.Traces.maxDuration(), others)
}

// beginTrace starts rec's trace: the browser is the tab's to trace (its
// turn came, or the tab has no TraceTurns). On failure the turn ends.
func (p *perfTools) beginTrace(ctx context.Context, rec *perfRecording) (*browserv1.ToolResult, error) {
	u, _ := p.tab.currentURL(ctx)
	_, err := chromedp.Call(ctx, tracing.Start, tracing.StartParams{
		TransferMode: tracing.StartTransferModeReturnAsStream, StreamFormat: tracing.StreamFormatJSON,
		// The browser holds no more than the worker would read: a
		// recording left running stops there instead of growing.
		TraceConfig: &tracing.TraceConfig{RecordMode: tracing.TraceConfigRecordModeRecordUntilFull,
			TraceBufferSizeInKb: float64(p.tab.opts.maxProfileReadBytes() >> 10),
			IncludedCategories:  traceCategories, ExcludedCategories: []string{"*"}},
	})
	if err != nil {
		rec.turn.end()
		if p.rec == rec {
			p.rec = nil
		}
		if strings.Contains(err.Error(), "already") {
			// Not another recording (they take turns), nor a Lighthouse
			// audit (its categories need no trace: run.mjs): a DevTools
			// client from outside the worker's tools traces the browser.
			return nil, bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
				"another DevTools client of this worker's browser is tracing it (not a session's performance recording: those take turns; nor lighthouse_audit, which records no trace); try again later: %s", clipText(err.Error()))
		}
		return nil, fmt.Errorf("start tracing: %w", err)
	}
	rec.queued, rec.started, rec.url = false, time.Now(), u
	p.rec = rec
	msg := fmt.Sprintf("Recording a performance trace of %s; call performance_stop to end it and read the insights.", clipTo(u, maxURL))
	if !rec.reload {
		return textResult("%s", msg), nil
	}
	res, err := p.tab.reload(ctx)
	if err != nil {
		p.discardTrace(ctx)
		return nil, err
	}
	res.Content = append([]*browserv1.Content{textContent(msg)}, res.Content...)
	return res, nil
}

// discardTrace ends a recording whose start failed, or takes a queued
// one out of line.
func (p *perfTools) discardTrace(ctx context.Context) {
	rec := p.rec
	p.rec = nil
	if rec == nil {
		return
	}
	defer rec.turn.end()
	if rec.queued || rec.kept != nil || rec.keptErr != nil {
		return // no trace of it runs
	}
	if h, _, err := endTrace(ctx); err == nil {
		_, _ = chromedp.Call(ctx, cdpio.Close, cdpio.CloseParams{Handle: h})
	}
}

// beginQueued starts rec's trace once its turn came (TraceTurns calls it
// on a goroutine of its own): it waits for the tab's running tool, then
// starts the trace, and reloads the page when rec asked for it. A
// recording given up meanwhile (performance_stop, the tab gone) ends its
// turn instead; one whose trace cannot start keeps the error for
// performance_stop.
func (p *perfTools) beginQueued(rec *perfRecording) {
	t := p.tab
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-t.ctx.Done():
		rec.turn.end()
		return
	case <-t.gone.Done():
		rec.turn.end()
		return
	}
	if p.rec != rec || !rec.queued || t.Closed() {
		rec.turn.end()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	rctx, rcancel := t.runCtx(ctx)
	defer rcancel()
	reload := rec.reload
	rec.reload, rec.queued = false, false // the reload is sent below, without waiting for it
	if _, err := p.beginTrace(rctx, rec); err != nil {
		rec.keptErr = fmt.Errorf("this tab's performance recording was queued, and could not start when its turn came: %w", err)
		p.rec = rec // for performance_stop to say so
		return
	}
	rec.reload = reload
	if reload {
		// The trace holds the load whenever it happens: no need to wait
		// for it here, where no caller waits.
		_, _ = chromedp.Call(rctx, page.Reload, page.ReloadParams{IgnoreCache: new(true)})
	}
}

// expireTrace stops rec, which held the browser for the longest a
// recording may, and keeps its result for performance_stop; then the
// browser goes to the next recording in line.
func (p *perfTools) expireTrace(rec *perfRecording) {
	defer rec.turn.end()
	t := p.tab
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-t.ctx.Done():
		return
	case <-t.gone.Done():
		return
	}
	if p.rec != rec || rec.queued || rec.kept != nil || rec.keptErr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	rctx, rcancel := t.runCtx(ctx)
	defer rcancel()
	rec.kept, rec.keptErr = p.finishTrace(rctx, rec)
	if rec.kept != nil {
		appendText(rec.kept, fmt.Sprintf("Note: the recording was stopped after %s, the longest one may hold this worker's browser (others wait for it): this is its result.", t.opts.Traces.maxDuration()))
	}
}

// DropRecording ends and discards the tab's performance recording, if one
// runs. The session calls it when it refuses the performance_start that
// began it (its reload was blocked by the URL policy): a refused call
// leaves nothing running.
func (t *Tab) DropRecording(ctx context.Context) {
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return
	}
	if t.perf.rec != nil {
		rctx, cancel := t.runCtx(ctx)
		defer cancel()
		t.perf.discardTrace(rctx)
	}
}

// stop ends the recording and answers with its insights and
// the trace, gzipped, as trace.json.gz.
func (p *perfTools) stop(ctx context.Context) (*browserv1.ToolResult, error) {
	rec := p.rec
	if rec == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"no performance recording is running in this tab: start one with performance_start (a recording belongs to the tab it started in)")
	}
	p.rec = nil
	switch {
	case rec.queued:
		ahead, held := rec.turn.status()
		rec.turn.end()
		return nil, bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"nothing was recorded: this tab's performance recording was still queued (%s). It has left the queue; call performance_start again later",
			p.queueNote(ahead, held))
	case rec.keptErr != nil:
		return nil, rec.keptErr
	case rec.kept != nil:
		return rec.kept, nil
	}
	defer rec.turn.end()
	return p.finishTrace(ctx, rec)
}

// finishTrace ends rec's trace and answers with its insights and the trace,
// gzipped, as trace.json.gz.
func (p *perfTools) finishTrace(ctx context.Context, rec *perfRecording) (*browserv1.ToolResult, error) {
	stream, lost, err := endTrace(ctx)
	// The browser's trace has ended: the next recording may start while
	// this one is read.
	rec.turn.end()
	if err != nil {
		return nil, err
	}
	defer func() { _, _ = chromedp.Call(ctx, cdpio.Close, cdpio.CloseParams{Handle: stream}) }()

	file := &cappedBuffer{max: p.tab.opts.maxProfileFileBytes()}
	zw := gzip.NewWriter(file)
	in := &cdpStream{ctx: ctx, handle: stream, max: int64(p.tab.opts.maxProfileReadBytes())}
	sum, cut, err := analyzeTrace(in, zw)
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress the trace: %w", err)
	}
	if sum.lcpNode > 0 {
		sum.LCPElement = describeBackendNode(ctx, sum.lcpNode)
	}

	now, _ := p.tab.currentURL(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "Performance trace of %s, %s recorded", clipTo(now, maxURL), time.Since(rec.started).Round(100*time.Millisecond))
	if rec.reload {
		b.WriteString(" (from a reload)")
	}
	fmt.Fprintf(&b, ", %d events of this tab (of %d the browser recorded).\n", sum.Kept, sum.Events)
	if now != rec.url {
		fmt.Fprintf(&b, "Note: the tab navigated during the recording (it started at %s).\n", clipTo(rec.url, maxURL))
	}
	b.WriteString(sum.text())
	if lost {
		b.WriteString("\nNote: the browser's trace buffer filled up (the worker's --max-profile-read-mb), so the recording stopped early: record a shorter span.")
	}
	if cut {
		fmt.Fprintf(&b, "\nNote: the trace is longer than the %d bytes the worker reads (--max-profile-read-mb): the insights cover its start only; record a shorter span.", in.max)
	}
	attach := !file.over && !cut
	if attach {
		fmt.Fprintf(&b, "\nThe tab's trace (%d bytes gzipped) is attached as trace.json.gz: Chrome DevTools' Performance panel loads it.", file.Len())
	} else if !cut {
		fmt.Fprintf(&b, "\nThe trace file is not attached: gzipped it is larger than the limit of %d bytes (--max-profile-file-mb); record a shorter span.", file.max)
	} else {
		b.WriteString("\nThe trace file is not attached: the worker did not read it whole.")
	}
	res := textResult("%s", b.String())
	if attach {
		res.Content = append(res.Content, resourcePart("trace.json.gz", "application/gzip", file.Bytes()))
	}
	SetStructured(res, "performance", sum)
	p.lastTrace = &sum
	return res, nil
}

// Insights performance_insight details.
var Insights = []string{"lcp", "cls", "long_tasks", "requests", "main_thread"}

// insight details one insight of the tab's last recording:
// every item behind the summary's figure, in time order, cut at the
// call's character cap.
func (p *perfTools) insight(insight string) (*browserv1.ToolResult, error) {
	s := p.lastTrace
	if s == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"this tab has no performance recording to detail: record one with performance_start and performance_stop first")
	}
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	d := s.detail
	switch strings.ToLower(strings.TrimSpace(insight)) {
	case "lcp":
		if s.LCP == 0 {
			add("No largest contentful paint in the recording (record with reload to measure the load).")
			break
		}
		add("LCP at %g ms: %s, %g px², element %s (TTFB %g ms, FCP %g ms).", s.LCP, s.LCPType, s.LCPSize, orNone(s.LCPElement), s.TTFB, s.FCP)
		add("Candidates as the page painted them (the last is the LCP):")
		for _, c := range d.candidates {
			add("- at %g ms: %s, %g px²", c.atMS, c.kind, c.size)
		}
		for _, r := range d.requests {
			if r.Type == "Image" && r.StartMS <= s.LCP {
				add("Image loaded before it: %s (from %g ms, %g ms long)", r.URL, r.StartMS, r.DurationMS)
			}
		}
	case "cls":
		add("CLS %g (the worst window of shifts), from %d layout shifts:", s.CLS, s.Shifts)
		for _, sh := range d.shifts {
			note := ""
			if sh.input {
				note = " (after an input: not counted)"
			}
			add("- at %g ms: score %.4f%s", sh.atMS, sh.score, note)
		}
	case "long_tasks":
		add("%d long tasks (over 50 ms) on the main thread, total blocking time %g ms:", s.LongTasks, s.TBT)
		for _, lt := range d.longTasks {
			add("- at %g ms: %g ms (blocking %g ms)", lt.StartMS, lt.DurationMS, roundMS(max(lt.DurationMS-50, 0)))
		}
	case "requests":
		add("%d requests, in the order they were sent (start and duration in ms; ! render-blocking):", s.Requests)
		for _, r := range d.requests {
			status := strconv.Itoa(r.Status)
			if r.Failed {
				status = "failed"
			}
			mark := ""
			if r.RenderBlocking {
				mark = " !"
			}
			add("- %g +%g ms %s %s %s, %d B%s", r.StartMS, r.DurationMS, status, r.Type, r.URL, r.Bytes, mark)
		}
	case "main_thread":
		add("Main-thread time by category (self time, ms):")
		cats := make([]string, 0, len(s.MainThread))
		for c := range s.MainThread {
			cats = append(cats, c)
		}
		slices.SortFunc(cats, func(a, b string) int { return cmp.Compare(s.MainThread[b], s.MainThread[a]) })
		for _, c := range cats {
			add("- %s: %g", c, s.MainThread[c])
		}
	default:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "insight %q is not one of %s", clipTo(insight, 100), strings.Join(Insights, ", "))
	}
	limit := p.tab.capChars(DefaultTextChars)
	var b strings.Builder
	for i, l := range lines {
		if b.Len()+len(l)+1 > limit {
			fmt.Fprintf(&b, "[cut at max_chars=%d: %d more lines not shown; pass a larger max_chars]", limit, len(lines)-i)
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return textResult("%s", strings.TrimRight(b.String(), "\n")), nil
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// endTrace ends the trace of the tab of ctx and returns the stream that holds it, and
// whether the browser's buffer filled up (events were lost).
func endTrace(ctx context.Context) (stream cdpio.StreamHandle, lost bool, err error) {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := chromedp.Events(ectx, tracing.TracingComplete) // subscribed before End
	if _, err := chromedp.Call(ctx, tracing.End, cdp.Empty{}); err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "not started") {
			return "", false, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"the browser has no trace of this tab running (the tab was replaced or its renderer restarted): start a new recording with performance_start")
		}
		return "", false, fmt.Errorf("stop tracing: %w", err)
	}
	for ev, err := range done {
		if err != nil {
			return "", false, fmt.Errorf("wait for the trace: %w", err)
		}
		if ev.Stream == "" {
			return "", false, fmt.Errorf("the browser returned no trace stream")
		}
		return ev.Stream, ev.DataLossOccurred, nil
	}
	return "", false, fmt.Errorf("the tab closed before the trace was complete")
}

// describeBackendNode names a DOM node in a few characters
// (tag#id.class), or "" when it is gone.
func describeBackendNode(ctx context.Context, id int64) string {
	n, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{BackendNodeID: cdp.BackendNodeID(id)})
	if err != nil || n.Node == nil {
		return ""
	}
	desc := strings.ToLower(n.Node.LocalName)
	if desc == "" {
		desc = strings.ToLower(n.Node.NodeName)
	}
	for i := 0; i+1 < len(n.Node.Attributes); i += 2 {
		switch n.Node.Attributes[i] {
		case "id":
			desc += "#" + n.Node.Attributes[i+1]
		case "class":
			if f := strings.Fields(n.Node.Attributes[i+1]); len(f) > 0 {
				desc += "." + strings.Join(f, ".")
			}
		}
	}
	return clipTo("<"+desc+">", 120)
}

// resourcePart is a file part of a result.
func resourcePart(name, mime string, data []byte) *browserv1.Content {
	return &browserv1.Content{Part: &browserv1.Content_Resource{Resource: &browserv1.Resource{Name: name, MimeType: mime, Data: data}}}
}

// cdpStream reads a DevTools IO stream, at most max bytes: past them it
// fails with errTraceCut.
type cdpStream struct {
	ctx    context.Context
	handle cdpio.StreamHandle
	max, n int64
	buf    []byte
	eof    bool
}

func (s *cdpStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.eof {
			return 0, io.EOF
		}
		if s.n >= s.max {
			return 0, errTraceCut
		}
		r, err := chromedp.Call(s.ctx, cdpio.Read, cdpio.ReadParams{Handle: s.handle, Size: 1 << 20})
		if err != nil {
			return 0, fmt.Errorf("read the trace stream: %w", err)
		}
		s.buf, s.eof = r.Data, r.EOF
	}
	n := copy(p, s.buf[:min(int64(len(s.buf)), s.max-s.n)])
	s.buf = s.buf[n:]
	s.n += int64(n)
	if s.n >= s.max {
		s.buf = nil
	}
	return n, nil
}

// cappedBuffer keeps what is written to it up to max bytes; past them it
// drops everything and says so (over).
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.over || b.Len()+len(p) > b.max {
		if !b.over {
			b.over = true
			b.Reset()
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
