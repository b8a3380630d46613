package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// traceMarker is on the test page and in its URL: no span may carry it.
const traceMarker = "TRACE-MARKER-page-content-7f3a"

// tracedCall is one tool call whose trace the test looks for in Jaeger.
type tracedCall struct {
	tool    string
	via     string // how the caller's context travelled: "header", "meta" or "" (none)
	gateway int    // 1 or 2
	traceID string // hex; "" when via is ""
	spanID  string // the caller's span: the parent of the gateway's root spans
}

// TestTracesInJaeger: every MCP tool call is one trace in a real Jaeger
// (built from the Go module proxy), with spans from the gateway and the
// browser worker that took part, linked parent to child, and an MCP
// client's own trace continued from its traceparent header (2025-11-25)
// or its params._meta (2026-07-28). Two gateways and two workers run as
// separate processes; the workers export OTLP/gRPC, the gateways
// OTLP/HTTP.
func TestTracesInJaeger(t *testing.T) {
	jaegerBin := jaegerBinary(t)
	start := time.Now()
	ctx := callCtx(t, 2*time.Minute)

	j, err := harness.StartJaeger(ctx, jaegerBin, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start jaeger: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("jaeger output:\n%s", tailLines(j.Output(), 40))
		}
		_ = j.Stop(5 * time.Second)
	})

	f := harness.NewFleet(binaries(t), t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the fleet's processes:\n%s", f.Logs())
		}
		f.Close()
	})
	if _, err := f.StartNATS(ctx); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	// Processes inherit the test's environment: set it per kind before
	// starting them. Spans leave each process within 100 ms.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+j.OTLPGRPC)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	// One session per worker: the two clients' sessions land on both.
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := f.StartWorker(ctx, fmt.Sprintf("w%d", i+1), 1)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("start worker: %v", err)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	for range 2 {
		if _, err := f.StartGateway(ctx); err != nil {
			t.Fatalf("start gateway: %v", err)
		}
	}
	t.Logf("jaeger and fleet up in %s", time.Since(start).Round(time.Millisecond))
	site := traceSite(t)
	var calls []tracedCall

	// A 2025-11-25 client on gateway 1 sends its context as the HTTP
	// traceparent header.
	legacy := initClient(t, ctx, f.Gateways[0].MCP)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"open", map[string]any{"url": site + "/?token=" + traceMarker}},
		{"get_title", nil},
		{"snapshot", nil},
	} {
		tc := newTracedCall(c.tool, "header", 1)
		legacy.Header.Set("traceparent", tc.traceparent())
		if title := strings.TrimSpace(tool(t, ctx, legacy, c.tool, c.args).Text()); c.tool == "get_title" && title != "Trace page" {
			t.Fatalf("get_title = %q, want Trace page", title)
		}
		calls = append(calls, tc)
	}
	// And one call with no context at all: the gateway starts the trace.
	legacy.Header.Del("traceparent")
	tool(t, ctx, legacy, "get_url", nil)
	calls = append(calls, tracedCall{tool: "get_url", gateway: 1})

	// A 2026-07-28 client on gateway 2 sends it in params._meta only.
	modern := traceClient(t, ctx, f.Gateways[1].MCP)
	var handle string
	for _, name := range []string{"open", "get_title", "snapshot"} {
		tc := newTracedCall(name, "meta", 2)
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = map[string]any{}
		if handle != "" {
			req.Params.Arguments = map[string]any{"session": handle}
		}
		if name == "open" {
			req.Params.Arguments = map[string]any{"url": site + "/frame?token=" + traceMarker}
		}
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": tc.traceparent()}}
		res, err := modern.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s over 2026-07-28: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s over 2026-07-28: tool error: %s", name, resultText(res))
		}
		if handle == "" {
			handle = handleOf(t, res)
		}
		calls = append(calls, tc)
	}
	t.Logf("%d tool calls made in %s", len(calls), time.Since(start).Round(time.Millisecond))

	// Each call with a context: its trace, complete once the worker's spans
	// are in.
	gatewayPIDs, workerPIDs := map[string]bool{}, map[string]bool{}
	for _, c := range calls {
		if c.traceID == "" {
			continue
		}
		t.Run(c.via+"_"+c.tool, func(t *testing.T) {
			tr := waitTrace(t, ctx, j, c)
			checkCallTrace(t, tr, c)
			for _, s := range tr.Spans {
				pid := tr.Processes[s.ProcessID].Tag("process.pid")
				switch tr.Service(s) {
				case "gateway":
					gatewayPIDs[pid] = true
				case "browser":
					workerPIDs[pid] = true
				}
			}
		})
	}
	if len(gatewayPIDs) != 2 || len(workerPIDs) != 2 {
		t.Errorf("spans came from gateway processes %v and worker processes %v; want two of each", keysOf(gatewayPIDs), keysOf(workerPIDs))
	}

	// One trace per tool call: every trace of the gateway holds at most
	// one tools/call span, and there are as many as calls were made.
	t.Run("one_trace_per_call", func(t *testing.T) {
		withCall := kittest.EventuallyValue(t, 30*time.Second, func() ([]harness.JaegerTrace, error) {
			traces, err := j.Traces(ctx, "gateway", 1000)
			if err != nil {
				t.Fatal(err)
			}
			var withCall []harness.JaegerTrace
			for _, tr := range traces {
				if n := countPrefix(tr, "tools/call "); n > 0 {
					withCall = append(withCall, tr)
					if n > 1 {
						t.Fatalf("trace %s holds %d tools/call spans", tr.TraceID, n)
					}
				}
			}
			return withCall, kittest.Check(len(withCall) >= len(calls), "%d traces hold a tools/call span; %d calls were made", len(withCall), len(calls))
		})
		if len(withCall) != len(calls) {
			t.Fatalf("%d traces hold a tools/call span; %d calls were made", len(withCall), len(calls))
		}
		// The call without a context: a trace of its own, rooted at the
		// gateway's HTTP server span, with the worker's spans in it.
		for _, tr := range withCall {
			if len(tr.Named("tools/call get_url")) == 0 {
				continue
			}
			c := tracedCall{tool: "get_url", gateway: 1, traceID: tr.TraceID}
			checkCallTrace(t, waitTrace(t, ctx, j, c), c)
			return
		}
		t.Error("no trace holds tools/call get_url")
	})
	t.Logf("checked in %s (from the start of Jaeger)", time.Since(start).Round(time.Millisecond))
}

