package page

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The analysis of a Chromium trace (the JSON trace event format that
// DevTools' Performance panel loads): the few numbers a model can act on,
// read in one pass over the events without holding the trace.

// traceEvent is the part of a trace event the analysis reads. Events
// whose args do not fit these types keep the fields that do (a type
// mismatch is not an error here).
type traceEvent struct {
	Name string  `json:"name"`
	Ph   string  `json:"ph"`
	Ts   float64 `json:"ts"`  // µs
	Dur  float64 `json:"dur"` // µs
	Pid  int64   `json:"pid"`
	Tid  int64   `json:"tid"`
	Args struct {
		Frame string     `json:"frame"`
		Name  string     `json:"name"` // thread_name metadata
		Data  *traceData `json:"data"`
	} `json:"args"`
}

type traceData struct {
	IsLoadingMainFrame   bool    `json:"isLoadingMainFrame"`
	IsMainFrame          bool    `json:"isMainFrame"`
	IsOutermostMainFrame bool    `json:"isOutermostMainFrame"`
	DocumentLoaderURL    string  `json:"documentLoaderURL"`
	Frame                string  `json:"frame"`
	RequestID            string  `json:"requestId"`
	URL                  string  `json:"url"`
	ResourceType         string  `json:"resourceType"`
	RenderBlocking       string  `json:"renderBlocking"`
	StatusCode           int     `json:"statusCode"`
	EncodedDataLength    float64 `json:"encodedDataLength"`
	DidFail              bool    `json:"didFail"`
	Size                 float64 `json:"size"`
	NodeID               int64   `json:"nodeId"`
	Type                 string  `json:"type"`
	WeightedScoreDelta   float64 `json:"weighted_score_delta"`
	HadRecentInput       bool    `json:"had_recent_input"`
	// TracingStartedInBrowser, FrameCommittedInBrowser and
	// ProcessReadyInBrowser: which frames are the tab's and where they run.
	Frames          []traceFrame `json:"frames"`
	Parent          string       `json:"parent"`
	ProcessID       int64        `json:"processId"`
	ProcessPseudoID string       `json:"processPseudoId"`
}

type traceFrame struct {
	Frame     string `json:"frame"`
	Parent    string `json:"parent"`
	ProcessID int64  `json:"processId"`
}

// Thresholds of the analysis (µs), as DevTools and Lighthouse use them.
const (
	longTaskUS     = 50_000    // a task longer than this blocks input
	clsGapUS       = 1_000_000 // a layout shift session window ends after a gap…
	clsWindowUS    = 5_000_000 // …or after this long
	traceListShown = 5         // requests and tasks each list shows
	traceURLChars  = 200       // an address in the summary
)

// traceRequest is one request of the trace.
type traceRequest struct {
	URL            string  `json:"url"`
	Type           string  `json:"type,omitempty"`
	Status         int     `json:"status,omitempty"`
	Failed         bool    `json:"failed,omitempty"`
	RenderBlocking bool    `json:"render_blocking,omitempty"`
	StartMS        float64 `json:"start_ms"`
	DurationMS     float64 `json:"duration_ms"`
	Bytes          int64   `json:"bytes,omitempty"`
	sent, finished float64
}

// longTask is a main-thread task over 50 ms.
type longTask struct {
	StartMS    float64 `json:"start_ms"`
	DurationMS float64 `json:"duration_ms"`
}

// traceSummary is what analyzeTrace found; times in ms from the start of
// the last main-frame navigation (or of the recording, without one).
type traceSummary struct {
	Events     int     `json:"events"`
	Navigation string  `json:"navigation_url,omitempty"`
	TTFB       float64 `json:"ttfb_ms,omitempty"`
	FCP        float64 `json:"fcp_ms,omitempty"`
	DCL        float64 `json:"dom_content_loaded_ms,omitempty"`
	Load       float64 `json:"load_ms,omitempty"`
	LCP        float64 `json:"lcp_ms,omitempty"`
	LCPType    string  `json:"lcp_type,omitempty"`
	LCPSize    float64 `json:"lcp_size,omitempty"`
	LCPElement string  `json:"lcp_element,omitempty"`
	lcpNode    int64
	CLS        float64 `json:"cls"`
	Shifts     int     `json:"layout_shifts"`
	// TBT is the blocking time (past 50 ms) of the long tasks after FCP
	// (all of them without an FCP).
	TBT         float64            `json:"total_blocking_time_ms"`
	LongTasks   int                `json:"long_tasks"`
	Longest     []longTask         `json:"longest_tasks,omitempty"`
	MainThread  map[string]float64 `json:"main_thread_ms,omitempty"`
	Slowest     []traceRequest     `json:"slowest_requests,omitempty"`
	Blocking    []traceRequest     `json:"render_blocking_requests,omitempty"`
	Requests    int                `json:"requests"`
	Navigations int                `json:"navigations"`
	// Kept counts the events of the tab, of Events read: the rest were
	// other tabs' (other sessions' too) and processes', and are left out
	// of the analysis and the file.
	Kept int `json:"events_kept"`
	// detail is what performance_insight shows beyond the summary.
	detail traceDetail
}

// traceDetail is every item behind the summary's insights (each list
// bounded by maxInsightItems), in time order.
type traceDetail struct {
	longTasks  []longTask
	requests   []traceRequest
	shifts     []layoutShift
	candidates []lcpCandidate
}

// layoutShift is one layout shift.
type layoutShift struct {
	atMS, score float64
	input       bool // after a recent input: not counted in CLS
}

// lcpCandidate is one largest-contentful-paint candidate.
type lcpCandidate struct {
	atMS, size float64
	kind       string
}

// maxInsightItems bounds each list of traceDetail.
const maxInsightItems = 500

// errTraceCut is what a reader returns when the trace is longer than the
// worker reads.
var errTraceCut = errors.New("trace longer than the read limit")

// traceCollector keeps what the analysis needs while the events stream by.
type traceCollector struct {
	navs    []traceEvent // main-frame navigationStart
	marks   []traceEvent // firstContentfulPaint, MarkDOMContent, MarkLoad, LCP candidates
	shifts  []traceEvent
	reqs    map[string]*traceRequest
	order   []string
	docSent map[string]float64 // Document requests: when sent
	docResp map[string]float64 // …and when their response came
	threads map[[2]int64]string
	slices  map[[2]int64][]traceEvent // complete events per thread
	first   float64
}

// analyzeTrace reads a trace ({"traceEvents": [...]} or a bare array)
// from r, keeps the events of the traced tab (tabScope) and writes them to
// w as a trace of their own. A trace cut short (errTraceCut, or JSON that
// ends early) is analysed up to there, and cut says so.
//
// Chromium traces the whole browser, whatever target asked: other tabs,
// other sessions' among them, are in the trace, so the events are read
// first and kept only once it is known which processes and frames are the
// tab's.
func analyzeTrace(r io.Reader, w io.Writer) (s traceSummary, cut bool, err error) {
	events, err := readEvents(json.NewDecoder(r))
	if err != nil {
		if !errors.Is(err, errTraceCut) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return s, false, fmt.Errorf("read the trace: %w", err)
		}
		cut = true
	}
	scope := scopeOf(events)
	c := &traceCollector{reqs: map[string]*traceRequest{}, docSent: map[string]float64{}, docResp: map[string]float64{},
		threads: map[[2]int64]string{}, slices: map[[2]int64][]traceEvent{}}
	if _, err := io.WriteString(w, `{"traceEvents":[`); err != nil {
		return s, cut, err
	}
	kept := 0
	for _, raw := range events {
		ev := decodeEvent(raw)
		if !scope.keeps(&ev, raw) {
			continue
		}
		sep := ",\n"
		if kept == 0 {
			sep = "\n"
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return s, cut, err
		}
		if _, err := w.Write(raw); err != nil {
			return s, cut, err
		}
		kept++
		c.add(ev)
	}
	if _, err := io.WriteString(w, "]}\n"); err != nil {
		return s, cut, err
	}
	s = c.summary()
	s.Events, s.Kept = len(events), kept
	return s, cut, nil
}

