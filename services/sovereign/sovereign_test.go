package sovereign

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestUp runs `sovereign up` in-process and browses through it with an MCP
// client over HTTP, as a new user would after `make run`.
func TestUp(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Hello fleet</title><button>Go</button>`)
	}))
	defer page.Close()

	listen, natsListen, dir := freeAddr(t), freeAddr(t), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Command(ctx, "up", []string{"--listen", listen, "--nats-listen", natsListen, "--data-dir", dir, "--workers", "1", "--max-sessions", "2"})
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("up returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("up did not stop within 30s of its context ending")
		}
	}()

	// A second `up` on the same NATS port fails with advice, not a hang.
	waitHTTP(t, "http://"+listen+"/readyz", done)
	err := Command(context.Background(), "up", []string{"--listen", freeAddr(t), "--nats-listen", natsListen, "--data-dir", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("second up on a busy NATS port = %v, want advice naming --nats-listen", err)
	}

	tr, err := transport.NewStreamableHTTP("http://" + listen + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "up-test", Version: "1"}
	if _, err := c.Initialize(cctx, init); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"open", map[string]any{"url": page.URL}, "Hello fleet"},
		{"get_title", nil, "Hello fleet"},
		{"snapshot", nil, `button "Go" [ref=e`},
	} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = step.tool, step.args
		res, err := c.CallTool(cctx, req)
		if err != nil {
			t.Fatalf("%s: %v", step.tool, err)
		}
		text := ""
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if res.IsError || !strings.Contains(text, step.want) {
			t.Fatalf("%s = %q (error %v), want it to contain %q", step.tool, text, res.IsError, step.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Fatalf("JetStream store not under the data dir: %v", err)
	}
}

func waitHTTP(t *testing.T, url string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("up exited early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestUpFlags(t *testing.T) {
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
