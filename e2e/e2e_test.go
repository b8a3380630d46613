// Package e2e tests Sovereign end to end: a real nats-server, browser
// workers and gateways as separate processes on loopback, driven by real
// MCP clients (raw HTTP, mcp-go, the official TypeScript SDK) against pages
// served by httptest.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
)

var (
	buildOnce sync.Once
	buildDir  string
	bins      *harness.Binaries
	buildErr  error
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaries builds sovereign and nats-server once per test run.
func binaries(t *testing.T) *harness.Binaries {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sovereign-e2e-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		bins, buildErr = harness.Build(ctx, buildDir)
		if buildErr == nil {
			fmt.Fprintf(os.Stderr, "e2e: built sovereign and nats-server in %s\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		t.Fatalf("build binaries: %v", buildErr)
	}
	return bins
}

type fleetSpec struct {
	workers     int
	gateways    int
	maxSessions int
	gatewayArgs []string // extra flags of every gateway
	workerArgs  []string // extra flags of every worker
}

// startFleet starts nats-server, the workers (w1, w2, …, concurrently) and
// the gateways; it stops them all when the test ends and prints their
// output if the test failed.
func startFleet(t *testing.T, spec fleetSpec) *harness.Fleet {
	t.Helper()
	b := binaries(t)
	f := harness.NewFleet(b, t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the fleet's processes:\n%s", f.Logs())
		}
		f.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := f.StartNATS(ctx); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	errs := make(chan error, spec.workers)
	for i := range spec.workers {
		go func() {
			_, err := f.StartWorker(ctx, fmt.Sprintf("w%d", i+1), spec.maxSessions, spec.workerArgs...)
			errs <- err
		}()
	}
	for range spec.workers {
		if err := <-errs; err != nil {
			t.Fatalf("start worker: %v", err)
		}
	}
	for range spec.gateways {
		if _, err := f.StartGateway(ctx, spec.gatewayArgs...); err != nil {
			t.Fatalf("start gateway: %v", err)
		}
	}
	t.Logf("fleet up in %s: nats %s, %d workers (max %d sessions each), %d gateways",
		time.Since(start).Round(time.Millisecond), f.NATS.URL, spec.workers, spec.maxSessions, spec.gateways)
	return f
}

// newSite serves the test pages until the test ends.
func newSite(t *testing.T) string {
	t.Helper()
	s := harness.NewSite()
	t.Cleanup(s.Close)
	return s.URL
}

// callCtx bounds one step of a test.
func callCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// initClient initializes a raw 2025-11-25 client on url.
func initClient(t *testing.T, ctx context.Context, url string) *harness.MCPClient {
	t.Helper()
	c := harness.NewMCPClient(url)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	if c.SessionID == "" {
		t.Fatalf("initialize %s: no Mcp-Session-Id", url)
	}
	return c
}

// tool calls a tool and fails the test on any error, isError included.
func tool(t *testing.T, ctx context.Context, c *harness.MCPClient, name string, args map[string]any) *harness.ToolResult {
	t.Helper()
	res, err := c.Tool(ctx, name, args)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// text calls a tool and returns its trimmed text.
func text(t *testing.T, ctx context.Context, c *harness.MCPClient, name string, args map[string]any) string {
	t.Helper()
	return strings.TrimSpace(tool(t, ctx, c, name, args).Text())
}

// evalString runs a script and returns its result as text, without the
// quotes a JSON-encoded string result carries.
func evalString(t *testing.T, ctx context.Context, c *harness.MCPClient, script string) string {
	t.Helper()
	return unquote(text(t, ctx, c, "eval", map[string]any{"script": script}))
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `\"`, `"`)
	}
	return s
}

// refOf snapshots the page and returns the ref of role/name.
func refOf(t *testing.T, ctx context.Context, c *harness.MCPClient, role, name string) string {
	t.Helper()
	snap := text(t, ctx, c, "snapshot", nil)
	ref := harness.FindRef(snap, role, name)
	if ref == "" {
		t.Fatalf("snapshot has no %s %q with a ref:\n%s", role, name, snap)
	}
	return ref
}
