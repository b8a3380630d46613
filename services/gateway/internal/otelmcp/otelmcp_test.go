package otelmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// secret is sent as a tool argument; no span may carry it.
const secret = "hunter2-do-not-trace"

// newServer serves an MCP server with the adapters installed behind HTTP,
// as the gateway mounts them, and returns its URL.
func newServer(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("otelmcp-test", "0.0.0",
		server.WithToolCapabilities(false),
		server.WithTracer(Tracer()),
		server.WithPropagator(Propagator()),
		server.WithMetaPropagator(MetaPropagator()),
	)
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, work := otel.Tracer("test").Start(ctx, "work") // what the tool does: its parent must be the MCP span
		work.End()
		return mcp.NewToolResultText("ok"), nil
	})
	s.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("no such page"), nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", HTTP(server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp")), bodyMeta))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// connect starts an mcp-go client at protocol (sessions before 2026-07-28)
// that sends header with every request.
func connect(t *testing.T, url, protocol string, header map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(header))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(protocol))
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func call(t *testing.T, c *client.Client, name string, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = map[string]any{"text": secret}
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// recorder installs a span recorder as the global tracer provider.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevP := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevP) })
	return rec
}

// caller returns a sampled span context as an MCP client would send it.
func caller(t *testing.T, n byte) (trace.SpanContext, string) {
	t.Helper()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
		SpanID:     trace.SpanID{0, 0xf0, 0x67, n, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return sc, fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// spansOf returns the ended spans of trace id by name.
func spansOf(rec *tracetest.SpanRecorder, id trace.TraceID) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out[s.Name()] = s
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func TestTraceOfToolCall(t *testing.T) {
	rec := recorder(t)
	url := newServer(t)

	for _, tt := range []struct {
		name     string
		protocol string
		header   bool // the caller's context in the traceparent header
		meta     bool // and/or in params._meta
		// whether the MCP span's parent is the HTTP span (else the caller's)
		underHTTP bool
	}{
		{name: "header", protocol: "2025-11-25", header: true, underHTTP: true},
		{name: "meta", protocol: mcp.LATEST_PROTOCOL_VERSION, meta: true},
		{name: "header_and_meta", protocol: mcp.LATEST_PROTOCOL_VERSION, header: true, meta: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc, tp := caller(t, byte(len(tt.name)))
			header := map[string]string{}
			if tt.header {
				header["traceparent"] = tp
			}
			var meta map[string]any
			if tt.meta {
				meta = map[string]any{"traceparent": tp}
			}
			c := connect(t, url, tt.protocol, header)
			call(t, c, "echo", meta)

			spans := spansOf(rec, sc.TraceID())
			mcpSpan, ok := spans["tools/call echo"]
			if !ok {
				t.Fatalf("no span tools/call echo in the caller's trace; it has %v", keys(spans))
			}
			if _, ok := spans["tool.echo"]; ok {
				t.Errorf("mcp-go's tool.echo span was recorded; the MCP server span is the tool span")
			}
			if mcpSpan.SpanKind() != trace.SpanKindServer {
				t.Errorf("tools/call echo kind = %v, want server", mcpSpan.SpanKind())
			}
			for key, want := range map[string]string{
				AttrMethod: "tools/call", AttrToolName: "echo", AttrOperation: "execute_tool",
				"network.transport": "tcp", "network.protocol.name": "http",
			} {
				if got := attr(mcpSpan, key); got != want {
					t.Errorf("tools/call echo %s = %q, want %q", key, got, want)
				}
			}
			if got := attr(mcpSpan, AttrProtocolVersion); got != tt.protocol {
				t.Errorf("tools/call echo %s = %q, want %q", AttrProtocolVersion, got, tt.protocol)
			}
			if tt.protocol != mcp.LATEST_PROTOCOL_VERSION && attr(mcpSpan, AttrSessionID) == "" {
				t.Errorf("tools/call echo has no %s", AttrSessionID)
			}

			// Every HTTP request of the client carried the header, so
			// find the one of the tool call: the span the MCP span names
			// as parent or link.
			// It ends after the client has its reply: wait for it.
			httpSpan := waitSpan(t, rec, 0, "POST /mcp span with "+AttrToolName+"=echo in the caller's trace", func(s sdktrace.ReadOnlySpan) bool {
				return s.Name() == "POST /mcp" && attr(s, AttrToolName) == "echo" && s.SpanContext().TraceID() == sc.TraceID()
			})
			if got := httpSpan.Parent().SpanID(); got != sc.SpanID() {
				t.Errorf("POST /mcp parent = %s, want the caller's span %s", got, sc.SpanID())
			}
			if attr(httpSpan, "http.request.method") != "POST" || attr(httpSpan, "http.response.status_code") != "200" {
				t.Errorf("POST /mcp lacks otelhttp's attributes: %v", httpSpan.Attributes())
			}
			if tt.underHTTP {
				if got := mcpSpan.Parent().SpanID(); got != httpSpan.SpanContext().SpanID() {
					t.Errorf("tools/call echo parent = %s, want POST /mcp %s", got, httpSpan.SpanContext().SpanID())
				}
				if len(mcpSpan.Links()) != 0 {
					t.Errorf("tools/call echo links %v; want none under its HTTP span", mcpSpan.Links())
				}
			} else {
				if got := mcpSpan.Parent().SpanID(); got != sc.SpanID() {
					t.Errorf("tools/call echo parent = %s, want the _meta span %s", got, sc.SpanID())
				}
				if l := mcpSpan.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != httpSpan.SpanContext().SpanID() {
					t.Errorf("tools/call echo links %v, want the HTTP span %s", l, httpSpan.SpanContext().SpanID())
				}
			}
			if work, ok := spans["work"]; !ok || work.Parent().SpanID() != mcpSpan.SpanContext().SpanID() {
				t.Errorf("the tool's own span is not a child of tools/call echo (found %v)", ok)
			}
		})
	}

	t.Run("no_caller_context", func(t *testing.T) {
		c := connect(t, url, mcp.LATEST_PROTOCOL_VERSION, nil)
		before := len(rec.Ended())
		call(t, c, "echo", nil)
		mcpSpan := waitSpan(t, rec, before, "tools/call echo span", func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "tools/call echo" })
		httpSpan := waitSpan(t, rec, before, "POST /mcp span, the parent of tools/call echo", func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID() == mcpSpan.Parent().SpanID() })
		if httpSpan.Parent().IsValid() {
			t.Errorf("POST /mcp has parent %s; want a new trace", httpSpan.Parent().SpanID())
		}
		if httpSpan.Name() != "POST /mcp" {
			t.Errorf("tools/call echo is a child of %s, want POST /mcp", httpSpan.Name())
		}
	})

	t.Run("tool_error", func(t *testing.T) {
		c := connect(t, url, mcp.LATEST_PROTOCOL_VERSION, nil)
		before := len(rec.Ended())
		if res := call(t, c, "fail", nil); !res.IsError {
			t.Fatal("fail did not fail")
		}
		for _, s := range rec.Ended()[before:] {
			if s.Name() != "tools/call fail" {
				continue
			}
			if s.Status().Code != codes.Error || attr(s, AttrErrorType) != "tool_error" {
				t.Errorf("tools/call fail: status %v, %s %q; want Error and tool_error", s.Status(), AttrErrorType, attr(s, AttrErrorType))
			}
			return
		}
		t.Fatalf("no tools/call fail span among %v", names(rec.Ended()[before:]))
	})

	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.Emit(), secret) {
				t.Errorf("span %s attribute %s carries a tool argument: %s", s.Name(), a.Key, a.Value.Emit())
			}
		}
		if strings.Contains(s.Status().Description, secret) {
			t.Errorf("span %s status carries a tool argument", s.Name())
		}
	}
}

// waitSpan returns the first span ended after the first from that match
// accepts, waiting up to 30 seconds for it; what names it in a failure.
func waitSpan(t *testing.T, rec *tracetest.SpanRecorder, from int, what string, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() (sdktrace.ReadOnlySpan, error) {
		ended := rec.Ended()[from:]
		for _, s := range ended {
			if match(s) {
				return s, nil
			}
		}
		return nil, fmt.Errorf("no %s among the spans ended: %v", what, names(ended))
	})
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// bodyMeta decodes the request's params._meta as the gateway's edge does
// once per request, and puts the body back.
func bodyMeta(r *http.Request) map[string]any {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	return msg.Params.Meta
}
