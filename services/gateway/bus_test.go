package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Callers of bus calls in these tests.
var (
	busAlice = &toolsv1.Caller{Kind: gateway.KindOAuth, Id: "oauth:alice", Name: "alice"}
	busBob   = &toolsv1.Caller{Kind: gateway.KindOAuth, Id: "oauth:bob", Name: "bob"}
	busAnon  = &toolsv1.Caller{Kind: gateway.KindAnonymous, Id: gateway.Anonymous, Name: gateway.Anonymous}
)

// busList asks sov.tools.list.
func busList(t *testing.T, c *bus.Conn, forAgent bool) []*toolsv1.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := &toolsv1.ListToolsResponse{}
	if err := c.Request(ctx, c.Subject("tools", "list"), &toolsv1.ListToolsRequest{ForAgent: forAgent}, resp); err != nil {
		t.Fatalf("sov.tools.list: %v", err)
	}
	return resp.GetTools()
}

// busCall sends sov.tools.call.
func busCall(c *bus.Conn, r *toolsv1.CallToolRequest) (*toolsv1.CallToolResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp := &toolsv1.CallToolResponse{}
	err := c.Request(ctx, c.Subject("tools", "call"), r, resp)
	return resp, err
}

// busOK sends sov.tools.call and fails the test unless the tool succeeded.
func busOK(t *testing.T, c *bus.Conn, r *toolsv1.CallToolRequest) (*toolsv1.CallToolResponse, string) {
	t.Helper()
	resp, err := busCall(c, r)
	if err != nil {
		t.Fatalf("sov.tools.call %s: %v", r.GetName(), err)
	}
	if resp.GetIsError() {
		t.Fatalf("sov.tools.call %s: tool error %q", r.GetName(), busText(resp))
	}
	return resp, busText(resp)
}

// busErr sends sov.tools.call and fails the test unless the tool failed
// with an error containing want.
func busErr(t *testing.T, c *bus.Conn, r *toolsv1.CallToolRequest, want string) {
	t.Helper()
	resp, err := busCall(c, r)
	if err != nil {
		t.Fatalf("sov.tools.call %s: %v (want a tool error)", r.GetName(), err)
	}
	if !resp.GetIsError() || !strings.Contains(busText(resp), want) {
		t.Fatalf("sov.tools.call %s = %q (is_error %v), want a tool error containing %q", r.GetName(), busText(resp), resp.GetIsError(), want)
	}
}

// busCode sends sov.tools.call and fails the test unless it is refused on
// the bus with code and a message containing want.
func busCode(t *testing.T, c *bus.Conn, r *toolsv1.CallToolRequest, code commonv1.ErrorCode, want string) {
	t.Helper()
	resp, err := busCall(c, r)
	if !bus.Is(err, code) || !strings.Contains(err.Error(), want) {
		t.Fatalf("sov.tools.call %s = %v, %q; want %s containing %q", r.GetName(), err, busText(resp), code, want)
	}
}

