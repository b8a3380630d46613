package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// ProtocolVersion is the MCP revision with protocol sessions that the raw
// client speaks.
const ProtocolVersion = "2025-11-25"

// HTTPClient is shared by raw MCP clients: keep-alive connections, enough
// of them for concurrent clients, no overall timeout (contexts bound calls).
var HTTPClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
}}

// MCPClient speaks MCP Streamable HTTP (2025-11-25) with plain net/http, so
// tests see every status code and header. It is safe for concurrent use
// once initialized.
type MCPClient struct {
	URL string
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	// Host, when set, is the Host header instead of the URL's host: a
	// name the server accepts when the URL dials an address (a Kubernetes
	// Service's ClusterIP reached from its node).
	Host string
	// SessionID is the Mcp-Session-Id sent with each request; Initialize
	// sets it from the server's reply.
	SessionID string
	// Protocol is sent as MCP-Protocol-Version once set (Initialize sets it).
	Protocol string

	id atomic.Int64
}

// NewMCPClient returns a client for the MCP endpoint url.
func NewMCPClient(url string) *MCPClient { return &MCPClient{URL: url, Header: http.Header{}} }

// Message is a JSON-RPC message as received.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object; it is also a Go error.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// HTTPError is a non-2xx reply to a POST.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, http.StatusText(e.Status), strings.TrimSpace(e.Body))
}

// Reply is one HTTP exchange.
type Reply struct {
	Status      int
	Header      http.Header
	ContentType string // media type without parameters
	// Msg is the JSON-RPC response to the request (nil for notifications
	// and error statuses without a JSON-RPC body).
	Msg *Message
	// Body is the raw body (for SSE: the whole stream up to the response).
	Body []byte
}

// Post sends one JSON-RPC request (notify false) or notification and reads
// the reply, whether application/json or an SSE stream. A non-2xx status is
// not an error here: Reply.Status says it.
func (c *MCPClient) Post(ctx context.Context, method string, params any, notify bool) (*Reply, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	var id int64
	if !notify {
		id = c.id.Add(1)
		msg["id"] = id
	}
	if params != nil {
		msg["params"] = params
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.setHeaders(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s %s: %w", c.URL, method, err)
	}
	defer resp.Body.Close()
	r := &Reply{Status: resp.StatusCode, Header: resp.Header}
	r.ContentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case r.ContentType == "text/event-stream":
		r.Msg, r.Body, err = readSSEResponse(resp.Body, id)
		if err != nil {
			return r, fmt.Errorf("%s: read SSE reply: %w", method, err)
		}
	default:
		r.Body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return r, fmt.Errorf("%s: read reply: %w", method, err)
		}
		if r.ContentType == "application/json" && len(bytes.TrimSpace(r.Body)) > 0 {
			var m Message
			if err := json.Unmarshal(r.Body, &m); err != nil {
				return r, fmt.Errorf("%s: decode reply %q: %w", method, truncate(string(r.Body), 300), err)
			}
			r.Msg = &m
		}
	}
	return r, nil
}

func (c *MCPClient) setHeaders(req *http.Request) {
	if c.Host != "" {
		req.Host = c.Host
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c.SessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.SessionID)
	}
	if c.Protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", c.Protocol)
	}
}

// readSSEResponse reads SSE events until the JSON-RPC response with id.
// Notifications and server requests before it are skipped.
func readSSEResponse(r io.Reader, id int64) (*Message, []byte, error) {
	var raw bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(r, &raw))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []string
	flush := func() (*Message, error) {
		if len(data) == 0 {
			return nil, nil
		}
		payload := strings.Join(data, "\n")
		data = data[:0]
		var m Message
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return nil, fmt.Errorf("event data %q: %w", truncate(payload, 300), err)
		}
		if m.Method == "" && string(m.ID) == fmt.Sprint(id) {
			return &m, nil
		}
		return nil, nil
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			m, err := flush()
			if err != nil || m != nil {
				return m, raw.Bytes(), err
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if m, err := flush(); err != nil || m != nil {
		return m, raw.Bytes(), err
	}
	if err := sc.Err(); err != nil {
		return nil, raw.Bytes(), err
	}
	return nil, raw.Bytes(), errors.New("stream ended without the response")
}

