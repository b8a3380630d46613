package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Jaeger, as the e2e tests run it: the v2 all-in-one (cmd/jaeger, an
// OpenTelemetry Collector distribution) built from the module on the Go
// module proxy. `go install` refuses the module (its go.mod has replace
// directives), so BuildJaeger builds it inside a copy of the downloaded
// module, where they apply.
const (
	JaegerModule  = "github.com/jaegertracing/jaeger"
	JaegerVersion = "v1.76.0"
	// EnvJaegerBin names a prebuilt jaeger (v2) binary to run instead of
	// building one, for example from a release archive.
	EnvJaegerBin = "SOVEREIGN_E2E_JAEGER"
	// jaegerBuildEstimate is what the first build took on a two-core
	// machine (it downloads about 400 modules and compiles them).
	jaegerBuildEstimate = "~6 min"
)

const (
	jaegerBuildTimeout = 30 * time.Minute
	jaegerReadyTimeout = 30 * time.Second
)

// JaegerCacheDir is where BuildJaeger keeps the binary between runs:
// $XDG_CACHE_HOME (or ~/.cache)/sovereign-e2e/jaeger-<version>-<os>-<arch>.
func JaegerCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache dir for jaeger: %w", err)
	}
	return filepath.Join(base, "sovereign-e2e", fmt.Sprintf("jaeger-%s-%s-%s", JaegerVersion, runtime.GOOS, runtime.GOARCH)), nil
}

// BuildJaeger returns the path of a jaeger binary at JaegerVersion: the one
// named by $SOVEREIGN_E2E_JAEGER, the one cached by an earlier run, or a
// new build (once per machine: it takes minutes, which logf is told, with
// a line every 30 s while it runs). Concurrent callers wait for one build.
func BuildJaeger(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if bin := os.Getenv(EnvJaegerBin); bin != "" {
		abs, err := filepath.Abs(bin)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return "", fmt.Errorf("$%s: %w", EnvJaegerBin, err)
		}
		return abs, nil
	}
	dir, err := JaegerCacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "jaeger")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("jaeger cache dir: %w", err)
	}
	// One build at a time per machine: test binaries of several packages
	// may ask at once.
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("jaeger build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("jaeger build lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while we waited
	}

	ctx, cancel := context.WithTimeout(ctx, jaegerBuildTimeout)
	defer cancel()
	start := time.Now()
	logf("building jaeger %s (first run only, %s on two cores; cached in %s; $%s skips it)…",
		JaegerVersion, jaegerBuildEstimate, dir, EnvJaegerBin)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				logf("still building jaeger %s (%s so far)…", JaegerVersion, time.Since(start).Round(time.Second))
			}
		}
	}()
	if err := buildJaeger(ctx, bin); err != nil {
		return "", err
	}
	logf("built jaeger %s in %s", JaegerVersion, time.Since(start).Round(time.Second))
	return bin, nil
}

// buildJaeger downloads the module, copies it to a writable directory and
// builds cmd/jaeger there into out (via a temporary name, so that out is
// either absent or whole).
func buildJaeger(ctx context.Context, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go command not on PATH: %w", err)
	}
	work, err := os.MkdirTemp("", "sovereign-jaeger-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// Outside the workspace: the module is built as its own main module.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")

	dl := exec.CommandContext(ctx, goBin, "mod", "download", "-json", JaegerModule+"@"+JaegerVersion)
	dl.Dir, dl.Env = work, env
	var stderr bytes.Buffer
	dl.Stderr = &stderr
	raw, err := dl.Output()
	if err != nil {
		return fmt.Errorf("go mod download %s@%s: %w\n%s", JaegerModule, JaegerVersion, err, strings.TrimSpace(stderr.String()+string(raw)))
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(raw, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go mod download %s@%s: no module directory in %s (%v) %s", JaegerModule, JaegerVersion, raw, err, mod.Error)
	}
	src := filepath.Join(work, "jaeger")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return fmt.Errorf("copy the jaeger module: %w", err)
	}
	tmp := out + ".tmp"
	build := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", tmp, "./cmd/jaeger")
	build.Dir, build.Env = src, env
	if b, err := build.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("go build ./cmd/jaeger in %s@%s: %w\n%s", JaegerModule, JaegerVersion, err, tail(string(b), 4000))
	}
	return os.Rename(tmp, out)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Jaeger is a running jaeger with in-memory storage, all on loopback.
type Jaeger struct {
	*Proc
	// OTLPGRPC is the OTLP/gRPC receiver (host:port); OTLPHTTP the OTLP/HTTP
	// one (http://host:port): values for OTEL_EXPORTER_OTLP_ENDPOINT with
	// OTEL_EXPORTER_OTLP_PROTOCOL grpc and http/protobuf.
	OTLPGRPC, OTLPHTTP string
	// Query is the base URL of the query service's HTTP API and UI.
	Query string
}

// jaegerConfig is a minimal Jaeger v2 configuration: OTLP in, memory
// storage, the query API, a health check; no other listener.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{{health}}
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{{query_http}}
    grpc:
      endpoint: 127.0.0.1:{{query_grpc}}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{{otlp_grpc}}
      http:
        endpoint: 127.0.0.1:{{otlp_http}}