// decodeEvent decodes one event; args that do not fit traceEvent's types
// leave those fields empty (a type mismatch is not an error here).
func decodeEvent(raw json.RawMessage) traceEvent {
	var ev traceEvent
	_ = json.Unmarshal(raw, &ev)
	return ev
}

// readEvents returns the events of a trace, as they are, up to where the
// reader stopped.
func readEvents(dec *json.Decoder) ([]json.RawMessage, error) {
	var events []json.RawMessage
	readArray := func() error {
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			events = append(events, raw)
		}
		_, err := dec.Token() // ]
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == json.Delim('[') {
		return events, readArray()
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("a trace is a JSON object or array, not %v", tok)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return events, err
		}
		if key != "traceEvents" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return events, err
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return events, fmt.Errorf("traceEvents is not an array (%v)", err)
		}
		if err := readArray(); err != nil {
			return events, err
		}
	}
	return events, nil
}

// tabScope is what of a trace belongs to the traced tab: its frames (those
// TracingStartedInBrowser lists, and the frames committed in them later)
// and the renderer processes they ran in.
type tabScope struct {
	browser int64
	pids    map[int64]bool
	frames  map[string]bool
}

// scopeOf finds the tab's frames and processes in the browser's events.
func scopeOf(events []json.RawMessage) tabScope {
	s := tabScope{pids: map[int64]bool{}, frames: map[string]bool{}}
	var commits []traceEvent
	ready := map[string]int64{} // processPseudoId → pid
	for _, raw := range events {
		if !bytes.Contains(raw, []byte(`InBrowser"`)) {
			continue
		}
		ev := decodeEvent(raw)
		d := ev.Args.Data
		if d == nil {
			continue
		}
		switch ev.Name {
		case "TracingStartedInBrowser":
			s.browser = ev.Pid
			for _, f := range d.Frames {
				s.frames[f.Frame] = true
				if f.ProcessID > 0 {
					s.pids[f.ProcessID] = true
				}
			}
		case "ProcessReadyInBrowser":
			ready[d.ProcessPseudoID] = d.ProcessID
		case "FrameCommittedInBrowser":
			commits = append(commits, ev)
		}
	}
	slices.SortFunc(commits, func(a, b traceEvent) int { return cmp.Compare(a.Ts, b.Ts) })
	for _, ev := range commits {
		d := ev.Args.Data
		if !s.frames[d.Frame] && !s.frames[d.Parent] {
			continue
		}
		s.frames[d.Frame] = true
		pid := d.ProcessID
		if pid == 0 {
			pid = ready[d.ProcessPseudoID]
		}
		if pid > 0 {
			s.pids[pid] = true
		}
	}
	return s
}

