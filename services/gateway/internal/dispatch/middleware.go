package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// Recover turns a panic in a handler into an error result (and a log line
// with the stack) instead of a broken response.
func Recover(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (res *Result) {
			defer func() {
				if p := recover(); p != nil {
					log.ErrorContext(ctx, "tool panic", "tool", c.Tool, "panic", p, "stack", string(debug.Stack()))
					res = Errorf("%s: internal error: %v", c.Tool, p)
				}
			}()
			return next(ctx, c)
		}
	}
}

// Publisher takes audit records (kit/audit's publisher).
type Publisher interface{ Publish(audit.Record) }

// Audit logs every call (who as a digest prefix, what, how long, the error
// of a failed one), counts it in the metrics and publishes its audit
// record: the arguments and result, redacted, for the history service.
// The record's facts come from the result the handler returned.
func Audit(pub Publisher, log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, c *Call) *Result {
			start := time.Now()
			res := next(ctx, c)
			if res.Input != nil {
				return res // asks the client for input; its retry is the call recorded
			}
			took := time.Since(start)
			attrs := []any{"tool", c.Tool, "caller", CallerLabel(c.Caller.ID), "duration", took.Round(time.Millisecond).String()}
			outcome, text := historyv1.Outcome_OUTCOME_OK, ""
			if res.IsError {
				text = res.TextContent()
				log.InfoContext(ctx, "tool call returned an error", append(attrs, "error", text)...)
				outcome = historyv1.Outcome_OUTCOME_ERROR
				if res.Outcome != historyv1.Outcome_OUTCOME_UNSPECIFIED {
					outcome = res.Outcome
				}
			} else {
				log.InfoContext(ctx, "tool call", attrs...)
				text = auditText(res)
			}
			toolCallsTotal.WithLabelValues(c.Tool, outcomeLabel(outcome)).Inc()
			toolCallSeconds.WithLabelValues(c.Tool).Observe(took.Seconds())
			if pub != nil {
				pub.Publish(audit.Record{
					Start:          start,
					Duration:       took,
					Caller:         c.Caller.Name,
					Client:         c.Client,
					MCPSession:     c.MCPSession,
					BrowserSession: res.BrowserSession,
					Tool:           c.Tool,
					Arguments:      AuditArguments(c.Args),
					Result:         text,
					Outcome:        outcome,
					HideArguments:  res.Hide,
					Trace:          trace.SpanContextFromContext(ctx),
					Approval:       res.Approval,
				})
			}
			return res
		}
	}
}

// CallerLabel shortens a caller identity for logs and display: never a
// credential, and never a key of what the caller owns (two callers may
// share a label; OwnerDigest is the key).
func CallerLabel(caller string) string {
	c := strings.TrimPrefix(caller, "sha256:")
	return c[:min(len(c), 12)]
}

// OwnerDigest is the opaque owner that keys what a caller owns outside
// the gateway (the browser workers' saved storage, checkpoints): the hex
// SHA-256 of its full identity (Caller.ID), so that no worker log or
// checkpoint carries a raw token id and no two callers share it.
func OwnerDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// MaxAuditArgument is the longest string argument an audit record keeps
// whole; longer ones are clipped and prefixed with their size.
const MaxAuditArgument = 64 << 10

// AuditArguments renders a call's arguments as JSON without the session
// handle: a handle is a bearer of the browser session and never leaves the
// gateway's memory and KV (the record names the browser session instead).
// The secrets of the login tools (catalog.SecretArguments, a bunker URL's
// secret) are hidden, and huge strings clipped.
func AuditArguments(args map[string]any) []byte {
	m := catalog.HideSecrets(args, audit.Hidden)
	m = clipArguments(m)
	if _, has := m[catalog.SessionParam]; has {
		c := make(map[string]any, len(m))
		for k, v := range m {
			if k != catalog.SessionParam {
				c[k] = v
			}
		}
		m = c
	}
	b, err := json.Marshal(m)
	if err != nil || string(b) == "null" {
		return []byte("{}")
	}
	return b
}

// clipArguments returns args with every string longer than
// MaxAuditArgument cut to that length, copying the map only when it
// changes: the record keeps a few thousand characters anyway, and a huge
// argument (an fs_write content) would be marshalled and redacted whole.
func clipArguments(args map[string]any) map[string]any {
	var out map[string]any
	for k, v := range args {
		s, ok := v.(string)
		if !ok || len(s) <= MaxAuditArgument {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(args))
			for k, v := range args {
				out[k] = v
			}
		}
		n := MaxAuditArgument
		for n > 0 && !utf8.RuneStart(s[n]) { // not inside a character
			n--
		}
		out[k] = fmt.Sprintf("[%d bytes, clipped for the audit trail] %s", len(s), s[:n])
	}
	if out == nil {
		return args
	}
	return out
}

// auditText is a successful result as the trail keeps it: its text parts
// and a size note for each image.
func auditText(r *Result) string {
	var b strings.Builder
	for _, p := range r.Parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if p.Data != nil && p.Name != "" {
			fmt.Fprintf(&b, "[file %s %s, %d bytes]", p.Name, p.MIME, len(p.Data))
		} else if p.Data != nil {
			fmt.Fprintf(&b, "[image %s, %d bytes]", p.MIME, len(p.Data))
		} else {
			b.WriteString(p.Text)
		}
		if b.Len() > audit.MaxResultChars*4 {
			break
		}
	}
	return b.String()
}

// toolBuckets span a quick read of the page (5 ms) to a call at the longest
// tool timeout plus a wait (120 s).
var toolBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

var (
	toolCallsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_tool_calls_total",
		Help: "Tool calls by tool and outcome (ok, error, timeout, denied: as their audit records say).",
	}, []string{"tool", "outcome"})
	toolCallSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sovereign_tool_call_duration_seconds",
		Help:    "How long tool calls took, from the gateway receiving them to their result, by tool.",
		Buckets: toolBuckets,
	}, []string{"tool"})
)

// outcomeLabel is "ok", "error", "timeout" or "denied".
func outcomeLabel(o historyv1.Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}
