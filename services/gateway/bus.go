package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/micro"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/catalog"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// The gateway's tool dispatcher on the bus (proto/sovereign/tools/v1):
// sov.tools.list and sov.tools.call, served by every gateway in the queue
// group "sovereign-tools", for callers that are not MCP clients (the agent
// orchestrator first).
//
// A bus call takes the very path of an MCP tools/call: it is handed to the
// MCP server as a JSON-RPC tools/call message (g.mcp.HandleMessage), so the
// same middleware (recoverTools, auditTools, approveTools), tracing, URL
// policy, secrets and handlers run. Its context carries the caller the
// request names (as authentication would have put it there) and a busCall:
// the agent run it belongs to and, for "mcp:<id>", the MCP session whose
// browser session it acts in. Approvals of monitored tools go to the
// console's queue: a bus call has no MCP client to elicit from.
//
// The tools listed and callable are the catalog tools this gateway's MCP
// server serves (a tool it does not register is unknown here too), without
// the tools that start agent runs (catalog.Tool.StartsRuns): no run starts
// another. A tool meant for agents only must be registered on the MCP
// server and hidden from MCP clients with a filter that lets bus calls
// (busCallFrom(ctx) != nil) through.

// Names of the micro service and its queue group.
const (
	toolsService = "sovereign-tools"
	toolsQueue   = "sovereign-tools"
)

// kindConsole is the caller kind of the operator console (proto Caller).
const kindConsole = "console"

// mcpRefPrefix starts a CallToolRequest.session that names an MCP session.
const mcpRefPrefix = "mcp:"

// busCall is what the context of a bus call carries besides its caller.
type busCall struct {
	runID string
	// mcpSession is the MCP session whose browser session the call acts
	// in (CallToolRequest.session "mcp:<id>"), "" otherwise.
	mcpSession string
}

type busCallKey struct{}

// busCallFrom returns the bus call of ctx, nil for MCP requests.
func busCallFrom(ctx context.Context) *busCall {
	bc, _ := ctx.Value(busCallKey{}).(*busCall)
	return bc
}

// busMCPSession is the MCP session a bus call acts in ("" for none).
func busMCPSession(ctx context.Context) string {
	if bc := busCallFrom(ctx); bc != nil {
		return bc.mcpSession
	}
	return ""
}

// busClient is the client label of a bus call in the audit trail and
// approval requests: "agent" for a call of an agent run ("" for MCP calls).
func busClient(ctx context.Context) string {
	bc := busCallFrom(ctx)
	switch {
	case bc == nil:
		return ""
	case bc.runID != "":
		return "agent"
	}
	return "sov.tools.call"
}

// serveTools registers the micro service "sovereign-tools" with
// <prefix>.tools.list and <prefix>.tools.call.
func (g *Gateway) serveTools() error {
	svc, err := g.bus.AddService(toolsService, Version, "Sovereign gateway: the tool dispatcher for agent runs", nil)
	if err != nil {
		return fmt.Errorf("tools service: %w", err)
	}
	grp := svc.AddGroup(g.bus.Subject("tools"), micro.WithGroupQueueGroup(toolsQueue))
	for name, h := range map[string]micro.Handler{
		"list": bus.Handle(g.bus, g.busListTools),
		"call": bus.Handle(g.bus, g.busCallTool),
	} {
		if err := grp.AddEndpoint(name, h); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("tools endpoint %s: %w", name, err)
		}
	}
	g.toolsSvc = svc
	return nil
}

// stopTools stops answering on the bus.
func (g *Gateway) stopTools() {
	if g.toolsSvc != nil {
		if err := g.toolsSvc.Stop(); err != nil {
			g.log.Warn("stop the tools service", "err", err)
		}
	}
}

// busTool returns the catalog tool name if this gateway serves it.
func (g *Gateway) busTool(name string) (catalog.Tool, bool) {
	t, ok := catalog.Lookup(name)
	if !ok {
		return g.dynamicTool(name) // script and HTTP tools (extend.go)
	}
	if g.mcp.GetTool(name) == nil {
		return catalog.Tool{}, false
	}
	return t, true
}