// keeps reports whether ev (raw) is the tab's: any event of its
// renderers; of the browser process, those that name one of its frames,
// and those that carry nothing (tasks with empty args, thread names).
// Other processes' events (other tabs' renderers, the GPU, utilities) are
// left out: any args they carry may name what another tab loaded.
func (s tabScope) keeps(ev *traceEvent, raw json.RawMessage) bool {
	if s.pids[ev.Pid] {
		return true
	}
	if ev.Pid != s.browser {
		return false
	}
	if ev.Name == "TracingStartedInBrowser" {
		return true // it lists the tab's frames only; DevTools needs it
	}
	frame := ev.Args.Frame
	if d := ev.Args.Data; d != nil && d.Frame != "" {
		frame = d.Frame
	}
	if frame != "" {
		return s.frames[frame]
	}
	var only struct {
		Args map[string]json.RawMessage `json:"args"`
	}
	if json.Unmarshal(raw, &only) != nil {
		return false
	}
	for k := range only.Args {
		if ev.Ph != "M" || (k != "name" && k != "sort_index") || ev.Name == "process_labels" {
			return false
		}
	}
	return true
}

// add keeps what the analysis needs of one event.
func (c *traceCollector) add(ev traceEvent) {
	if ev.Ts > 0 && (c.first == 0 || ev.Ts < c.first) {
		c.first = ev.Ts
	}
	d := ev.Args.Data
	if d == nil {
		d = &traceData{}
	}
	switch ev.Name {
	case "thread_name":
		if ev.Ph == "M" {
			c.threads[[2]int64{ev.Pid, ev.Tid}] = ev.Args.Name
		}
	case "navigationStart":
		if d.IsLoadingMainFrame && d.DocumentLoaderURL != "" && !strings.HasPrefix(d.DocumentLoaderURL, "about:") {
			c.navs = append(c.navs, ev)
		}
	case "firstContentfulPaint", "MarkDOMContent", "MarkLoad", "largestContentfulPaint::Candidate":
		c.marks = append(c.marks, ev)
	case "LayoutShift":
		c.shifts = append(c.shifts, ev)
	case "ResourceSendRequest":
		if _, ok := c.reqs[d.RequestID]; !ok {
			c.order = append(c.order, d.RequestID)
		}
		c.reqs[d.RequestID] = &traceRequest{URL: d.URL, Type: d.ResourceType, sent: ev.Ts,
			RenderBlocking: d.RenderBlocking == "blocking" || d.RenderBlocking == "in_body_parser_blocking"}
		if d.ResourceType == "Document" {
			c.docSent[d.RequestID] = ev.Ts
		}
	case "ResourceReceiveResponse":
		if r := c.reqs[d.RequestID]; r != nil {
			r.Status = d.StatusCode
		}
		if _, ok := c.docSent[d.RequestID]; ok {
			c.docResp[d.RequestID] = ev.Ts
		}
	case "ResourceFinish":
		if r := c.reqs[d.RequestID]; r != nil {
			r.finished, r.Failed, r.Bytes = ev.Ts, d.DidFail, int64(d.EncodedDataLength)
		}
	}
	if ev.Ph == "X" && ev.Dur > 0 {
		k := [2]int64{ev.Pid, ev.Tid}
		// Only the names the analysis groups, to keep memory low.
		if ev.Name == "RunTask" || mainThreadCategory(ev.Name) != "" {
			ev.Args.Data = nil
			c.slices[k] = append(c.slices[k], ev)
		}
	}
}

