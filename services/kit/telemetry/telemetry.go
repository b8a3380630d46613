// Package telemetry configures OpenTelemetry tracing from the standard OTEL_*
// variables only. With no exporter configured it installs the W3C
// propagators and nothing else, so tracing costs next to nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Namespace is the service.namespace of every Sovereign service.
const Namespace = "sovereign"

// Setup installs the global tracer provider and propagator for service and
// returns a function that flushes and stops it.
//
// Traces are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_TRACES_EXPORTER is not
// "none"; OTEL_EXPORTER_OTLP_PROTOCOL picks grpc (default) or http/protobuf.
// OTEL_SERVICE_NAME, when set, wins over service. The resource also says
// service.namespace (sovereign), host.name and process.pid; the other
// OTEL_* variables of the SDK (OTEL_BSP_*, OTEL_TRACES_SAMPLER, …) apply as
// the specification says.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if !Enabled() {
		return noop, nil
	}
	var exp sdktrace.SpanExporter
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return noop, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: use grpc or http/protobuf", proto)
	}
	if err != nil {
		return noop, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceNamespace(Namespace)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return noop, fmt.Errorf("otel resource: %w", err)
	}
	// Which replica: host and pid (not the command line, whose flags may
	// hold secrets).
	if where, _ := resource.New(ctx, resource.WithHost(), resource.WithProcessPID()); where != nil {
		if merged, err := resource.Merge(res, where); err == nil {
			res = merged
		}
	}
	// resource.Default reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES;
	// merge them last so they win.
	if env, _ := resource.New(ctx, resource.WithFromEnv()); env != nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Enabled reports whether the OTEL_* variables ask for trace export.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}
