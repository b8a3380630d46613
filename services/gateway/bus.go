package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/micro"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/toolsbus"
)

// The gateway's tool dispatcher on the bus (proto/sovereign/tools/v1):
// sov.tools.list and sov.tools.call, served by every gateway in the queue
// group "sovereign-tools", for callers that are not MCP clients (the agent
// orchestrator first).
//
// A bus call is a dispatch.Call like an MCP tools/call, run by the same
// registry: the same middleware (recover, audit, approval), URL policy,
// secrets and handlers. It carries the caller the request names (as
// authentication would have established it), the agent run it belongs
// to, and the browser session it acts in: a session handle, or "mcp:<id>",
// the browser session of an MCP session of the same caller.
//
// Of the call's capabilities (internal/dispatch/person.go), a bus call has
// its caller only: progress reports and notices are dropped (NoProgress:
// the response is the one reply, and the agent protocol has no place for
// them), and a monitored tool's call waits for a person's decision on the
// console's approval queue (there is no client to ask on the bus) until
// --approval-timeout denies it.
//
// The tools listed and callable are the registry's, hidden ones included
// (system tools in "agent" mode), without the tools that start agent runs:
// no run starts another.

// Names of the micro service and its queue group.
const (
	toolsService = "sovereign-tools"
	toolsQueue   = "sovereign-tools"
)

// kindConsole is the caller kind of the operator console (proto Caller).
const kindConsole = "console"

// mcpRefPrefix starts a CallToolRequest.session that names an MCP session.
const mcpRefPrefix = "mcp:"

// serveTools registers the micro service "sovereign-tools" with
// <prefix>.tools.list and <prefix>.tools.call.
func (g *Gateway) serveTools() error {
	svc, err := g.bus.AddService(toolsService, Version, "Sovereign gateway: the tool dispatcher for agent runs", nil)
	if err != nil {
		return fmt.Errorf("tools service: %w", err)
	}
	grp := svc.AddGroup(toolsbus.Group(g.bus), micro.WithGroupQueueGroup(toolsQueue))
	for name, h := range map[string]micro.Handler{
		toolsbus.List.Name: bus.Handle(g.bus, g.busListTools),
		toolsbus.Call.Name: bus.Handle(g.bus, g.busCallTool),
	} {
		if err := grp.AddEndpoint(name, h); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("tools endpoint %s: %w", name, err)
		}
	}
	g.toolsSvc = svc // Close stops it first
	return g.bus.Served()
}

// busListTools answers sov.tools.list: the registry in its order; for
// agents without the tools that start runs, and without the session
// argument (a run's browser session is its request's, never the model's
// choice).
func (g *Gateway) busListTools(_ context.Context, r *toolsv1.ListToolsRequest) (*toolsv1.ListToolsResponse, error) {
	out := &toolsv1.ListToolsResponse{}
	for _, e := range g.tools.Entries() {
		schema := e.Tool.InputSchema
		if r.GetForAgent() {
			if e.Kind == dispatch.Run {
				continue
			}
			if e.AgentSchema != nil {
				schema = e.AgentSchema
			}
		}
		ro := e.Tool.Annotations.ReadOnly
		out.Tools = append(out.Tools, &toolsv1.Tool{
			Name: e.Tool.Name, Title: e.Tool.Annotations.Title, Description: e.Tool.Description,
			InputSchemaJson: string(schema), ReadOnly: ro != nil && *ro,
		})
	}
	return out, nil
}

// busCallTool answers sov.tools.call through the dispatcher.
func (g *Gateway) busCallTool(ctx context.Context, r *toolsv1.CallToolRequest) (*toolsv1.CallToolResponse, error) {
	caller, err := busCaller(r.GetCaller(), r.GetRunId())
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(r.GetName())
	if name == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "name is required: a tool of %s", toolsbus.List.Subject(g.bus))
	}
	e, ok := g.tools.Lookup(name)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "unknown tool %q: %s lists the tools", name, toolsbus.List.Subject(g.bus))
	}
	if e.Kind == dispatch.Run {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s starts agent runs and is not callable on the bus (a run cannot start another run)", name)
	}
	args, err := busArguments(r.GetArgumentsJson())
	if err != nil {
		return nil, err
	}
	c := &dispatch.Call{Tool: name, Args: args, Caller: caller, Transport: dispatch.Bus, RunID: r.GetRunId(), Client: "sov.tools.call",
		// The response is the one reply: progress has no place on the bus.
		// Ask and Rounds stay nil: approvals wait for the console.
		Progress: dispatch.NoProgress}
	if c.RunID != "" {
		c.Client = "agent"
	}
	c.Handle, _ = args[catalog.SessionParam].(string)
	if ref := strings.TrimSpace(r.GetSession()); ref != "" {
		var handle string
		switch {
		case strings.HasPrefix(ref, mcpRefPrefix):
			c.MCPSession = strings.TrimPrefix(ref, mcpRefPrefix)
			if !state.ValidID(c.MCPSession) {
				return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "session %q does not name an MCP session (mcp:<Mcp-Session-Id>)", ref)
			}
		case state.ValidHandle(ref):
			handle = ref
		default:
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"session %q is neither a session handle (%s…) nor mcp:<MCP session id>; leave it empty to open a browser session", ref, state.HandlePrefix)
		}
		if given, has := args[catalog.SessionParam]; has && e.Kind.InSession() && given != handle {
			return errorResponse(fmt.Sprintf("%s: the browser session is the request's (CallToolRequest.session); do not pass a %q argument as well", name, catalog.SessionParam)), nil
		}
		switch {
		case !e.Kind.InSession(): // a tool without a browser session: nothing to bind
			c.MCPSession = ""
		case handle != "":
			c.Handle = handle
			args[catalog.SessionParam] = handle
		}
	}
	if caller.Kind == KindToken {
		// The token may have been revoked since the run started; its
		// policy is the one the gateway holds, not a copy.
		tok, ok := g.auth.Tokens().Lookup(strings.TrimPrefix(caller.ID, "token:"))
		if !ok || tok.Revoked() {
			return errorResponse(fmt.Sprintf("%s: the caller's API token is revoked or unknown; the call was not run", name)), nil
		}
		c.Caller.URLAllow, c.Caller.URLBlock, c.Caller.Approve = tok.URLAllow, tok.URLBlock, tok.Approve
		c.Caller.MaxSessions = tok.MaxSessions
	}
	return busResponse(g.tools.Dispatch(ctx, c)), nil
}

