package catalog

import (
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// The performance and memory tools: a Chromium trace of the active tab
// read back as insights, the page's metrics, V8's heap snapshot summed up
// by constructor, a screencast and a Google Lighthouse audit. The worker
// does the work (internal/page perf.go, perftrace.go, perfmetrics.go,
// heap.go, screencast.go, lighthouse.go).
// perfReload holds for a performance_start that reloads the page: that one
// navigates, and acts.
func perfReload(r *browserv1.ToolRequest) bool { return r.GetPerformanceStart().GetReload() }

var perfTools = []Tool{
	{
		Name: "performance_start", Title: "Start performance trace",
		Acts: perfReload, Navigates: perfReload,
		Description: "Start recording a performance trace (Chromium's, as DevTools' Performance panel records it) of the " +
			"active tab; with reload, reload the page first so the trace holds its load. Act on the page, then call " +
			"performance_stop for the insights. One recording per tab at a time; it belongs to the tab it started in. " +
			"A worker's browser records one trace at a time: while another session's recording runs, this one is queued " +
			"(the result says so) and starts by itself when that one ends, reloading then if asked (call performance_start " +
			"again to see whether it runs). A recording is stopped after 3 minutes at most, its result kept for " +
			"performance_stop.",
		params: []Param{
			{Name: "reload", Type: Boolean, Default: false, Description: "Reload the page once the recording runs, to measure its load"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{
				Reload: a.boolean("reload")}}}, nil
		},
	},
	{
		Name: "performance_stop", Title: "Stop performance trace", ReadOnly: true,
		Description: "Stop the performance recording of the active tab and return its insights: navigation timing (TTFB, " +
			"FCP, DOMContentLoaded, load), LCP and its element, CLS, long tasks and total blocking time, main-thread " +
			"time by category (scripting, style & layout, paint, …), the render-blocking and the slowest requests. " +
			"The trace is attached as trace.json.gz (gzipped trace events: DevTools' Performance panel loads it) " +
			"unless it is larger than the worker's limit (20 MiB gzipped by default), which the result then says. " +
			"Called while the recording is still queued, it gives up its place and returns nothing.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_PerformanceStop{PerformanceStop: n}
		}),
	},
	{
		Name: "performance_insight", Title: "Performance insight", ReadOnly: true,
		MaxChars: TextChars,
		Description: "Detail one insight of the active tab's last performance_stop, every item behind its figure in time " +
			"order: lcp (the candidates, the images loaded before it), cls (each layout shift and its score), " +
			"long_tasks (each task over 50 ms and its blocking time), requests (each request: start, duration, " +
			"status, type, size, render-blocking) or main_thread (time by category).",
		params: []Param{
			{Name: "insight", Type: String, Required: true, Enum: []string{"lcp", "cls", "long_tasks", "requests", "main_thread"}, Description: "The insight to detail"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceInsight{PerformanceInsight: &browserv1.PerformanceInsight{
				Insight: a.str("insight")}}}, nil
		},
	},
	{
		Name: "performance_metrics", Title: "Performance metrics", ReadOnly: true,
		Description: "Read the active tab's performance without a trace: the page's Web Vitals (TTFB, FCP, " +
			"DOMContentLoaded, load, LCP and its element, CLS) and Chromium's runtime state (DOM nodes, documents, " +
			"frames, event listeners, JS heap); from the second call in a tab on, also the layouts, style recalcs and " +
			"layout, style, script and task time since the first.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_PerformanceMetrics{PerformanceMetrics: n}
		}),
	},
	{
		Name: "heap_snapshot", Title: "Heap snapshot", ReadOnly: true,
		Description: "Take a heap snapshot of the active tab's page (V8 collects garbage first) and sum it up: total size, " +
			"object count and the 15 constructors that hold the most memory (self size) with their object counts; compare " +
			"two snapshots to find a leak. The snapshot is attached as heap.heapsnapshot.gz (gunzip it for DevTools' " +
			"Memory panel) unless it is larger than the worker's limit; a page whose snapshot is larger than the worker " +
			"reads (128 MiB by default) is an error.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_HeapSnapshot{HeapSnapshot: n}
		}),
	},
	{
		Name: "screencast_start", Title: "Start screencast",
		Description: "Start recording the frames the active tab's page draws (JPEG, scaled to fit 1280x1280; the page " +
			"draws a frame only when it changes), to see an animation, a transition or what a sequence of actions did. " +
			"Act on the page, then call screencast_stop. One screencast per tab at a time.",
		params: []Param{
			{Name: "max_frames", Type: Integer, Min: bound(1), Max: bound(1000), Description: "Most frames to keep (default 300); the recording stops keeping frames there"},
			{Name: "quality", Type: Integer, Min: bound(1), Max: bound(100), Description: "JPEG quality (default 60)"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			frames, _ := a.integer("max_frames")
			quality, _ := a.integer("quality")
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ScreencastStart{ScreencastStart: &browserv1.ScreencastStart{
				MaxFrames: int32(frames), Quality: int32(quality)}}}, nil
		},
	},
	{
		Name: "screencast_stop", Title: "Stop screencast", ReadOnly: true,
		Description: "Stop the screencast of the active tab and return it as screencast.mov, a video (QuickTime, " +
			"Motion JPEG: the frames as drawn, each as long as the page showed it; QuickTime, VLC, mpv and ffmpeg play it), " +
			"and as screencast.gif, an animation any image viewer plays (at most 640 pixels wide, web-safe colors). " +
			"The frames kept are bounded by max_frames and by the worker's file limit (20 MiB by default); the result " +
			"says which stopped the recording.",
		build: noArgs(func(r *browserv1.ToolRequest, n *browserv1.NoArgs) {
			r.Tool = &browserv1.ToolRequest_ScreencastStop{ScreencastStop: n}
		}),
	},
	{
		// Not read-only: navigation mode reloads the page (as reload and
		// performance_start with reload, which are not either).
		Name: "lighthouse_audit", Title: "Lighthouse audit",
		MayNavigate: func(r *browserv1.ToolRequest) bool { // navigation mode reloads
			return !strings.EqualFold(strings.TrimSpace(r.GetLighthouseAudit().GetMode()), "snapshot")
		},
		Wait: func(*browserv1.ToolRequest) int64 { return LighthouseExtraMs },
		Description: "Audit the active tab with Google Lighthouse (12.8.2, run on the worker) for accessibility, best " +
			"practices and SEO: each category's score (0-100) and its failed audits with a few of the elements they " +
			"flag (selector and HTML). navigation reloads the page and audits its load (refs are stale afterwards); " +
			"snapshot audits the page as it is now, after your actions. Storage is never reset (the session stays " +
			"logged in) and the network is not throttled; the session's emulation is restored afterwards. For " +
			"performance use performance_start/performance_stop. report attaches the whole report (lighthouse.json " +
			"or lighthouse.html) within the worker's file limit. Takes about 3-10 s. Workers without Node.js and the " +
			"runner (make lighthouse) answer FAILED_PRECONDITION, saying how to install it.",
		params: []Param{
			{Name: "mode", Type: String, Enum: []string{"navigation", "snapshot"}, Default: "navigation", Description: "navigation: reload and audit the load; snapshot: audit the page as it is"},
			{Name: "device", Type: String, Enum: []string{"desktop", "mobile"}, Default: "desktop", Description: "Form factor to score for (and to emulate during a navigation)"},
			{Name: "report", Type: String, Enum: []string{"json", "html"}, Description: "Also attach the full report in this format"},
		},
		build: func(a Args) (*browserv1.ToolRequest, error) {
			return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_LighthouseAudit{LighthouseAudit: &browserv1.LighthouseAudit{
				Mode: a.str("mode"), Device: a.str("device"), Report: a.str("report")}}}, nil
		},
	},
}
