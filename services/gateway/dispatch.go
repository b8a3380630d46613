package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// One tool call, from HTTP to Chromium:
//
//  1. the HTTP stack (http.go, auth.go) checks Host/Origin, the body size
//     and the credential, and puts the Caller in the request's context;
//  2. mcp-go decodes tools/call and runs the tool's MCP adapter
//     (mcpHandler below), which builds a dispatch.Call once: arguments,
//     caller, MCP session, what the client can do;
//  3. the registry (g.tools) runs the call through the middleware (recover,
//     audit, approval: approve.go) to the tool's handler: a browser tool's
//     (tools.go) binds the browser session, checks the login requirement
//     and sends the request to its worker (internal/fleet);
//  4. the adapter renders the dispatch.Result for MCP: only here does a
//     new session handle become a text line, and an image base64.
//
// sov.tools.call (bus.go) and a script's inner calls (extend.go) are other
// adapters over the same registry.

// addTool registers e in the dispatcher and, unless it is hidden from MCP
// clients, on the MCP server (tools/list, list_changed).
func (g *Gateway) addTools(entries ...dispatch.Entry) {
	var add []server.ServerTool
	for _, e := range entries {
		g.tools.Add(e)
		if !e.Hidden {
			add = append(add, server.ServerTool{Tool: e.Tool, Handler: g.mcpHandler(e.Tool.Name)})
		}
	}
	if len(add) > 0 {
		g.mcp.AddTools(add...)
	}
}

// removeTools forgets the tools named, here and on the MCP server.
func (g *Gateway) removeTools(names ...string) {
	if len(names) == 0 {
		return
	}
	g.tools.Remove(names...)
	g.mcp.DeleteTools(names...)
}

// mcpHandler is the MCP adapter of tool name.
func (g *Gateway) mcpHandler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, err := mcpCall(ctx, name, req)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcpResult(g.tools.Dispatch(ctx, c)), nil
	}
}

// mcpCall builds the dispatcher's call of an MCP tools/call.
func mcpCall(ctx context.Context, name string, req mcp.CallToolRequest) (*dispatch.Call, error) {
	args, ok := req.Params.Arguments.(map[string]any)
	if !ok && req.Params.Arguments != nil {
		return nil, fmt.Errorf("%s: the arguments must be a JSON object, got %s", name, catalog.JSONType(req.Params.Arguments))
	}
	if args == nil {
		args = map[string]any{}
	}
	c := &dispatch.Call{
		Tool:           name,
		Args:           args,
		Caller:         callerInfo(ctx),
		Transport:      dispatch.MCP,
		RequestState:   req.Params.RequestState,
		InputResponses: req.Params.InputResponses,
	}
	c.Handle, _ = args[catalog.SessionParam].(string)
	if req.Params.Meta != nil {
		c.ProgressToken = req.Params.Meta.ProgressToken
	}
	if server.IsModernRequest(ctx) {
		c.Transport = dispatch.MCPModern
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil {
			c.CanElicit = info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil
			if info.ClientInfo != nil {
				c.Client = strings.TrimSpace(info.ClientInfo.Name + " " + info.ClientInfo.Version)
			}
		}
		return c, nil
	}
	s := server.ClientSessionFromContext(ctx)
	if s != nil {
		c.MCPSession = s.SessionID()
	}
	if s, ok := s.(server.SessionWithClientInfo); ok {
		info := s.GetClientInfo()
		c.Client = strings.TrimSpace(info.Name + " " + info.Version)
		_, can := s.(server.SessionWithElicitation)
		c.CanElicit = can && s.GetClientCapabilities().Elicitation != nil
	}
	return c, nil
}

// ResultURI names a file a tool returned (an embedded resource): it
// identifies the part of this result, it is not fetchable.
func ResultURI(name string) string { return "sovereign://result/" + url.PathEscape(name) }

// mcpResult renders a result for MCP: images in base64; the handle of a
// handle-bound call in _meta, and a new one also as the first text line and
// in the structured content (a 2026 client must learn it to pass it on).
func mcpResult(r *dispatch.Result) *mcp.CallToolResult {
	if r.Input != nil {
		return r.Input
	}
	out := &mcp.CallToolResult{Content: make([]mcp.Content, 0, len(r.Parts)+1), IsError: r.IsError}
	if r.Session != "" {
		out.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaSession: r.Session}}
		if r.NewSession {
			out.Content = append(out.Content, mcp.NewTextContent(
				fmt.Sprintf("session: %s (pass it as %q in later calls)", r.Session, catalog.SessionParam)))
		}
	}
	for _, p := range r.Parts {
		if p.Data != nil && p.Name != "" {
			out.Content = append(out.Content, mcp.NewEmbeddedResource(mcp.BlobResourceContents{
				URI: ResultURI(p.Name), MIMEType: p.MIME, Blob: base64.StdEncoding.EncodeToString(p.Data)}))
			continue
		}
		if p.Data != nil {
			out.Content = append(out.Content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(p.Data), p.MIME))
			continue
		}
		out.Content = append(out.Content, mcp.NewTextContent(p.Text))
	}
	facts := r.Structured
	if r.NewSession {
		facts, _ = structured.Set(facts, "session", r.Session)
	}
	if facts != nil {
		// The one place structured content becomes JSON.
		out.StructuredContent = structured.JSON(facts)
	}
	return out
}
