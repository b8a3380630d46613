package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

func TestEnabled(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		endpoint, exporter, disabled string
		want                         bool
	}{
		{"unset", "", "", "", false},
		{"endpoint", "http://jaeger:4317", "", "", true},
		{"exporter none", "http://jaeger:4317", "none", "", false},
		{"sdk disabled", "http://jaeger:4317", "", "true", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tt.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_TRACES_EXPORTER", tt.exporter)
			t.Setenv("OTEL_SDK_DISABLED", tt.disabled)
			if got := Enabled(); got != tt.want {
				t.Fatalf("Enabled() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSetupBadProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	if _, err := Setup(context.Background(), "test"); err == nil {
		t.Fatal("Setup with a bad protocol succeeded")
	}
}

// TestSetupExports: with an OTLP/HTTP endpoint, spans arrive there with the
// service's resource.
func TestSetupExports(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")

	shutdown, err := Setup(context.Background(), "gateway")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.GetTracerProvider().Tracer("test").Start(context.Background(), "tools/call open")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown (flush): %v", err)
	}
	var req *collectortrace.ExportTraceServiceRequest
	select {
	case req = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing was exported")
	}
	if len(req.ResourceSpans) != 1 {
		t.Fatalf("%d resource spans, want 1", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	attrs := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
		if i, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
			attrs[kv.Key] = fmt.Sprint(i.IntValue)
		}
	}
	for key, want := range map[string]string{
		"service.name":                "gateway",
		"service.namespace":           Namespace,
		"process.pid":                 fmt.Sprint(os.Getpid()),
		"deployment.environment.name": "test",
	} {
		if attrs[key] != want {
			t.Errorf("resource %s = %q, want %q (all: %v)", key, attrs[key], want, attrs)
		}
	}
	for key := range attrs {
		if strings.HasPrefix(key, "process.command") {
			t.Errorf("resource has %s: a command line may hold secrets", key)
		}
	}
	if n := len(rs.ScopeSpans); n != 1 || rs.ScopeSpans[0].Spans[0].Name != "tools/call open" {
		t.Errorf("exported %v, want the one span", rs.ScopeSpans)
	}
}
