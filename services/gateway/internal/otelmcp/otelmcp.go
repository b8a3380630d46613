// Package otelmcp adapts OpenTelemetry to mcp-go's tracing interfaces,
// following the semantic conventions for MCP
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/): an MCP request
// is a SERVER span named after its method ("tools/call open") whose parent is
// the caller's trace context from params._meta (SEP-414) or, without one,
// the HTTP server span, which continues the HTTP traceparent header.
//
// The trace of a tool call is thus
//
//	caller's span (traceparent header or _meta)
//	├── POST /mcp                      HTTP server span (otelhttp)
//	└── tools/call open                MCP server span (a child of POST /mcp
//	    │                              without _meta; linked to it with _meta)
//	    └── sov.browser.w.<id>.call    bus client span, then the worker's spans
//
// Span attributes carry names, sizes and ids, never tool arguments or
// results.
package otelmcp

import (
	"context"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/tracing"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/sovereign-fleet/sovereign/services/gateway"

// Attribute names of the MCP and GenAI semantic conventions.
const (
	AttrMethod          = "mcp.method.name"
	AttrSessionID       = "mcp.session.id"
	AttrProtocolVersion = "mcp.protocol.version"
	AttrToolName        = "gen_ai.tool.name"
	AttrOperation       = "gen_ai.operation.name"
	AttrErrorType       = "error.type"
)

// mcp-go's own attribute names (server/tracing.go), mapped to the above.
var fromMCPGo = map[string]string{
	"mcp.method":           AttrMethod,
	"mcp.session.id":       AttrSessionID,
	"mcp.protocol.version": AttrProtocolVersion,
	"mcp.tool.name":        AttrToolName,
}

// toolErrorStatus is the status mcp-go gives a call whose result has
// isError set (server/tracing.go).
const toolErrorStatus = "tool returned error result"

// maxStatus bounds a span status description (a JSON-RPC error message).
const maxStatus = 256

// HTTP wraps the MCP endpoint in an HTTP server span (otelhttp, named
// "POST /mcp"), which continues the caller's traceparent header, or, when
// the request has none, the traceparent in its params._meta: a client that
// propagates only through _meta still finds the whole call in its trace.
// meta returns the request's params._meta, decoded once where the body was
// read (nil for none).
func HTTP(next http.Handler, meta func(*http.Request) map[string]any) http.Handler {
	h := otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), httpSpanKey{}, trace.SpanFromContext(r.Context()))
		next.ServeHTTP(w, r.WithContext(ctx))
	}), "mcp",
		// Without a provider, otelhttp takes the one of the span in the
		// request context: for a remote parent from _meta, a no-op one.
		otelhttp.WithTracerProvider(otel.GetTracerProvider()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("traceparent") == "" {
			if m := meta(r); len(m) > 0 {
				if ctx := extract(r.Context(), m); trace.SpanContextFromContext(ctx).IsRemote() {
					r = r.WithContext(ctx)
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// httpSpanKey is the context key of the HTTP server span HTTP started.
type httpSpanKey struct{}

func httpSpan(ctx context.Context) trace.Span {
	s, _ := ctx.Value(httpSpanKey{}).(trace.Span)
	return s
}

// extract reads W3C trace context from a _meta bag.
func extract(ctx context.Context, meta map[string]any) context.Context {
	c := propagation.MapCarrier{}
	for k, v := range meta {
		if s, ok := v.(string); ok {
			c[k] = s
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, c)
}

// Tracer returns a tracing.Tracer on the global tracer provider.
func Tracer() tracing.Tracer { return tracer{} }

// Propagator returns a tracing.Propagator on the global propagator.
func Propagator() tracing.Propagator { return headers{} }

// MetaPropagator returns a tracing.MetaPropagator (SEP-414 _meta keys) on
// the global propagator.
func MetaPropagator() tracing.MetaPropagator { return meta{} }

type tracer struct{}

// Start starts the span of one MCP message ("mcp.<method>" from mcp-go).
// mcp-go's second span around the tool handler ("tool.<name>") is not
// made: the MCP server span already is the tool execution span of the
// conventions, so Start returns a span that records nothing for it.
func (tracer) Start(ctx context.Context, name string, kind tracing.SpanKind, attrs ...tracing.Attribute) (context.Context, tracing.Span) {
	if kind == tracing.SpanKindInternal && strings.HasPrefix(name, "tool.") {
		return ctx, noSpan{}
	}
	method := strings.TrimPrefix(name, "mcp.")
	kv := append(convert(attrs), attribute.String(AttrMethod, method))
	hs := httpSpan(ctx)
	opts := []trace.SpanStartOption{trace.WithSpanKind(spanKind(kind))}
	if hs != nil {
		kv = append(kv, attribute.String("network.transport", "tcp"), attribute.String("network.protocol.name", "http"))
		// The parent came from _meta: link the HTTP request that carried it.
		if hsc := hs.SpanContext(); hsc.IsValid() && !hsc.Equal(trace.SpanContextFromContext(ctx)) {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: hsc}))
		}
	}
	opts = append(opts, trace.WithAttributes(kv...))
	ctx, s := otel.Tracer(tracerName).Start(ctx, method, opts...)
	sp := &span{s: s, method: method, http: hs}
	return tracing.ContextWithSpan(ctx, sp), sp
}

func spanKind(k tracing.SpanKind) trace.SpanKind {
	switch k {
	case tracing.SpanKindServer:
		return trace.SpanKindServer
	case tracing.SpanKindClient:
		return trace.SpanKindClient
	case tracing.SpanKindInternal:
		return trace.SpanKindInternal
	}
	return trace.SpanKindUnspecified
}

// convert maps mcp-go's attributes to the conventions' names.
func convert(attrs []tracing.Attribute) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		key := a.Key
		if k, ok := fromMCPGo[key]; ok {
			key = k
		}
		if key == AttrMethod {
			continue // Start sets it from the span name
		}
		out = append(out, attribute.String(key, a.Value))
	}
	return out
}