// jaegerBinary builds jaeger once per machine (BuildJaeger caches it).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	start := time.Now()
	bin, err := harness.BuildJaeger(ctx, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		t.Logf(format, args...)
	})
	if err != nil {
		t.Fatalf("jaeger: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("jaeger ready in %s", d.Round(time.Second))
	}
	return bin
}

func newTracedCall(tool, via string, gateway int) tracedCall {
	var tid [16]byte
	var sid [8]byte
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return tracedCall{tool: tool, via: via, gateway: gateway, traceID: hex.EncodeToString(tid[:]), spanID: hex.EncodeToString(sid[:])}
}

// traceparent is the W3C header value of the caller's span (sampled).
func (c tracedCall) traceparent() string {
	return fmt.Sprintf("00-%s-%s-01", c.traceID, c.spanID)
}

// traceClient connects mcp-go's client at protocol 2026-07-28 (no
// credentials: the fleet has no tokens).
func traceClient(t *testing.T, ctx context.Context, url string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "sovereign-e2e-trace", Version: "0.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := c.ProtocolVersion(); got != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("mcp-go client negotiated %q, want %q", got, mcp.LATEST_PROTOCOL_VERSION)
	}
	return c
}

// traceSite serves a page with a frame; both show traceMarker.
func traceSite(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Trace page</title><h1>%s</h1><a href="/frame">frame</a><iframe src="/frame"></iframe>`, traceMarker)
	})
	mux.HandleFunc("/frame", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Trace frame</title><button>%s</button>`, traceMarker)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// traceOneCall makes one get_url call on c with a traceparent of its own
// and checks that its trace reaches Jaeger with the gateway's and a
// worker's spans.
func traceOneCall(t *testing.T, ctx context.Context, j *harness.Jaeger, c *harness.MCPClient) {
	t.Helper()
	call := newTracedCall("get_url", "header", 0)
	c.Header.Set("traceparent", call.traceparent())
	defer c.Header.Del("traceparent")
	if _, err := c.Tool(ctx, "get_url", nil); err != nil {
		t.Fatalf("traced call: %v", err)
	}
	tr := waitTrace(t, ctx, j, call)
	services := map[string]bool{}
	for _, s := range tr.Spans {
		services[tr.Service(s)] = true
	}
	if !services["gateway"] || !services["browser"] {
		t.Errorf("trace %s has spans of %v; want gateway and browser", call.traceID, keysOf(services))
	}
	t.Logf("trace %s in Jaeger: %d spans from %v", call.traceID, len(tr.Spans), keysOf(services))
}

