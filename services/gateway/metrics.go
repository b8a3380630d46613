package gateway

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// toolBuckets span a quick read of the page (5 ms) to a call at the longest
// tool timeout plus a wait (120 s).
var toolBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

var (
	toolCallsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_tool_calls_total",
		Help: "MCP tool calls by tool and outcome (ok, error, timeout, denied: as their audit records say).",
	}, []string{"tool", "outcome"})
	toolCallSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sovereign_tool_call_duration_seconds",
		Help:    "How long MCP tool calls took, from the gateway receiving them to their result, by tool.",
		Buckets: toolBuckets,
	}, []string{"tool"})
)

// observeToolCall counts one finished tool call (auditTools calls it, so
// the outcome is the audit record's). Tool names are bounded: the MCP
// server answers unknown tools before any middleware runs.
func observeToolCall(tool string, outcome historyv1.Outcome, took time.Duration) {
	toolCallsTotal.WithLabelValues(tool, outcomeLabel(outcome)).Inc()
	toolCallSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

// outcomeLabel is "ok", "error", "timeout" or "denied".
func outcomeLabel(o historyv1.Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}