func busText(r *toolsv1.CallToolResponse) string {
	var parts []string
	for _, c := range r.GetContent() {
		if c.GetType() == "text" {
			parts = append(parts, c.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

// TestBusTools drives the dispatcher on the bus through a real gateway, a
// real worker and Chromium: listing, handles minted and reused, another
// caller's handle, an MCP session's browser session shared with a bus
// call, and every refusal.
func TestBusTools(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 4)
	url := startGateway(t, srv, gateway.Config{})
	c := connect(t, srv)
	site := startSite(t)

	t.Run("list", func(t *testing.T) {
		mc := modernClient(t, url, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mcpList, err := mc.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var mcpNames []string
		for _, tool := range mcpList.Tools {
			mcpNames = append(mcpNames, tool.Name)
		}
		var all []string
		for _, tool := range busList(t, c, false) {
			all = append(all, tool.GetName())
		}
		slices.Sort(mcpNames)
		if got := slices.Sorted(slices.Values(all)); !slices.Equal(got, mcpNames) {
			t.Errorf("sov.tools.list = %v, want what MCP tools/list serves: %v", got, mcpNames)
		}
		if !slices.Contains(all, "run_browser_task") {
			t.Errorf("sov.tools.list without for_agent lacks run_browser_task: %v", all)
		}

		agentTools := busList(t, c, true)
		if len(agentTools) != len(all)-1 {
			t.Errorf("for_agent lists %d tools, want %d (all but run_browser_task)", len(agentTools), len(all)-1)
		}
		for _, tool := range agentTools {
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if err := json.Unmarshal([]byte(tool.GetInputSchemaJson()), &schema); err != nil || schema.Type != "object" {
				t.Errorf("%s: input schema %s: %v", tool.GetName(), tool.GetInputSchemaJson(), err)
			}
			if tool.GetName() == "run_browser_task" {
				t.Errorf("for_agent lists run_browser_task: an agent run could start another")
			}
			if _, ok := schema.Properties["session"]; ok {
				t.Errorf("%s: the agent's schema has a session argument; a run's session is its request's", tool.GetName())
			}
			if tool.GetName() == "open" && (!slices.Equal(schema.Required, []string{"url"}) || tool.GetDescription() == "" || tool.GetReadOnly()) {
				t.Errorf("open as listed for agents: %v", tool)
			}
			if tool.GetName() == "snapshot" && !tool.GetReadOnly() {
				t.Errorf("snapshot is not read-only: %v", tool)
			}
		}
	})

	var handle string
	t.Run("open and snapshot in a minted handle", func(t *testing.T) {
		resp, txt := busOK(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "open", ArgumentsJson: `{"url":"` + site + `"}`})
		handle = resp.GetSession()
		if !strings.HasPrefix(handle, "sov_") {
			t.Fatalf("open without a session: response session %q, want a new handle", handle)
		}
		if strings.Contains(txt, handle) || strings.Contains(resp.GetStructured().String(), handle) {
			t.Errorf("the handle is in the content or structured result: %q / %s", txt, resp.GetStructured().String())
		}
		_, snap := busOK(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "snapshot", Session: handle})
		if !regexp.MustCompile(`button "Go" \[ref=e\d+\]`).MatchString(snap) {
			t.Errorf("snapshot in the handle's session has no Go button:\n%s", snap)
		}
		resp, title := busOK(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_title", Session: handle, ArgumentsJson: "{}"})
		if !strings.Contains(title, "Sovereign test") || resp.GetSession() != handle {
			t.Errorf("get_title with the handle = %q (session %q)", title, resp.GetSession())
		}
		// The same handle given in the arguments too is the same session.
		busOK(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", Session: handle, ArgumentsJson: `{"session":"` + handle + `"}`})
	})

	t.Run("another caller's handle", func(t *testing.T) {
		if handle == "" {
			t.Skip("no handle")
		}
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busBob, Name: "get_url", Session: handle}, "unknown or expired session handle")
	})

	t.Run("MCP session reference", func(t *testing.T) {
		lc := legacyClient(t, url, nil) // anonymous
		mustOK(t, callTool(t, lc, "open", map[string]any{"url": site}), "open")
		mustOK(t, callTool(t, lc, "open", map[string]any{"url": site + "/next"}), "open next")
		ref := "mcp:" + lc.GetSessionId()
		_, got := busOK(t, c, &toolsv1.CallToolRequest{Caller: busAnon, Name: "get_url", Session: ref, RunId: "r_mcpref"})
		if !strings.Contains(got, site+"/next") {
			t.Errorf("get_url on the bus in the MCP session's browser session = %q, want %s/next", got, site)
		}
		// What the bus call does, the MCP client sees.
		busOK(t, c, &toolsv1.CallToolRequest{Caller: busAnon, Name: "back", Session: ref})
		if got := mustOK(t, callTool(t, lc, "get_title", nil), "get_title"); !strings.Contains(got, "Sovereign test") {
			t.Errorf("the MCP client's title after the bus call went back = %q", got)
		}
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busBob, Name: "get_url", Session: ref}, "unknown or expired")
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busAnon, Name: "get_url", Session: ref, ArgumentsJson: `{"session":"` + handle + `"}`},
			"do not pass a \"session\" argument")

		del := &rpc{t: t, url: url, session: lc.GetSessionId()}
		if r := del.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
			t.Fatalf("DELETE: %d %s", r.status, r.body)
		}
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busAnon, Name: "get_url", Session: ref}, "was terminated")
	})

	t.Run("tool errors", func(t *testing.T) {
		if handle == "" {
			t.Skip("no handle")
		}
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "eval", Session: handle, ArgumentsJson: `{"script":"throw new Error('boom')"}`},
			"JavaScript error")
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "open", Session: handle, ArgumentsJson: `{}`}, `argument "url" is required`)
		busErr(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", Session: "sov_madeupbutwellformed"}, "unknown or expired session handle")
	})

	t.Run("refused requests", func(t *testing.T) {
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "no_such_tool"}, commonv1.ErrorCode_NOT_FOUND, `unknown tool "no_such_tool"`)
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "run_browser_task", ArgumentsJson: `{"task":"x"}`},
			commonv1.ErrorCode_NOT_FOUND, "not callable on the bus")
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", ArgumentsJson: `[1,2]`},
			commonv1.ErrorCode_INVALID_ARGUMENT, "arguments_json must be a JSON object, got an array")
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", ArgumentsJson: `{"unclosed":`},
			commonv1.ErrorCode_INVALID_ARGUMENT, "arguments_json is not valid JSON")
		busCode(t, c, &toolsv1.CallToolRequest{Name: "get_url"}, commonv1.ErrorCode_INVALID_ARGUMENT, "caller is required")
		busCode(t, c, &toolsv1.CallToolRequest{Caller: &toolsv1.Caller{Kind: "oauth"}, Name: "get_url"},
			commonv1.ErrorCode_INVALID_ARGUMENT, "caller.id is required")
		busCode(t, c, &toolsv1.CallToolRequest{Caller: &toolsv1.Caller{Kind: "robot", Id: "x"}, Name: "get_url"},
			commonv1.ErrorCode_INVALID_ARGUMENT, `caller.kind "robot"`)
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_url", Session: "my-session"},
			commonv1.ErrorCode_INVALID_ARGUMENT, "neither a session handle")
		busCode(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: ""}, commonv1.ErrorCode_INVALID_ARGUMENT, "name is required")
	})
}