// busListTools answers sov.tools.list: the catalog in its order; for agents
// without the tools that start runs, and without the session argument (a
// run's browser session is its request's, never the model's choice).
func (g *Gateway) busListTools(_ context.Context, r *toolsv1.ListToolsRequest) (*toolsv1.ListToolsResponse, error) {
	out := &toolsv1.ListToolsResponse{}
	for _, t := range catalog.Tools() {
		if _, ok := g.busTool(t.Name); !ok {
			continue
		}
		schema := t.InputSchema()
		if r.GetForAgent() {
			if t.StartsRuns() {
				continue
			}
			schema = t.AgentInputSchema()
		}
		out.Tools = append(out.Tools, &toolsv1.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchemaJson: string(schema), ReadOnly: t.ReadOnly,
		})
	}
	// Then the tools the operator deployed: scripts, HTTP tools.
	for _, t := range g.dynamicTools(r.GetForAgent()) {
		schema := t.RawInputSchema
		if schema == nil {
			schema, _ = json.Marshal(t.InputSchema)
		}
		out.Tools = append(out.Tools, &toolsv1.Tool{Name: t.Name, Title: t.Annotations.Title, Description: t.Description, InputSchemaJson: string(schema)})
	}
	return out, nil
}

// busSeq numbers the JSON-RPC ids of bus calls (they only need to be
// distinct from each other).
var busSeq atomic.Uint64

// busCallTool answers sov.tools.call through the MCP server's tools/call.
func (g *Gateway) busCallTool(ctx context.Context, r *toolsv1.CallToolRequest) (*toolsv1.CallToolResponse, error) {
	caller, err := busCaller(r.GetCaller(), r.GetRunId())
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(r.GetName())
	if name == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "name is required: a tool of %s", g.bus.Subject("tools", "list"))
	}
	t, ok := g.busTool(name)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "unknown tool %q: %s lists the tools", name, g.bus.Subject("tools", "list"))
	}
	if t.StartsRuns() {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s starts agent runs and is not callable on the bus (a run cannot start another run)", name)
	}
	args, err := busArguments(r.GetArgumentsJson())
	if err != nil {
		return nil, err
	}
	bc := &busCall{runID: r.GetRunId()}
	takesSession := slices.ContainsFunc(t.Params(), func(p catalog.Param) bool { return p.Name == catalog.SessionParam })
	if ref := strings.TrimSpace(r.GetSession()); ref != "" {
		var handle string
		switch {
		case strings.HasPrefix(ref, mcpRefPrefix):
			bc.mcpSession = strings.TrimPrefix(ref, mcpRefPrefix)
			if !state.ValidID(bc.mcpSession) {
				return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "session %q does not name an MCP session (mcp:<Mcp-Session-Id>)", ref)
			}
		case state.ValidHandle(ref):
			handle = ref
		default:
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"session %q is neither a session handle (%s…) nor mcp:<MCP session id>; leave it empty to open a browser session", ref, state.HandlePrefix)
		}
		if given, has := args[catalog.SessionParam]; has && takesSession && given != handle {
			return errorResponse(fmt.Sprintf("%s: the browser session is the request's (CallToolRequest.session); do not pass a %q argument as well", name, catalog.SessionParam)), nil
		}
		switch {
		case !takesSession: // a tool without a browser session: nothing to bind
			bc.mcpSession = ""
		case handle != "":
			args[catalog.SessionParam] = handle
		}
	}
	if caller.Kind == KindToken {
		// The token may have been revoked since the run started; its
		// policy is the one the gateway holds, not a copy.
		tok, ok := g.auth.tokens.Lookup(strings.TrimPrefix(caller.ID, "token:"))
		if !ok || tok.Revoked() {
			return errorResponse(fmt.Sprintf("%s: the caller's API token is revoked or unknown; the call was not run", name)), nil
		}
		caller.URLAllow, caller.URLBlock, caller.Approve = tok.URLAllow, tok.URLBlock, tok.Approve
	}

	msg, err := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      "bus-" + strconv.FormatUint(busSeq.Add(1), 10),
		"method":  string(mcp.MethodToolsCall),
		"params":  map[string]any{"name": name, "arguments": args},
	})
	if err != nil {
		return nil, fmt.Errorf("encode tools/call: %w", err)
	}
	ctx = context.WithValue(withCallerInfo(ctx, caller), busCallKey{}, bc)
	res, err := callResult(g.mcp.HandleMessage(ctx, msg))
	if err != nil {
		return nil, err
	}
	return busResponse(res), nil
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

