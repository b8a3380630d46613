package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
	"github.com/sovereign-fleet/sovereign/services/kit/toolsbus"
)

// MaxToolResult bounds the text of one tool result that the model sees
// and the chat stores (characters); longer results are clipped with a
// note saying how much was cut.
const MaxToolResult = 24000

// sessionParam is the argument that names the browser session: the agent
// keeps the session handle itself, so the model never sees it.
const sessionParam = "session"

// catalog is the tools of a run.
type catalog struct {
	names  map[string]bool
	params []openai.ChatCompletionToolUnionParam
	chars  int // size of the definitions, for the context budget
}

// listTools asks the gateway for the agent's tools and turns them into
// OpenAI function tools.
func (a *Agent) listTools(ctx context.Context) (*catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ToolTimeout)
	defer cancel()
	resp, err := toolsbus.List.Call(ctx, a.bus, &toolsv1.ListToolsRequest{ForAgent: true})
	if err != nil {
		return nil, fmt.Errorf("the tool catalog is not reachable (%s; is a gateway running?): %v", toolsbus.List.Subject(a.bus), err)
	}
	c := &catalog{names: map[string]bool{}}
	for _, t := range resp.GetTools() {
		schema, err := agentSchema(t.GetInputSchemaJson())
		if err != nil {
			a.log.Warn("tool left out: its input schema is not a JSON object", "tool", t.GetName(), "err", err)
			continue
		}
		desc := t.GetDescription()
		if desc == "" {
			desc = t.GetTitle()
		}
		def := shared.FunctionDefinitionParam{Name: t.GetName(), Parameters: schema}
		if desc != "" {
			def.Description = openai.String(desc)
		}
		c.params = append(c.params, openai.ChatCompletionFunctionTool(def))
		c.names[t.GetName()] = true
		b, _ := json.Marshal(schema)
		c.chars += len(t.GetName()) + len(desc) + len(b)
	}
	return c, nil
}

// agentSchema is a tool's input schema without the session argument.
func agentSchema(text string) (map[string]any, error) {
	schema := map[string]any{}
	if strings.TrimSpace(text) != "" {
		if err := json.Unmarshal([]byte(text), &schema); err != nil {
			return nil, err
		}
	}
	if schema["type"] == nil {
		schema["type"] = "object"
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		delete(props, sessionParam)
	} else {
		schema["properties"] = map[string]any{}
	}
	if req, ok := schema["required"].([]any); ok {
		req = slices.DeleteFunc(req, func(v any) bool { return v == sessionParam })
		if len(req) == 0 {
			delete(schema, "required")
		} else {
			schema["required"] = req
		}
	}
	return schema, nil
}

// toolOutcome is how one tool call went, for the metric.
type toolOutcome string

const (
	toolOK        toolOutcome = "ok"
	toolError     toolOutcome = "tool_error"
	toolBusError  toolOutcome = "bus_error"
	toolMalformed toolOutcome = "malformed"
	toolTimeout   toolOutcome = "timeout"
)

// callTool runs one tool call of the model through the gateway's
// dispatcher and returns the text the model sees. A malformed call and a
// failed request become a tool error for the model, not a run error.
func (r *run) callTool(ctx context.Context, cat *catalog, tc toolCall) (string, toolOutcome) {
	name := tc.Function.Name
	if !cat.names[name] {
		known := make([]string, 0, len(cat.names))
		for n := range cat.names {
			known = append(known, n)
		}
		slices.Sort(known)
		return fmt.Sprintf("error: there is no tool named %q; the tools are: %s", name, strings.Join(known, ", ")), toolMalformed
	}
	args := map[string]json.RawMessage{}
	raw := strings.TrimSpace(tc.Function.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		return fmt.Sprintf("error: the arguments of %s must be a JSON object (got %s); call it again with an object matching its schema", name, clip(raw, 200)), toolMalformed
	}
	delete(args, sessionParam)
	argJSON, _ := json.Marshal(args)

	limit := callTimeout(r.a.cfg.ToolTimeout, args)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req := &toolsv1.CallToolRequest{Caller: r.caller, Name: name, ArgumentsJson: string(argJSON), Session: r.session(), RunId: r.id}
	resp, err := toolsbus.Call.Call(ctx, r.a.bus, req)
	if err != nil {
		if r.ctx.Err() != nil {
			return "error: cancelled", toolBusError
		}
		if bus.Is(err, commonv1.ErrorCode_TIMEOUT) {
			return fmt.Sprintf("error: %s did not finish within the tool timeout (%s)", name, limit), toolTimeout
		}
		return "error: " + err.Error(), toolBusError
	}
	if s := resp.GetSession(); s != "" {
		r.setSession(s)
	}
	text := resultText(resp)
	if resp.GetIsError() {
		return "error: " + text, toolError
	}
	return text, toolOK
}

// callTimeout bounds one tool call: the configured tool timeout, or
// longer for a call that asks for its own longer wait (timeout_ms, as
// shell_exec and wait_for take) — that wait plus 30 s, so the tool's own
// timeout, which says what happened, fires first.
func callTimeout(base time.Duration, args map[string]json.RawMessage) time.Duration {
	var ms float64
	if raw, ok := args["timeout_ms"]; ok && json.Unmarshal(raw, &ms) == nil && ms > 0 {
		if want := time.Duration(ms)*time.Millisecond + 30*time.Second; want > base {
			return want
		}
	}
	return base
}

// resultText is the text of a tool result for the model: the text
// contents joined, images named instead of shown, clipped to
// MaxToolResult characters.
func resultText(resp *toolsv1.CallToolResponse) string {
	var parts []string
	for _, c := range resp.GetContent() {
		switch c.GetType() {
		case "image":
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes — not shown to the model]", c.GetMimeType(), len(c.GetData())))
		case "resource":
			parts = append(parts, fmt.Sprintf("[file: %s, %d bytes — not shown to the model]", c.GetMimeType(), len(c.GetData())))
		default:
			if c.GetText() != "" {
				parts = append(parts, c.GetText())
			}
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" && resp.GetStructured() != nil {
		text = string(structured.JSON(resp.GetStructured()))
	}
	if text == "" {
		text = "(no output)"
	}
	return clip(text, MaxToolResult)
}