// mainThreadCategory groups a main-thread event as DevTools' summary
// does; "" for events that only hold others (their own time is "other").
func mainThreadCategory(name string) string {
	switch name {
	case "EvaluateScript", "FunctionCall", "TimerFire", "EventDispatch", "FireAnimationFrame", "FireIdleCallback",
		"RunMicrotasks", "XHRReadyStateChange", "XHRLoad", "v8.compile", "v8.compileModule", "v8.evaluateModule",
		"v8.run", "v8.callFunction", "V8.Execute", "v8.produceCache", "CompileScript", "ProfileCall":
		return "scripting"
	case "UpdateLayoutTree", "RecalculateStyles", "Layout", "InvalidateLayout", "ScheduleStyleRecalculation", "HitTest":
		return "style & layout"
	case "Paint", "PrePaint", "Layerize", "UpdateLayer", "CompositeLayers", "Commit", "PaintImage", "Decode Image",
		"RasterTask", "UpdateLayerTree", "ScrollLayer":
		return "paint & composite"
	case "ParseHTML", "ParseAuthorStyleSheet":
		return "parsing"
	case "MinorGC", "MajorGC", "V8.GC_SCAVENGER", "V8.GC_MARK_COMPACTOR", "BlinkGC.AtomicPhase", "ThreadState::performIdleLazySweep":
		return "garbage collection"
	}
	return ""
}

