package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/identity"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// One tool call, from HTTP to Chromium:
//
//  1. the HTTP stack (http.go, internal/identity) checks Host/Origin, the
//     body size and the credential, and puts the Caller in the request's
//     context;
//  2. mcp-go decodes tools/call and runs the tool's MCP adapter
//     (mcpAdapter below), which builds a dispatch.Call once: arguments,
//     caller, MCP session, and what the client can do as the call's
//     capabilities (progress, asking its user);
//  3. the registry (g.tools) runs the call through the middleware
//     (recover, audit, approval: internal/approve) to the tool's handler:
//     a browser tool's (tools.go) binds the browser session, checks the
//     login requirement and sends the request to its worker
//     (internal/fleet);
//  4. the adapter renders the dispatch.Result for MCP: only here does a
//     new session handle become a text line, and an image base64.
//
// sov.tools.call (bus.go) and a script's inner calls (internal/extend) are
// other adapters over the same registry.

// mcpAdapter is the dispatcher's MCP transport: it lists the registry's
// tools on the MCP server (tools/list, list_changed) and runs their
// tools/call. What registers tools (the catalog, the system tools, the
// deployed ones: extend.Tools) registers them here.
type mcpAdapter struct {
	*dispatch.Registry
	srv *server.MCPServer
}

// mcpTools is the gateway's MCP adapter.
func (g *Gateway) mcpTools() mcpAdapter { return mcpAdapter{Registry: g.tools, srv: g.mcp} }

// Add registers entries in the dispatcher and, unless hidden from MCP
// clients, on the MCP server.
func (a mcpAdapter) Add(entries ...dispatch.Entry) {
	var add []server.ServerTool
	for _, e := range entries {
		a.Registry.Add(e)
		if !e.Hidden {
			add = append(add, server.ServerTool{Tool: mcpTool(e.Tool), Handler: a.handler(e.Tool.Name)})
		}
	}
	if len(add) > 0 {
		a.srv.AddTools(add...)
	}
}

// Remove forgets the tools named, in the dispatcher and on the MCP server.
func (a mcpAdapter) Remove(names ...string) {
	if len(names) == 0 {
		return
	}
	a.Registry.Remove(names...)
	a.srv.DeleteTools(names...)
}

// Listed is how many tools MCP clients see.
func (a mcpAdapter) Listed() int { return len(a.srv.ListTools()) }

// handler runs tools/call of tool name.
func (a mcpAdapter) handler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, err := a.call(ctx, name, req)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcpResult(a.Dispatch(ctx, c)), nil
	}
}

// mcpTool is a tool as tools/list shows it.
func mcpTool(t dispatch.Tool) mcp.Tool {
	tool := mcp.NewToolWithRawSchema(t.Name, t.Description, t.InputSchema)
	tool.Title = t.Title
	a := t.Annotations
	tool.Annotations = mcp.ToolAnnotation{Title: a.Title, ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive,
		IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld}
	return tool
}

