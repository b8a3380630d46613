package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// startNATS runs an in-process NATS server with JetStream for one test.
func startNATS(t *testing.T, listen string) *natsrv.Server {
	t.Helper()
	srv, err := natsrv.Start(natsrv.Options{Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// connect opens a bus connection to srv.
func connect(t *testing.T, srv *natsrv.Server) *bus.Conn {
	t.Helper()
	return natstest.Bus(t, srv)
}

// startGateway serves a gateway on srv over httptest and returns its /mcp URL.
func startGateway(t *testing.T, srv *natsrv.Server, cfg gateway.Config) string {
	t.Helper()
	_, url := startGatewayG(t, srv, cfg)
	return url
}

// startGatewayG is startGateway that also returns the gateway.
func startGatewayG(t *testing.T, srv *natsrv.Server, cfg gateway.Config) (*gateway.Gateway, string) {
	t.Helper()
	if cfg.URLAllow == nil && cfg.URLBlock == nil && cfg.PolicyFile == "" {
		cfg.AllowPrivate = true // the test pages are on loopback
	}
	g, err := gateway.New(context.Background(), cfg, connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Close(ctx)
		hs.Close()
	})
	return g, hs.URL + "/mcp"
}

// rpc is a raw JSON-RPC client of /mcp, for checks below the MCP client.
type rpc struct {
	t       *testing.T
	url     string
	session string
	header  http.Header
}

type reply struct {
	status int
	header http.Header
	body   []byte
	msg    map[string]any // the JSON-RPC message, when there is one
}

func (c *rpc) do(method string, body string, extra http.Header) reply {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, c.url, err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && method == http.MethodGet {
		return out // a stream: the caller only looks at the headers
	}
	out.body, err = io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	out.msg = decodeMessage(out.header.Get("Content-Type"), out.body)
	return out
}

// call posts a JSON-RPC message.
func (c *rpc) call(body string) reply { return c.do(http.MethodPost, body, nil) }

// decodeMessage reads a JSON-RPC message from a JSON or SSE body.
func decodeMessage(contentType string, body []byte) map[string]any {
	data := body
	if strings.HasPrefix(contentType, "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(d) // the last event is the response
			}
		}
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

func (r reply) result() map[string]any {
	m, _ := r.msg["result"].(map[string]any)
	return m
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-test","version":"1.0"}}}`

// legacyClient is an mcp-go client on protocol 2025-11-25, initialized.
func legacyClient(t *testing.T, url string, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	initClient(t, c)
	return c
}

// modernClient is an mcp-go client on protocol 2026-07-28 (no protocol sessions).
func modernClient(t *testing.T, url string, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	initClient(t, c)
	if v := c.ProtocolVersion(); !mcp.IsModernProtocol(v) {
		t.Fatalf("modern client negotiated %q", v)
	}
	return c
}

func initClient(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "gateway-test", Version: "1.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return res
}

// text joins a result's text content.
func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
