package sovereign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// startUp runs `sovereign up` in-process for one test, on ports the
// system picks (:0), and returns where MCP and NATS are served once MCP is
// ready, read from up's --addr-file: no port is picked before up binds it.
func startUp(t *testing.T, extra ...string) (listen, natsListen, dir string) {
	t.Helper()
	dir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	var upErr error
	go func() {
		defer close(ended)
		upErr = Command(ctx, "up", append([]string{"--listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--addr-file", addrFile(dir),
			"--data-dir", dir, "--workers", "1", "--max-sessions", "2", "--allow-private"}, extra...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
			if upErr != nil {
				t.Errorf("up returned %v", upErr)
			}
		case <-time.After(30 * time.Second):
			t.Error("up did not stop within 30s of its context ending")
		}
	})
	a := kittest.EventuallyValue(t, 60*time.Second, func() (upAddresses, error) {
		select {
		case <-ended:
			t.Fatalf("up returned before serving: %v", upErr)
		default:
		}
		return readAddrFile(dir)
	})
	mcp, err := url.Parse(a.MCP)
	if err != nil || mcp.Host == "" {
		t.Fatalf("addr file: mcp %q: %v", a.MCP, err)
	}
	return mcp.Host, strings.TrimPrefix(a.NATS, "nats://"), dir
}

// addrFile is where startUp's up writes its addresses.
func addrFile(dir string) string { return filepath.Join(dir, "addr.json") }

// upAddresses is what up writes to --addr-file.
type upAddresses struct {
	MCP, Console, NATS string
}

// consoleURL is the console's URL ("http://127.0.0.1:port/") of the up
// that startUp started with data dir dir.
func consoleURL(t *testing.T, dir string) string {
	t.Helper()
	a, err := readAddrFile(dir)
	if err != nil || a.Console == "" {
		t.Fatalf("the console's address: %+v, %v", a, err)
	}
	return a.Console
}

// readAddrFile reads the --addr-file of the up started with data dir dir.
func readAddrFile(dir string) (upAddresses, error) {
	var a upAddresses
	b, err := os.ReadFile(addrFile(dir))
	if err == nil {
		err = json.Unmarshal(b, &a)
	}
	return a, err
}

