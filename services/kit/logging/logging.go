// Package logging sets up log/slog: text on a terminal, JSON elsewhere, with
// the trace and span ids of the context on every record.
package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Setup installs the default logger for service. SOVEREIGN_LOG_FORMAT
// (text|json) and SOVEREIGN_LOG_LEVEL (debug|info|warn|error) override the
// defaults (text on a terminal, JSON otherwise; info).
func Setup(service string) *slog.Logger {
	l := New(os.Stderr, service)
	slog.SetDefault(l)
	return l
}

// New returns a logger writing to w.
func New(w io.Writer, service string) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(os.Getenv("SOVEREIGN_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	format := os.Getenv("SOVEREIGN_LOG_FORMAT")
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "text"
		}
	}
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	l := slog.New(traceHandler{h})
	if service != "" {
		l = l.With("service", service)
	}
	return l
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// traceHandler adds trace_id and span_id from the record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(a)}
}
func (h traceHandler) WithGroup(n string) slog.Handler { return traceHandler{h.Handler.WithGroup(n)} }