// call builds the dispatcher's call of an MCP tools/call, with what
// the client can do as its capabilities: progress (under its progress
// token) and log messages; a 2025 client that declared elicitation is
// asked on the call's stream, a 2026 one with an input-required result.
func (a mcpAdapter) call(ctx context.Context, name string, req mcp.CallToolRequest) (*dispatch.Call, error) {
	args, ok := req.Params.Arguments.(map[string]any)
	if !ok && req.Params.Arguments != nil {
		return nil, fmt.Errorf("%s: the arguments must be a JSON object, got %s", name, catalog.JSONType(req.Params.Arguments))
	}
	if args == nil {
		args = map[string]any{}
	}
	c := &dispatch.Call{
		Tool:      name,
		Args:      args,
		Caller:    identity.From(ctx),
		Transport: dispatch.MCP,
	}
	c.Handle, _ = args[catalog.SessionParam].(string)
	progress := mcpProgress{srv: a.srv}
	if req.Params.Meta != nil {
		progress.token = req.Params.Meta.ProgressToken
	}
	c.Progress = progress
	if server.IsModernRequest(ctx) {
		c.Transport = dispatch.MCPModern
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil {
			if info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil {
				c.Rounds = &dispatch.Rounds{State: req.Params.RequestState, Replies: mcpReplies(req.Params.InputResponses)}
			}
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
		if _, can := s.(server.SessionWithElicitation); can && s.GetClientCapabilities().Elicitation != nil {
			c.Ask = mcpAsker{srv: a.srv}
		}
	}
	return c, nil
}

// mcpProgress is an MCP call's Progress: notifications/progress under the
// client's token (none when the client gave none), and log messages (which
// the client's log level filters).
type mcpProgress struct {
	srv   *server.MCPServer
	token mcp.ProgressToken
}

func (p mcpProgress) Report(ctx context.Context, progress, total float64, message string) error {
	if p.token == nil {
		return nil
	}
	params := map[string]any{"progressToken": p.token, "progress": progress, "message": message}
	if total > 0 {
		params["total"] = total
	}
	return p.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params)
}

func (p mcpProgress) Notify(ctx context.Context, logger, text string, warn bool) error {
	level := mcp.LoggingLevelNotice
	if warn {
		level = mcp.LoggingLevelWarning
	}
	err := p.srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, logger, text))
	if errors.Is(err, server.ErrSessionDoesNotSupportLogging) {
		return nil // the client did not ask for log messages
	}
	return err
}

// mcpAsker asks a 2025 client's user (elicitation/create on the call's
// response stream).
type mcpAsker struct{ srv *server.MCPServer }

func (a mcpAsker) Ask(ctx context.Context, f dispatch.Form) (dispatch.Reply, error) {
	res, err := a.srv.RequestElicitation(ctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  elicitParams(f),
	})
	if err != nil {
		return dispatch.Reply{}, err
	}
	return mcpReply(res)
}

// mcpReplies are a 2026 client's answers to the forms of an input-required
// result; an answer that is not a readable elicitation is left out.
func mcpReplies(in mcp.InputResponses) map[string]dispatch.Reply {
	var out map[string]dispatch.Reply
	for key := range in {
		r, err := mcpReply(server.ElicitationResponse(in, key))
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]dispatch.Reply{}
		}
		out[key] = r
	}
	return out
}

// mcpReply reads a client's answer to a form: declining or cancelling it
// is a reply that did not accept.
func mcpReply(res *mcp.ElicitationResult) (dispatch.Reply, error) {
	if res == nil {
		return dispatch.Reply{}, errors.New("no elicitation result")
	}
	switch res.Action {
	case mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel:
		return dispatch.Reply{}, nil
	case mcp.ElicitationResponseActionAccept:
		fields, _ := res.Content.(map[string]any)
		return dispatch.Reply{Accepted: true, Fields: fields}, nil
	default:
		return dispatch.Reply{}, fmt.Errorf("unknown elicitation action %q", res.Action)
	}
}

// elicitParams is f as an elicitation: its message and its one field.
func elicitParams(f dispatch.Form) mcp.ElicitationParams {
	return mcp.ElicitationParams{
		Message: f.Message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				f.Field: map[string]any{
					"type": "string", "title": f.Title, "description": f.Description, "enum": f.Choices,
				},
			},
			"required": []string{f.Field},
		},
	}
}

// ResultURI names a file a tool returned (an embedded resource): it
// identifies the part of this result, it is not fetchable.
func ResultURI(name string) string { return "sovereign://result/" + url.PathEscape(name) }

// mcpResult renders a result for MCP: images in base64; the handle of a
// handle-bound call in _meta, and a new one also as the first text line and
// in the structured content (a 2026 client must learn it to pass it on).
func mcpResult(r *dispatch.Result) *mcp.CallToolResult {
	if in := r.Input; in != nil {
		return server.NewInputRequestBuilder(in.State).Elicit(in.Key, elicitParams(in.Form)).ToolResult()
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