// busCaller checks the request's caller and names the run in it: the audit
// trail and approval requests say "<name> (agent run r_…)".
func busCaller(c *toolsv1.Caller, runID string) (Caller, error) {
	if c == nil {
		return Caller{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "caller is required: who the call acts for (kind, id, name)")
	}
	switch c.GetKind() {
	case KindAnonymous, KindToken, KindOAuth, kindConsole:
	default:
		return Caller{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "caller.kind %q: must be %s, %s, %s or %s",
			c.GetKind(), KindAnonymous, KindToken, KindOAuth, kindConsole)
	}
	if strings.TrimSpace(c.GetId()) == "" {
		return Caller{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "caller.id is required: it owns the browser sessions and handles")
	}
	if c.GetKind() == KindToken && !strings.HasPrefix(c.GetId(), "token:") {
		return Caller{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "caller.id %q of a token caller must be token:<token id>", c.GetId())
	}
	name := c.GetName()
	if name == "" {
		name = c.GetId()
	}
	if runID != "" {
		name = fmt.Sprintf("%s (agent run %s)", name, runID)
	}
	return Caller{Kind: c.GetKind(), ID: c.GetId(), Name: name,
		URLAllow: c.GetUrlAllow(), URLBlock: c.GetUrlBlock(), Approve: c.GetApprove()}, nil
}

// busArguments decodes CallToolRequest.arguments_json, which must be a
// JSON object ("" means {}).
func busArguments(raw string) (map[string]any, error) {
	if strings.TrimSpace(raw) == "" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "arguments_json is not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "arguments_json must be a JSON object, got %s", catalog.JSONType(v))
	}
	return m, nil
}

// busResponse renders a result for the bus: images as bytes, and the
// handle of the call's browser session in the response's session field
// only (the model of an agent run never sees a handle).
func busResponse(r *dispatch.Result) *toolsv1.CallToolResponse {
	out := &toolsv1.CallToolResponse{IsError: r.IsError, Session: r.Session, Content: make([]*toolsv1.Content, 0, len(r.Parts))}
	for _, p := range r.Parts {
		if p.Data != nil {
			kind := "image"
			if p.Name != "" {
				kind = "resource"
			}
			out.Content = append(out.Content, &toolsv1.Content{Type: kind, MimeType: p.MIME, Data: p.Data})
			continue
		}
		out.Content = append(out.Content, &toolsv1.Content{Type: "text", Text: p.Text})
	}
	out.Structured = r.Structured
	return out
}

// errorResponse is a tool error that never reached the tool.
func errorResponse(text string) *toolsv1.CallToolResponse {
	return &toolsv1.CallToolResponse{IsError: true, Content: []*toolsv1.Content{{Type: "text", Text: text}}}
}

// bindMCPRef binds a bus call to the browser session of MCP session id
// (CallToolRequest.session "mcp:<id>"): only for the MCP session's owner,
// and only while it lives. The errors never name the id (a bearer of the
// session).
func (g *Gateway) bindMCPRef(ctx context.Context, progress dispatch.Progress, id string, caller Caller, profile string) (*binding, error) {
	e, err := g.store.Get(ctx, state.MCP, id)
	if errors.Is(err, state.ErrNotFound) || err == nil && e.Owner != caller.ID {
		// Another caller's MCP session is as unknown as a made-up one.
		return nil, dispatch.ToolErrorf("the MCP session this call acts in is unknown or expired (MCP sessions expire after %s unused); its browser session is gone",
			g.cfg.SessionTTL)
	}
	if err != nil {
		return nil, err
	}
	if e.Terminated {
		return nil, dispatch.ToolErrorf("the MCP session this call acts in was terminated (its client ended it), and its browser session closed")
	}
	return g.ensureBound(ctx, progress, e, caller, profile)
}