func (c *traceCollector) summary() traceSummary {
	s := traceSummary{Navigations: len(c.navs), MainThread: map[string]float64{}}
	origin, frame := c.first, ""
	var nav *traceEvent
	if len(c.navs) > 0 {
		nav = &c.navs[len(c.navs)-1]
		origin, frame = nav.Ts, nav.Args.Frame
		s.Navigation = clipTo(nav.Args.Data.DocumentLoaderURL, traceURLChars)
	}
	ms := func(ts float64) float64 { return roundMS((ts - origin) / 1000) }
	main := c.mainThread(nav)

	// Document: the first one sent after the navigation started.
	if nav != nil {
		best := -1.0
		for id, sent := range c.docSent {
			if resp, ok := c.docResp[id]; ok && sent >= nav.Ts-100_000 && (best < 0 || sent < best) {
				best = sent
				s.TTFB = ms(resp)
			}
		}
	}
	for _, m := range c.marks {
		if m.Ts < origin || (frame != "" && m.Args.Frame != frame && (m.Args.Data == nil || m.Args.Data.Frame != frame)) {
			continue
		}
		switch m.Name {
		case "firstContentfulPaint":
			if s.FCP == 0 {
				s.FCP = ms(m.Ts)
			}
		case "MarkDOMContent":
			if s.DCL == 0 {
				s.DCL = ms(m.Ts)
			}
		case "MarkLoad":
			if s.Load == 0 {
				s.Load = ms(m.Ts)
			}
		case "largestContentfulPaint::Candidate":
			s.LCP = ms(m.Ts) // the last candidate is the LCP
			if d := m.Args.Data; d != nil {
				s.LCPType, s.LCPSize, s.lcpNode = d.Type, d.Size, d.NodeID
				if len(s.detail.candidates) < maxInsightItems {
					s.detail.candidates = append(s.detail.candidates, lcpCandidate{atMS: s.LCP, size: d.Size, kind: d.Type})
				}
			}
		}
	}
	s.CLS, s.Shifts = c.cls(origin, frame)
	for _, ev := range c.shifts {
		d := ev.Args.Data
		if d == nil || ev.Ts < origin || (frame != "" && ev.Args.Frame != "" && ev.Args.Frame != frame) || len(s.detail.shifts) >= maxInsightItems {
			continue
		}
		s.detail.shifts = append(s.detail.shifts, layoutShift{atMS: ms(ev.Ts), score: d.WeightedScoreDelta, input: d.HadRecentInput})
	}

	// Main thread: long tasks and time by category (self time).
	fcpTs := origin + s.FCP*1000
	evs := c.slices[main]
	var long []longTask
	for _, ev := range evs {
		if ev.Name != "RunTask" || ev.Dur <= longTaskUS || ev.Ts < origin {
			continue
		}
		long = append(long, longTask{StartMS: ms(ev.Ts), DurationMS: roundMS(ev.Dur / 1000)})
		if s.FCP == 0 || ev.Ts >= fcpTs {
			s.TBT += (ev.Dur - longTaskUS) / 1000
		}
	}
	s.TBT = roundMS(s.TBT)
	s.LongTasks = len(long)
	s.detail.longTasks = slices.Clone(long[:min(len(long), maxInsightItems)])
	slices.SortFunc(long, func(a, b longTask) int { return cmp.Compare(b.DurationMS, a.DurationMS) })
	s.Longest = long[:min(len(long), traceListShown)]
	for cat, us := range selfTimes(evs, origin) {
		s.MainThread[cat] = roundMS(us / 1000)
	}

	// Requests after the origin.
	var reqs []traceRequest
	for _, id := range c.order {
		r := *c.reqs[id]
		if r.sent < origin || strings.HasPrefix(r.URL, "data:") {
			continue
		}
		r.URL = clipTo(r.URL, traceURLChars)
		r.StartMS = ms(r.sent)
		if r.finished > 0 {
			r.DurationMS = roundMS((r.finished - r.sent) / 1000)
		}
		reqs = append(reqs, r)
	}
	s.Requests = len(reqs)
	s.detail.requests = slices.Clone(reqs[:min(len(reqs), maxInsightItems)])
	for _, r := range reqs {
		if r.RenderBlocking && len(s.Blocking) < traceListShown {
			s.Blocking = append(s.Blocking, r)
		}
	}
	slices.SortStableFunc(reqs, func(a, b traceRequest) int { return cmp.Compare(b.DurationMS, a.DurationMS) })
	s.Slowest = reqs[:min(len(reqs), traceListShown)]
	return s
}

// mainThread returns the renderer main thread of the page: the thread of
// the navigation, else the renderer main thread with the most task time.
func (c *traceCollector) mainThread(nav *traceEvent) [2]int64 {
	if nav != nil {
		return [2]int64{nav.Pid, nav.Tid}
	}
	var best [2]int64
	var most float64
	for k, name := range c.threads {
		if name != "CrRendererMain" {
			continue
		}
		var total float64
		for _, ev := range c.slices[k] {
			if ev.Name == "RunTask" {
				total += ev.Dur
			}
		}
		if total >= most {
			best, most = k, total
		}
	}
	return best
}

// cls is the cumulative layout shift as Web Vitals define it: the largest
// session window of shifts without recent input (a window ends after a 1 s
// gap or at 5 s), and the count of such shifts.
func (c *traceCollector) cls(origin float64, frame string) (float64, int) {
	var best, window, start, last float64
	n := 0
	for _, ev := range c.shifts {
		d := ev.Args.Data
		if d == nil || d.HadRecentInput || ev.Ts < origin || (frame != "" && ev.Args.Frame != "" && ev.Args.Frame != frame) {
			continue
		}
		n++
		if n == 1 || ev.Ts-last > clsGapUS || ev.Ts-start > clsWindowUS {
			window, start = 0, ev.Ts
		}
		window += d.WeightedScoreDelta
		last = ev.Ts
		best = max(best, window)
	}
	return float64(int(best*10000+0.5)) / 10000, n
}

