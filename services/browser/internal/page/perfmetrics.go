package page

import (
	"context"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// webVitals is what page.js's webVitals says.
type webVitals struct {
	TTFB       float64 `json:"ttfb_ms,omitempty"`
	FCP        float64 `json:"fcp_ms,omitempty"`
	DCL        float64 `json:"dom_content_loaded_ms,omitempty"`
	Load       float64 `json:"load_ms,omitempty"`
	LCP        float64 `json:"lcp_ms,omitempty"`
	LCPElement string  `json:"lcp_element,omitempty"`
	CLS        float64 `json:"cls"`
	Shifts     int     `json:"layout_shifts"`
}

// runtimeMetric is a Performance.getMetrics value the tool shows, with
// its label; durations are seconds, sizes bytes.
type runtimeMetric struct{ name, label, unit string }

// stateMetrics are what the page holds now; counterMetrics count from
// when the tab enabled the Performance domain (its first
// performance_metrics call), so the first call leaves them out.
var (
	stateMetrics = []runtimeMetric{
		{"Nodes", "DOM nodes", ""}, {"Documents", "documents", ""}, {"Frames", "frames", ""},
		{"JSEventListeners", "event listeners", ""}, {"JSHeapUsedSize", "JS heap used", "bytes"},
		{"JSHeapTotalSize", "JS heap total", "bytes"},
	}
	counterMetrics = []runtimeMetric{
		{"LayoutCount", "layouts", ""}, {"RecalcStyleCount", "style recalcs", ""}, {"LayoutDuration", "layout time", "s"},
		{"RecalcStyleDuration", "style time", "s"}, {"ScriptDuration", "script time", "s"}, {"TaskDuration", "task time", "s"},
	}
)

// formatMetrics returns the metrics of list that values has, as text, and
// adds them to shown.
func formatMetrics(list []runtimeMetric, values, shown map[string]float64) string {
	var parts []string
	for _, r := range list {
		x, ok := values[r.name]
		if !ok {
			continue
		}
		shown[r.name] = x
		switch r.unit {
		case "bytes":
			parts = append(parts, fmt.Sprintf("%s %s", r.label, fmtBytes(int64(x))))
		case "s":
			parts = append(parts, fmt.Sprintf("%s %s", r.label, fmtMS(roundMS(x*1000))))
		default:
			parts = append(parts, fmt.Sprintf("%s %d", r.label, int64(x)))
		}
	}
	return strings.Join(parts, ", ")
}

// metrics is the performance_metrics tool: Chromium's runtime
// counters and the page's Web Vitals, without a trace.
func (p *perfTools) metrics(ctx context.Context) (*browserv1.ToolResult, error) {
	counting := p.metricsOn
	if !counting {
		if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
			return nil, fmt.Errorf("enable performance metrics: %w", err)
		}
		p.metricsOn = true
	}
	m, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return nil, fmt.Errorf("read performance metrics: %w", err)
	}
	v, err := jsWebVitals(ctx, p.tab)
	if err != nil {
		return nil, fmt.Errorf("read the web vitals: %w", err)
	}
	v.LCPElement = clipTo(v.LCPElement, 120)
	values := map[string]float64{}
	for _, x := range m.Metrics {
		values[x.Name] = x.Value
	}
	shown := map[string]float64{}
	state := formatMetrics(stateMetrics, values, shown)
	u, _ := p.tab.currentURL(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "Performance metrics of %s:\n- web vitals:", clipTo(u, maxURL))
	for _, m := range []struct {
		name string
		v    float64
	}{{"TTFB", v.TTFB}, {"FCP", v.FCP}, {"DOMContentLoaded", v.DCL}, {"load", v.Load}, {"LCP", v.LCP}} {
		if m.v > 0 {
			fmt.Fprintf(&b, " %s %s,", m.name, fmtMS(roundMS(m.v)))
		}
	}
	fmt.Fprintf(&b, " CLS %g (layout shifts without input: %d)", v.CLS, v.Shifts)
	if v.LCPElement != "" {
		fmt.Fprintf(&b, "; the LCP element is %s", v.LCPElement)
	}
	fmt.Fprintf(&b, "\n- runtime: %s", state)
	if counting {
		fmt.Fprintf(&b, "\n- since the first performance_metrics call in this tab: %s", formatMetrics(counterMetrics, values, shown))
	} else {
		b.WriteString("\n- layout, style and script counters start now: call performance_metrics again after acting on the page to see them")
	}
	b.WriteString("\n(For long tasks, main-thread time and slow requests, record a trace with performance_start and performance_stop.)")
	res := textResult("%s", b.String())
	SetStructured(res, "web_vitals", v)
	SetStructured(res, "metrics", shown)
	return res, nil
}