// TestBusAuditAndApprovals: a bus call of an agent run is recorded with the
// run in its caller and "agent" as its client, and a monitored tool's call
// waits on the console's queue (there is no MCP client to ask).
func TestBusAuditAndApprovals(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"secrets_list"}}})
	c := connect(t, srv)
	q, watch := watchConsole(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const run = "r_0123456789abcdefABCDEF"
	type result struct {
		resp *toolsv1.CallToolResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := busCall(c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "secrets_list", RunId: run})
		done <- result{resp, err}
	}()
	p := pendingOf(t, watch)
	if p.Tool != "secrets_list" || p.Caller != "alice (agent run "+run+")" || p.Client != "agent" {
		t.Errorf("the console sees %+v; want the run in the caller and agent as the client", p)
	}
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.resp.GetIsError() || !strings.Contains(busText(r.resp), "No secrets are stored") {
		t.Fatalf("secrets_list approved on the console: %v, %q", r.err, busText(r.resp))
	}
	busErr(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "get_title", RunId: run, Session: "sov_madeupbutwellformed"},
		"unknown or expired session handle")

	recs := auditRecords(t, srv, 2)
	if rec := recs[0]; rec.GetTool() != "secrets_list" || rec.GetCaller() != "alice (agent run "+run+")" || rec.GetClient() != "agent" ||
		rec.GetOutcome() != historyv1.Outcome_OUTCOME_OK || rec.GetApproval().GetDecidedBy() != "console:admin" {
		t.Errorf("audit record of the approved bus call: %v", rec)
	}
	if rec := recs[1]; rec.GetTool() != "get_title" || rec.GetCaller() != "alice (agent run "+run+")" ||
		rec.GetOutcome() != historyv1.Outcome_OUTCOME_ERROR {
		t.Errorf("audit record of the failed bus call: %v", rec)
	}
}

// TestBusCapabilities: what a handler can do with a bus caller, as the bus
// adapter documents it. Progress reports and notices are dropped by
// dispatch.NoProgress, on purpose (the response is the one reply); nobody
// can be asked in the call, so a monitored tool's call waits for the
// console, and a denial there refuses it with who denied it and why.
func TestBusCapabilities(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, "")
	g, _ := startGatewayG(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"secrets_list"}}})
	c := connect(t, srv)
	gateway.AddProbe(g, "probe", func(ctx context.Context, call *dispatch.Call) *dispatch.Result {
		if call.Progress != dispatch.NoProgress || call.Ask != nil || call.Rounds != nil {
			return dispatch.Errorf("capabilities: progress %T, ask %v, rounds %v; want NoProgress and no way to ask", call.Progress, call.Ask, call.Rounds)
		}
		if err := call.Progress.Report(ctx, 1, 2, "half way"); err != nil {
			return dispatch.Errorf("report: %v", err)
		}
		if err := call.Progress.Notify(ctx, "probe", "look", true); err != nil {
			return dispatch.Errorf("notify: %v", err)
		}
		return dispatch.Text("probed")
	})

	t.Run("progress", func(t *testing.T) {
		if _, got := busOK(t, c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "probe"}); got != "probed" {
			t.Errorf("probe = %q, want probed", got)
		}
	})
	t.Run("approval denied on the console", func(t *testing.T) {
		q, watch := watchConsole(t, srv)
		done := make(chan *toolsv1.CallToolResponse, 1)
		go func() {
			resp, err := busCall(c, &toolsv1.CallToolRequest{Caller: busAlice, Name: "secrets_list", RunId: "r_0123456789abcdefABCDEF"})
			if err != nil {
				t.Errorf("sov.tools.call secrets_list: %v", err)
			}
			done <- resp
		}()
		p := pendingOf(t, watch)
		if _, err := q.Decide(context.Background(), p.ID, false, "", "console:admin", "not from a run"); err != nil {
			t.Fatal(err)
		}
		resp := <-done
		if want := "secrets_list was denied by console:admin: not from a run"; !resp.GetIsError() || busText(resp) != want {
			t.Fatalf("secrets_list denied on the console = %q (is_error %v), want %q", busText(resp), resp.GetIsError(), want)
		}
	})
}