// selfTimes sums the self time (µs) of the events of one thread by
// category: an event's duration less that of the events nested in it.
func selfTimes(evs []traceEvent, origin float64) map[string]float64 {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, func(a, b traceEvent) int {
		if c := cmp.Compare(a.Ts, b.Ts); c != 0 {
			return c
		}
		return cmp.Compare(b.Dur, a.Dur)
	})
	self := make([]float64, len(evs))
	var stack []int
	for i, ev := range evs {
		self[i] = ev.Dur
		for len(stack) > 0 {
			top := evs[stack[len(stack)-1]]
			if top.Ts+top.Dur > ev.Ts {
				break
			}
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			p := stack[len(stack)-1]
			self[p] -= min(ev.Dur, self[p])
		}
		stack = append(stack, i)
	}
	out := map[string]float64{}
	for i, ev := range evs {
		if ev.Ts < origin || self[i] <= 0 {
			continue
		}
		cat := mainThreadCategory(ev.Name)
		if cat == "" {
			cat = "other"
		}
		out[cat] += self[i]
	}
	return out
}

func roundMS(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// text is the summary as the lines of the tool's answer.
func (s traceSummary) text() string {
	var b strings.Builder
	if s.Navigation != "" {
		fmt.Fprintf(&b, "Navigation to %s", s.Navigation)
		if s.Navigations > 1 {
			fmt.Fprintf(&b, " (the last of %d in the recording; times are from its start)", s.Navigations)
		}
		b.WriteString(":\n")
		var parts []string
		for _, m := range []struct {
			name string
			v    float64
		}{{"TTFB", s.TTFB}, {"FCP", s.FCP}, {"DOMContentLoaded", s.DCL}, {"load", s.Load}} {
			if m.v > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", m.name, fmtMS(m.v)))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "- timing: %s\n", strings.Join(parts, ", "))
		}
	} else {
		b.WriteString("No page load in the recording (times are from its start; performance_start with reload measures the load):\n")
	}
	if s.LCP > 0 {
		fmt.Fprintf(&b, "- LCP: %s", fmtMS(s.LCP))
		if s.LCPType != "" {
			fmt.Fprintf(&b, " (%s", s.LCPType)
			if s.LCPElement != "" {
				fmt.Fprintf(&b, ", %s", s.LCPElement)
			}
			b.WriteString(")")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- CLS: %g (layout shifts without input: %d)\n", s.CLS, s.Shifts)
	fmt.Fprintf(&b, "- long tasks (over 50 ms): %d; total blocking time %s", s.LongTasks, fmtMS(s.TBT))
	for i, t := range s.Longest {
		if i == 0 {
			b.WriteString("; longest:")
		}
		fmt.Fprintf(&b, " %s at %s", fmtMS(t.DurationMS), fmtMS(t.StartMS))
		if i < len(s.Longest)-1 {
			b.WriteString(",")
		}
	}
	b.WriteString("\n")
	if len(s.MainThread) > 0 {
		cats := make([]string, 0, len(s.MainThread))
		for c := range s.MainThread {
			cats = append(cats, c)
		}
		slices.SortFunc(cats, func(a, b string) int { return cmp.Compare(s.MainThread[b], s.MainThread[a]) })
		parts := make([]string, len(cats))
		for i, c := range cats {
			parts[i] = fmt.Sprintf("%s %s", c, fmtMS(s.MainThread[c]))
		}
		fmt.Fprintf(&b, "- main thread: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "- requests: %d", s.Requests)
	writeRequests(&b, "render-blocking", s.Blocking)
	writeRequests(&b, "slowest", s.Slowest)
	return b.String()
}

func writeRequests(b *strings.Builder, what string, reqs []traceRequest) {
	if len(reqs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n- %s:", what)
	for _, r := range reqs {
		status := "pending"
		switch {
		case r.Failed:
			status = "failed"
		case r.Status > 0:
			status = fmt.Sprint(r.Status)
		}
		fmt.Fprintf(b, "\n  - %s %s %s (%s, %s bytes, from %s)", fmtMS(r.DurationMS), status, r.URL, cmp.Or(r.Type, "?"), fmt.Sprint(r.Bytes), fmtMS(r.StartMS))
	}
}

func fmtMS(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%g ms", v)
}