// mcpSession connects an mcp-go client (protocol 2025-11-25) to listen.
func mcpSession(t *testing.T, listen string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP("http://" + listen + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "up-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// callText calls a tool and returns its text, failing the test on an error.
func callText(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s returned an error: %s", tool, text)
	}
	return text
}

// TestUp runs `sovereign up` in-process and browses through it with an MCP
// client over HTTP, as a new user would after `make run`.
func TestUp(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Hello fleet</title><button>Go</button>`)
	}))
	defer page.Close()
	listen, natsListen, dir := startUp(t)

	// A second `up` on the same NATS port fails with advice, not a hang.
	err := Command(context.Background(), "up", []string{"--listen", "127.0.0.1:0", "--nats-listen", natsListen, "--data-dir", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("second up on a busy NATS port = %v, want advice naming --nats-listen", err)
	}

	c := mcpSession(t, listen)
	for _, step := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"open", map[string]any{"url": page.URL}, "Hello fleet"},
		{"get_title", nil, "Hello fleet"},
		{"snapshot", nil, `button "Go" [ref=e`},
		// The signer runs inside up (NIP-06 vector key, read-only).
		{"login", map[string]any{"method": "readonly", "pubkey_hex": "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"}, "npub1zutzeysacnf9rru6zqwmxd54mud0k44tst6l70ja5mhv8jjumytsd2x7nu"},
		{"login_status", nil, "readonly"},
	} {
		if got := callText(t, c, step.tool, step.args); !strings.Contains(got, step.want) {
			t.Fatalf("%s = %q, want it to contain %q", step.tool, got, step.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Fatalf("JetStream store not under the data dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.db")); err != nil {
		t.Fatalf("the SQLite history is not under the data dir: %v", err)
	}

	// The operator sees the three calls with `sovereign audit`.
	var out strings.Builder
	kittest.Eventually(t, 30*time.Second, func() error {
		out.Reset()
		if err := auditCmd(context.Background(), []string{"--nats-url", "nats://" + natsListen, "--json"}, &out); err != nil {
			t.Fatalf("sovereign audit: %v", err)
		}
		return kittest.Check(strings.Count(out.String(), "\n") >= 3, "sovereign audit --json printed fewer than 3 records:\n%s", out.String())
	})
	for _, want := range []string{`"tool":"open"`, `"tool":"get_title"`, `"tool":"snapshot"`, `"client":"up-test 1"`, page.URL} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sovereign audit --json lacks %s:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := auditCmd(context.Background(), []string{"--nats-url", "nats://" + natsListen, "--tool", "get_title"}, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[1], "Hello fleet") {
		t.Errorf("sovereign audit --tool get_title printed:\n%s", out.String())
	}
	out.Reset()
	if err := auditCmd(context.Background(), []string{"--nats-url", "nats://" + natsListen, "--stats"}, &out); err != nil || !strings.Contains(out.String(), "backlog") {
		t.Errorf("sovereign audit --stats = %v:\n%s", err, out.String())
	}
	if err := auditCmd(context.Background(), []string{"--nats-url", "nats://" + natsListen, "--text", "ab"}, &out); err == nil || !strings.Contains(err.Error(), "at least 3") {
		t.Errorf("a two-letter search = %v, want the minimum named", err)
	}

	// --follow prints the latest records, then a call made afterwards.
	fctx, stop := context.WithCancel(context.Background())
	followed := &syncBuilder{}
	done := make(chan error, 1)
	go func() {
		done <- auditCmd(fctx, []string{"--nats-url", "nats://" + natsListen, "--follow", "--poll", "50ms", "--json"}, followed)
	}()
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(strings.Contains(followed.String(), `"tool":"snapshot"`), "--follow has not printed the latest records:\n%s", followed.String())
	})
	callText(t, c, "get_url", nil)
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(strings.Contains(followed.String(), `"tool":"get_url"`), "--follow has not printed the call made after it started:\n%s", followed.String())
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("sovereign audit --follow: %v", err)
	}
	if got := followed.String(); !strings.Contains(got, `"tool":"get_url"`) || strings.Count(got, `"tool":"get_url"`) != 1 {
		t.Errorf("--follow printed:\n%s", got)
	}
}

// syncBuilder is a strings.Builder safe for one writer and one reader.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOneTrace: one MCP tool call is one trace — the gateway's span, the
// bus client and server spans, and the worker's browser span.
func TestOneTrace(t *testing.T) {
	rec, tp := recordSpans()
	listen, _, _ := startUp(t)
	c := mcpSession(t, listen)
	callText(t, c, "get_title", nil) // opens the browser session; the next call is the one checked
	before := len(rec.Ended())
	callText(t, c, "get_title", nil)
	_ = tp.ForceFlush(context.Background())

	// Spans are recorded as they end, and some end after the client has
	// its answer (the bus server span after its reply is sent, the HTTP
	// server span after the response is written): read them until the
	// trace is whole.
	var inTrace map[string]bool
	kittest.Eventually(t, 30*time.Second, func() error {
		ended := rec.Ended()[before:]
		var worker sdktrace.ReadOnlySpan
		for _, s := range ended {
			if s.Name() == "browser.get_title" {
				worker = s
			}
		}
		if worker == nil {
			return fmt.Errorf("no browser.get_title span among %v", names(ended))
		}
		inTrace = map[string]bool{}
		for _, s := range ended {
			if s.SpanContext().TraceID() == worker.SpanContext().TraceID() {
				inTrace[s.Name()] = true
			}
		}
		var bus, gateway bool
		for name := range inTrace {
			bus = bus || strings.HasSuffix(name, ".call")
			gateway = gateway || strings.Contains(name, "get_title") || strings.Contains(name, "tools/call")
		}
		return kittest.Check(bus && gateway && len(inTrace) >= 4, "the worker's span is in a trace of %v; want the gateway's tool span and the bus client and server spans too", keys(inTrace))
	})
	t.Logf("one trace: %v", keys(inTrace))
}

// recordSpans installs one span recorder as the global tracer provider for
// the whole test binary: tracers taken from the global provider follow only
// the first provider ever set, so tests cannot each install their own.
func recordSpans() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	tracing.once.Do(func() {
		tracing.rec = tracetest.NewSpanRecorder()
		tracing.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracing.rec))
		otel.SetTracerProvider(tracing.tp)
		otel.SetTextMapPropagator(propagation.TraceContext{})
	})
	return tracing.rec, tracing.tp
}

var tracing struct {
	once sync.Once
	rec  *tracetest.SpanRecorder
	tp   *sdktrace.TracerProvider
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestUpFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"negative workers", []string{"--workers", "-1"}, "--workers -1"},
		{"unknown flag", []string{"--nope"}, "nope"},
		{"bad listen", []string{"--listen", "nonsense"}, "listen"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Command(context.Background(), "up", append(tt.args, "--data-dir", t.TempDir(), "--nats-listen", "off"))
			var usage app.UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("up %v = %v, want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
	if err := Command(context.Background(), "frobnicate", nil); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command = %v", err)
	}
}
