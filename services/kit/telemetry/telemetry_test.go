package telemetry

import (
	"context"
	"testing"
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
