// Package otelmcp adapts OpenTelemetry to mcp-go's tracing interfaces, so
// that an MCP request is a span of the global tracer provider whose parent
// comes from the caller's traceparent (HTTP header or _meta).
package otelmcp

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/sovereign-fleet/sovereign/services/gateway"

// Tracer returns a tracing.Tracer on the global tracer provider.
func Tracer() tracing.Tracer { return tracer{} }

// Propagator returns a tracing.Propagator on the global propagator.
func Propagator() tracing.Propagator { return headers{} }

// MetaPropagator returns a tracing.MetaPropagator (SEP-414 _meta keys) on
// the global propagator.
func MetaPropagator() tracing.MetaPropagator { return meta{} }

type tracer struct{}

func (tracer) Start(ctx context.Context, name string, kind tracing.SpanKind, attrs ...tracing.Attribute) (context.Context, tracing.Span) {
	ctx, s := otel.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(spanKind(kind)), trace.WithAttributes(convert(attrs)...))
	return ctx, span{s}
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

func convert(attrs []tracing.Attribute) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		out[i] = attribute.String(a.Key, a.Value)
	}
	return out
}

type span struct{ s trace.Span }

func (s span) SetAttributes(attrs ...tracing.Attribute) { s.s.SetAttributes(convert(attrs)...) }
func (s span) RecordError(err error)                    { s.s.RecordError(err) }
func (s span) End()                                     { s.s.End() }

func (s span) SetStatus(code tracing.StatusCode, description string) {
	switch code {
	case tracing.StatusOK:
		s.s.SetStatus(codes.Ok, description)
	case tracing.StatusError:
		s.s.SetStatus(codes.Error, description)
	}
}

type headers struct{}

func (headers) Inject(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

func (headers) Extract(ctx context.Context, h http.Header) context.Context {
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

func (meta) ExtractMeta(ctx context.Context, m *mcp.Meta) context.Context {
	if m == nil {
		return ctx
	}
	c := propagation.MapCarrier{}
	for k, v := range m.AdditionalFields {
		if s, ok := v.(string); ok {
			c[k] = s
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, c)
}