// callResult is the tool result of the MCP server's answer to a tools/call.
func callResult(resp mcp.JSONRPCMessage) (*mcp.CallToolResult, error) {
	switch m := resp.(type) {
	case mcp.JSONRPCResponse:
		switch r := m.Result.(type) {
		case *mcp.CallToolResult:
			return r, nil
		case mcp.CallToolResult:
			return &r, nil
		}
		raw, err := json.Marshal(m.Result)
		if err != nil {
			return nil, fmt.Errorf("encode tool result: %w", err)
		}
		msg := json.RawMessage(raw)
		return mcp.ParseCallToolResult(&msg)
	case mcp.JSONRPCError:
		if m.Error.Code == mcp.INVALID_PARAMS && strings.Contains(m.Error.Message, "not found") {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s", m.Error.Message)
		}
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "tools/call: %s (JSON-RPC error %d)", m.Error.Message, m.Error.Code)
	}
	return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "tools/call: unexpected answer %T", resp)
}

// busResponse renders a tool result for the bus. The handle of the call's
// browser session goes into the response's session field only: not the
// "session: sov_…" line nor the structured content a new handle adds for
// MCP clients (the model of an agent run never sees a handle).
func busResponse(r *mcp.CallToolResult) *toolsv1.CallToolResponse {
	out := &toolsv1.CallToolResponse{IsError: r.IsError}
	if r.Meta != nil {
		out.Session, _ = r.Meta.AdditionalFields[MetaSession].(string)
	}
	for _, c := range r.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			if out.Session != "" && strings.HasPrefix(c.Text, "session: "+out.Session+" ") {
				continue
			}
			out.Content = append(out.Content, &toolsv1.Content{Type: "text", Text: c.Text})
		case mcp.ImageContent:
			data, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				out.Content = append(out.Content, &toolsv1.Content{Type: "text", Text: fmt.Sprintf("[image %s that could not be decoded]", c.MIMEType)})
				continue
			}
			out.Content = append(out.Content, &toolsv1.Content{Type: "image", MimeType: c.MIMEType, Data: data})
		default:
			raw, _ := json.Marshal(c)
			out.Content = append(out.Content, &toolsv1.Content{Type: "text", Text: string(raw)})
		}
	}
	if r.StructuredContent != nil {
		raw, err := json.Marshal(r.StructuredContent)
		var fields map[string]json.RawMessage
		if err == nil && out.Session != "" && json.Unmarshal(raw, &fields) == nil {
			if s, ok := fields["session"]; ok && string(s) == strconv.Quote(out.Session) {
				delete(fields, "session")
				raw, err = json.Marshal(fields)
				if len(fields) == 0 {
					raw = nil
				}
			}
		}
		if err == nil && raw != nil && string(raw) != "null" {
			out.StructuredJson = string(raw)
		}
	}
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
func (g *Gateway) bindMCPRef(ctx context.Context, id string) (*binding, error) {
	caller := callerFrom(ctx)
	e, err := g.store.Get(ctx, state.MCP, id)
	if errors.Is(err, state.ErrNotFound) || err == nil && e.Owner != caller {
		// Another caller's MCP session is as unknown as a made-up one.
		return nil, toolErr("the MCP session this call acts in is unknown or expired (MCP sessions expire after %s unused); its browser session is gone",
			g.cfg.SessionTTL)
	}
	if err != nil {
		return nil, err
	}
	if e.Terminated {
		return nil, toolErr("the MCP session this call acts in was terminated (its client ended it), and its browser session closed")
	}
	return g.ensureBound(ctx, e, caller)
}