processors:
  batch:
    timeout: 100ms

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// StartJaeger runs bin with a configuration written to dir, on free
// loopback ports, and waits until it takes OTLP and answers queries.
// Unlike Sovereign's processes, Jaeger does not say which ports it bound
// when given port 0, so they are picked here (freePort): another socket
// may take one before Jaeger binds it, and Jaeger then fails to start.
func StartJaeger(ctx context.Context, bin, dir string, tee io.Writer) (*Jaeger, error) {
	ports := map[string]int{}
	for _, name := range []string{"health", "query_http", "query_grpc", "otlp_grpc", "otlp_http"} {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[name] = p
	}
	cfg := jaegerConfig
	for name, p := range ports {
		cfg = strings.ReplaceAll(cfg, "{{"+name+"}}", fmt.Sprint(p))
	}
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write jaeger config: %w", err)
	}
	p, err := StartProc("jaeger", bin, []string{"--config", path}, nil, tee)
	if err != nil {
		return nil, err
	}
	j := &Jaeger{
		Proc:     p,
		OTLPGRPC: fmt.Sprintf("127.0.0.1:%d", ports["otlp_grpc"]),
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports["otlp_http"]),
		Query:    fmt.Sprintf("http://127.0.0.1:%d", ports["query_http"]),
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/status", ports["health"])
	err = poll(ctx, jaegerReadyTimeout, p, "jaeger to be healthy and take OTLP", func(ctx context.Context) error {
		if err := getOK(ctx, health); err != nil {
			return err
		}
		if err := getOK(ctx, j.Query+"/api/services"); err != nil {
			return err
		}
		for _, addr := range []string{j.OTLPGRPC, strings.TrimPrefix(j.OTLPHTTP, "http://")} {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		_ = p.Stop(stopGrace)
		return nil, err
	}
	return j, nil
}

// getOK GETs url once: nil when it answers 200.
func getOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// JaegerTrace is a trace as Jaeger's query API (/api/traces) returns it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []JaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []JaegerTag `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// JaegerRef is a reference of a span: CHILD_OF is its parent, FOLLOWS_FROM
// a link.
type JaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerTag is a span or process attribute.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerProcess is the resource a span came from.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// Tag returns the value of the tag key as text ("" when absent).
func (s JaegerSpan) Tag(key string) string { return tagValue(s.Tags, key) }

// Parent returns the span id of the CHILD_OF reference ("" for a root).
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Links returns the span ids of the FOLLOWS_FROM references.
func (s JaegerSpan) Links() []string {
	var out []string
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" {
			out = append(out, r.SpanID)
		}
	}
	return out
}

// Tag returns the value of the process tag key as text.
func (p JaegerProcess) Tag(key string) string { return tagValue(p.Tags, key) }

func tagValue(tags []JaegerTag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			if f, ok := t.Value.(float64); ok && f == float64(int64(f)) {
				return fmt.Sprint(int64(f))
			}
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Service returns the service name of span s in t.
func (t *JaegerTrace) Service(s JaegerSpan) string { return t.Processes[s.ProcessID].ServiceName }

// Span returns the span with id, if t has it.
func (t *JaegerTrace) Span(id string) (JaegerSpan, bool) {
	for _, s := range t.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return JaegerSpan{}, false
}

// Named returns the spans of t named name.
func (t *JaegerTrace) Named(name string) []JaegerSpan {
	var out []JaegerSpan
	for _, s := range t.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// ErrNoTrace says that Jaeger has no trace with the id (yet).
var ErrNoTrace = errors.New("jaeger has no such trace")

// Trace fetches one trace by its hex id.
func (j *Jaeger) Trace(ctx context.Context, id string) (*JaegerTrace, error) {
	var out struct {
		Data   []JaegerTrace `json:"data"`
		Errors []any         `json:"errors"`
	}
	status, err := j.get(ctx, "/api/traces/"+url.PathEscape(id), &out)
	if status == http.StatusNotFound {
		return nil, ErrNoTrace
	}
	if err != nil {
		return nil, err
	}
	if len(out.Data) != 1 {
		return nil, fmt.Errorf("jaeger answered %d traces for id %s (errors %v)", len(out.Data), id, out.Errors)
	}
	return &out.Data[0], nil
}

// Traces searches the traces of service in the last hour (at most limit,
// newest first), as the UI's search does.
func (j *Jaeger) Traces(ctx context.Context, service string, limit int) ([]JaegerTrace, error) {
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	q := url.Values{"service": {service}, "lookback": {"1h"}, "limit": {fmt.Sprint(limit)}}
	if _, err := j.get(ctx, "/api/traces?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Services lists the services Jaeger has spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var out struct {
		Data []string `json:"data"`
	}
	_, err := j.get(ctx, "/api/services", &out)
	return out.Data, err
}

func (j *Jaeger) get(ctx context.Context, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("jaeger GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("jaeger GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("jaeger GET %s: status %d: %s", path, resp.StatusCode, tail(string(body), 500))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, fmt.Errorf("jaeger GET %s: %w", path, err)
	}
	return resp.StatusCode, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago
// (for Jaeger only: see StartJaeger).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