// waitTrace polls Jaeger until the trace of c has the gateway's MCP and
// HTTP spans and the worker's tool span joined to the MCP span through the
// spans above it (spans arrive in batches, per process, as they end: the
// worker's bus server span ends after its tool span, and can come in the
// next batch).
func waitTrace(t *testing.T, ctx context.Context, j *harness.Jaeger, c tracedCall) *harness.JaegerTrace {
	t.Helper()
	complete := func(tr *harness.JaegerTrace) bool {
		mcpSpans, workers := tr.Named("tools/call "+c.tool), tr.Named("browser."+c.tool)
		if len(mcpSpans) == 0 || len(workers) == 0 || len(tr.Named("POST /mcp")) == 0 {
			return false
		}
		for _, name := range wantPageSpans[c.tool] {
			if len(tr.Named(name)) == 0 {
				return false
			}
		}
		return slices.ContainsFunc(ancestors(tr, workers[0]), func(s harness.JaegerSpan) bool { return s.SpanID == mcpSpans[0].SpanID })
	}
	return kittest.EventuallyValue(t, 30*time.Second, func() (*harness.JaegerTrace, error) {
		tr, err := j.Trace(ctx, c.traceID)
		if err != nil && err != harness.ErrNoTrace {
			t.Fatal(err)
		}
		if tr != nil && complete(tr) {
			return tr, nil
		}
		var names []string
		if tr != nil {
			for _, s := range tr.Spans {
				names = append(names, tr.Service(s)+":"+s.OperationName)
			}
		}
		return nil, fmt.Errorf("trace %s of %s (via %q) is incomplete in Jaeger: %v", c.traceID, c.tool, c.via, names)
	})
}

// wantPageSpans names the page spans under the worker's span of a tool.
var wantPageSpans = map[string][]string{"open": {"page.navigate", "page.load"}, "snapshot": {"page.snapshot"}}