// span is an MCP server span. When the tool name becomes known it is named
// "tools/call <tool>" and marked as a tool execution; the HTTP server span
// gets the tool name too, so that it is found by tool as well.
type span struct {
	s      trace.Span
	method string
	http   trace.Span // nil outside HTTP
}

func (s *span) SetAttributes(attrs ...tracing.Attribute) {
	kv := convert(attrs)
	for _, a := range kv {
		if a.Key == AttrToolName {
			tool := a.Value.AsString()
			s.s.SetName(s.method + " " + tool)
			kv = append(kv, attribute.String(AttrOperation, "execute_tool"))
			if s.http != nil {
				s.http.SetAttributes(attribute.String(AttrToolName, tool))
			}
			break
		}
	}
	s.s.SetAttributes(kv...)
}

// RecordError marks the span failed without the error's text, which may
// quote what the caller sent.
func (s *span) RecordError(error) {
	s.s.SetAttributes(attribute.String(AttrErrorType, "_OTHER"))
}

func (s *span) End() { s.s.End() }

func (s *span) SetStatus(code tracing.StatusCode, description string) {
	switch code {
	case tracing.StatusOK:
		s.s.SetStatus(codes.Ok, "")
	case tracing.StatusError:
		if description == toolErrorStatus {
			s.s.SetAttributes(attribute.String(AttrErrorType, "tool_error"))
		}
		if len(description) > maxStatus {
			description = description[:maxStatus] + "…"
		}
		s.s.SetStatus(codes.Error, description)
	}
}

// noSpan is a span that records nothing.
type noSpan struct{}

func (noSpan) SetAttributes(...tracing.Attribute)   {}
func (noSpan) RecordError(error)                    {}
func (noSpan) SetStatus(tracing.StatusCode, string) {}
func (noSpan) End()                                 {}

type headers struct{}

func (headers) Inject(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract reads the traceparent header, unless HTTP already did: then the
// context holds the HTTP server span (a child of that header), which must
// stay the parent of the MCP span.
func (headers) Extract(ctx context.Context, h http.Header) context.Context {
	if httpSpan(ctx) != nil {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
}

type meta struct{}

func (meta) InjectMeta(ctx context.Context, m *mcp.Meta) *mcp.Meta {
	c := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, c)
	if len(c) == 0 {
		return m
	}
	if m == nil {
		m = &mcp.Meta{}
	}
	if m.AdditionalFields == nil {
		m.AdditionalFields = map[string]any{}
	}
	for k, v := range c {
		m.AdditionalFields[k] = v
	}
	return m
}

// ExtractMeta makes the traceparent in _meta the parent of the MCP span,
// as the conventions say, even over the HTTP server span.
func (meta) ExtractMeta(ctx context.Context, m *mcp.Meta) context.Context {
	if m == nil {
		return ctx
	}
	return extract(ctx, m.AdditionalFields)
}