// Request sends a JSON-RPC request and returns its result; HTTP and
// JSON-RPC failures are errors (*HTTPError, *RPCError).
func (c *MCPClient) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r, err := c.Post(ctx, method, params, false)
	if err != nil {
		return nil, err
	}
	if r.Status/100 != 2 {
		if r.Msg != nil && r.Msg.Error != nil {
			return nil, fmt.Errorf("%s: %w (HTTP %d)", method, r.Msg.Error, r.Status)
		}
		return nil, fmt.Errorf("%s: %w", method, &HTTPError{Status: r.Status, Body: string(r.Body)})
	}
	if r.Msg == nil {
		return nil, fmt.Errorf("%s: HTTP %d with no JSON-RPC response (Content-Type %q)", method, r.Status, r.ContentType)
	}
	if r.Msg.Error != nil {
		return nil, fmt.Errorf("%s: %w", method, r.Msg.Error)
	}
	return r.Msg.Result, nil
}

// InitializeResult is the part of the initialize result tests look at.
type InitializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Capabilities map[string]json.RawMessage `json:"capabilities"`
}

// Initialize runs the initialize handshake (initialize, then
// notifications/initialized) and keeps the session id.
func (c *MCPClient) Initialize(ctx context.Context) (*InitializeResult, error) {
	r, err := c.Post(ctx, "initialize", InitializeParams("sovereign-e2e-raw"), false)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK || r.Msg == nil || r.Msg.Error != nil {
		return nil, fmt.Errorf("initialize: HTTP %d: %s", r.Status, truncate(string(r.Body), 500))
	}
	var res InitializeResult
	if err := json.Unmarshal(r.Msg.Result, &res); err != nil {
		return nil, fmt.Errorf("initialize result: %w", err)
	}
	c.SessionID = r.Header.Get("Mcp-Session-Id")
	c.Protocol = res.ProtocolVersion
	n, err := c.Post(ctx, "notifications/initialized", nil, true)
	if err != nil {
		return nil, err
	}
	if n.Status != http.StatusAccepted {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d, want 202", n.Status)
	}
	return &res, nil
}

// InitializeParams are the params of an initialize request.
func InitializeParams(client string) map[string]any {
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": client, "version": "0.0.0"},
	}
}

// Content is one item of a tool result's content.
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// ToolResult is a tools/call result.
type ToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
}

// Text joins the text items of the result.
func (r *ToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolError is a tool result with isError set.
type ToolError struct {
	Tool string
	Text string
}

func (e *ToolError) Error() string { return e.Tool + ": tool error: " + e.Text }

// CallTool calls a tool. A result with isError is returned as is, not as
// an error; protocol and transport failures are errors.
func (c *MCPClient) CallTool(ctx context.Context, name string, args map[string]any) (*ToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := c.Request(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	var res ToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("%s: decode result %s: %w", name, truncate(string(raw), 300), err)
	}
	return &res, nil
}

// Tool calls a tool and turns an isError result into a *ToolError.
func (c *MCPClient) Tool(ctx context.Context, name string, args map[string]any) (*ToolResult, error) {
	res, err := c.CallTool(ctx, name, args)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return res, &ToolError{Tool: name, Text: res.Text()}
	}
	return res, nil
}

// Delete ends the session (HTTP DELETE) and returns the status code.
func (c *MCPClient) Delete(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.URL, nil)
	if err != nil {
		return 0, err
	}
	c.setHeaders(req)
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("DELETE %s: %w", c.URL, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Get opens the GET stream; the caller closes the body (cancel ctx to stop).
func (c *MCPClient) Get(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", c.URL, err)
	}
	return resp, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