// checkCallTrace checks one call's trace: the gateway's HTTP and MCP server
// spans, the bus client and server spans, the worker's tool span and its
// page spans, each a descendant of the one before, and the caller's span
// (if any) as the parent of the gateway's root spans.
func checkCallTrace(t *testing.T, tr *harness.JaegerTrace, c tracedCall) {
	t.Helper()
	services := map[string]bool{}
	for _, s := range tr.Spans {
		services[tr.Service(s)] = true
	}
	if !services["gateway"] || !services["browser"] {
		t.Errorf("trace %s has spans of %v; want gateway and browser", tr.TraceID, keysOf(services))
	}

	// The MCP server span: one per trace, named after the tool.
	if n := countPrefix(*tr, "tools/call "); n != 1 {
		t.Fatalf("trace %s has %d tools/call spans, want 1", tr.TraceID, n)
	}
	mcpSpan := tr.Named("tools/call " + c.tool)[0]
	wantTags(t, tr, mcpSpan, "gateway", map[string]string{
		"span.kind": "server", "mcp.method.name": "tools/call", "gen_ai.tool.name": c.tool,
		"gen_ai.operation.name": "execute_tool", "network.transport": "tcp",
	})
	if c.via == "meta" {
		wantTags(t, tr, mcpSpan, "gateway", map[string]string{"mcp.protocol.version": mcp.LATEST_PROTOCOL_VERSION})
	}

	// The HTTP server span that carried it (otelhttp).
	var httpSpan harness.JaegerSpan
	for _, s := range tr.Named("POST /mcp") {
		if s.Tag("gen_ai.tool.name") == c.tool {
			httpSpan = s
		}
	}
	if httpSpan.SpanID == "" {
		t.Fatalf("trace %s has no POST /mcp span with gen_ai.tool.name=%s", tr.TraceID, c.tool)
	}
	wantTags(t, tr, httpSpan, "gateway", map[string]string{
		"span.kind": "server", "http.request.method": "POST", "http.route": "/mcp",
		"http.response.status_code": "200", "url.path": "/mcp",
	})

	// Parents: the caller's span, then HTTP, then MCP, as the MCP semantic
	// conventions say (with _meta, the MCP span's parent is the caller's
	// span and it links the HTTP span).
	switch c.via {
	case "header":
		if got := httpSpan.Parent(); got != c.spanID {
			t.Errorf("POST /mcp parent = %q, want the caller's span %s", got, c.spanID)
		}
		if got := mcpSpan.Parent(); got != httpSpan.SpanID {
			t.Errorf("tools/call parent = %q, want POST /mcp %s", got, httpSpan.SpanID)
		}
	case "meta":
		if got := mcpSpan.Parent(); got != c.spanID {
			t.Errorf("tools/call parent = %q, want the caller's span %s from _meta", got, c.spanID)
		}
		if !slices.Contains(mcpSpan.Links(), httpSpan.SpanID) {
			t.Errorf("tools/call links %v, want POST /mcp %s", mcpSpan.Links(), httpSpan.SpanID)
		}
		if got := httpSpan.Parent(); got != c.spanID {
			t.Errorf("POST /mcp parent = %q, want the caller's span %s (from _meta, there being no header)", got, c.spanID)
		}
	default:
		if got := httpSpan.Parent(); got != "" {
			t.Errorf("POST /mcp parent = %q, want none: the call came with no trace context", got)
		}
		if got := mcpSpan.Parent(); got != httpSpan.SpanID {
			t.Errorf("tools/call parent = %q, want POST /mcp %s", got, httpSpan.SpanID)
		}
	}

	// The worker's tool span, reached from the MCP span through the bus.
	workers := tr.Named("browser." + c.tool)
	if len(workers) != 1 {
		t.Fatalf("trace %s has %d browser.%s spans, want 1", tr.TraceID, len(workers), c.tool)
	}
	worker := workers[0]
	if svc := tr.Service(worker); svc != "browser" {
		t.Errorf("browser.%s comes from %q, want browser", c.tool, svc)
	}
	chain := ancestors(tr, worker)
	var names []string
	for _, s := range chain {
		names = append(names, tr.Service(s)+":"+s.OperationName)
	}
	busServer, ok := first(chain, func(s harness.JaegerSpan) bool {
		return tr.Service(s) == "browser" && s.Tag("span.kind") == "server" && s.Tag("messaging.system") == "nats"
	})
	if !ok {
		t.Fatalf("the worker's span has no bus server span above it: %v", names)
	}
	busClient, ok := tr.Span(busServer.Parent())
	if !ok {
		t.Fatalf("the bus server span %s has no parent in the trace: %v", busServer.OperationName, names)
	}
	wantTags(t, tr, busClient, "gateway", map[string]string{
		"span.kind": "client", "messaging.system": "nats", "messaging.operation.type": "send",
		"messaging.destination.name": busServer.Tag("messaging.destination.name"),
	})
	wantTags(t, tr, busServer, "browser", map[string]string{"messaging.operation.type": "process"})
	if busClient.Tag("messaging.message.body.size") == "" || busClient.Tag("server.address") != "127.0.0.1" {
		t.Errorf("bus client span %s lacks body size or server address: %v", busClient.OperationName, busClient.Tags)
	}
	if !slices.ContainsFunc(chain, func(s harness.JaegerSpan) bool { return s.SpanID == mcpSpan.SpanID }) {
		t.Errorf("the worker's span does not descend from tools/call %s: %v", c.tool, names)
	}
	if root := chain[len(chain)-1]; root.Parent() != c.spanID {
		t.Errorf("the chain above browser.%s ends at %s whose parent is %q, want the caller's span %q: %v",
			c.tool, root.OperationName, root.Parent(), c.spanID, names)
	}

	// The page's actions under the worker's span.
	for _, name := range wantPageSpans[c.tool] {
		found := false
		for _, s := range tr.Named(name) {
			if slices.ContainsFunc(ancestors(tr, s), func(a harness.JaegerSpan) bool { return a.SpanID == worker.SpanID }) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s span under browser.%s", name, c.tool)
		}
	}

	// Nothing from the page or its URL, in any span or resource.
	for _, s := range tr.Spans {
		for _, tag := range append(s.Tags, tr.Processes[s.ProcessID].Tags...) {
			if v := fmt.Sprint(tag.Value); strings.Contains(v, traceMarker) || strings.Contains(v, "token=") {
				t.Errorf("%s:%s tag %s = %q carries page content or a URL", tr.Service(s), s.OperationName, tag.Key, v)
			}
		}
	}
}

// wantTags checks the service and tags of s.
func wantTags(t *testing.T, tr *harness.JaegerTrace, s harness.JaegerSpan, service string, tags map[string]string) {
	t.Helper()
	if got := tr.Service(s); got != service {
		t.Errorf("%s comes from %q, want %q", s.OperationName, got, service)
	}
	for k, want := range tags {
		if got := s.Tag(k); got != want {
			t.Errorf("%s (%s) tag %s = %q, want %q", s.OperationName, service, k, got, want)
		}
	}
}

// ancestors returns s and the spans above it in tr, nearest first.
func ancestors(tr *harness.JaegerTrace, s harness.JaegerSpan) []harness.JaegerSpan {
	out := []harness.JaegerSpan{s}
	for len(out) <= len(tr.Spans) {
		p, ok := tr.Span(out[len(out)-1].Parent())
		if !ok {
			break
		}
		out = append(out, p)
	}
	return out
}

func first(spans []harness.JaegerSpan, ok func(harness.JaegerSpan) bool) (harness.JaegerSpan, bool) {
	for _, s := range spans {
		if ok(s) {
			return s, true
		}
	}
	return harness.JaegerSpan{}, false
}

func countPrefix(tr harness.JaegerTrace, prefix string) int {
	n := 0
	for _, s := range tr.Spans {
		if strings.HasPrefix(s.OperationName, prefix) {
			n++
		}
	}
	return n
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
