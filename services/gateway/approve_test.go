package gateway_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
)

// elicitor is a client's user answering approval forms: it counts the
// forms and answers each with answer.
type elicitor struct {
	mu     sync.Mutex
	asked  []mcp.ElicitationRequest
	answer func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.asked = append(e.asked, req)
	answer := e.answer
	e.mu.Unlock()
	return answer(req)
}

// decide makes the user answer every form with decision.
func (e *elicitor) decide(decision string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": decision},
		}}, nil
	}
}

func (e *elicitor) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.asked)
}

func (e *elicitor) last() mcp.ElicitationRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.asked[len(e.asked)-1]
}

var requestIDInForm = regexp.MustCompile(`\(request ([A-Za-z0-9_-]+)\)`)

// formRequestID is the approval request a form names.
func formRequestID(t *testing.T, req mcp.ElicitationRequest) string {
	t.Helper()
	m := requestIDInForm.FindStringSubmatch(req.Params.Message)
	if m == nil {
		t.Fatalf("the form names no request: %q", req.Params.Message)
	}
	return m[1]
}

// elicitingClient is an mcp-go client, on protocol 2025-11-25 or (modern)
// 2026-07-28, whose user answers forms through e (nil: the client declares
// no elicitation capability).
func elicitingClient(t *testing.T, url string, modern bool, e *elicitor) *client.Client {
	t.Helper()
	return elicitingClientAs(t, url, modern, e, nil)
}

// elicitingClientAs is elicitingClient sending headers (a caller's
// Authorization).
func elicitingClientAs(t *testing.T, url string, modern bool, e *elicitor, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if e != nil {
		opts = append(opts, client.WithElicitationHandler(e))
	}
	if !modern {
		opts = append(opts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	c := client.NewClient(tr, opts...)
	initClient(t, c)
	if mcp.IsModernProtocol(c.ProtocolVersion()) != modern {
		t.Fatalf("client negotiated %s", c.ProtocolVersion())
	}
	return c
}

// titleSite serves a page titled Start.
func titleSite(t *testing.T) string {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Start</title><p>approvals</p>`)
	}))
	t.Cleanup(site.Close)
	return site.URL
}

// console opens the approval queue as another gateway replica's console
// would: its own NATS connection on the same server.
func console(t *testing.T, srv *natsrv.Server) *approval.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := approval.Open(ctx, connect(t, srv).NATS(), "sov")
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// watchConsole opens the approval queue as a console would and watches
// its requests until the test ends.
func watchConsole(t *testing.T, srv *natsrv.Server) (*approval.Queue, <-chan approval.Request) {
	t.Helper()
	q := console(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watch, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return q, watch
}

// pendingOf waits for the next pending request on a console's watch.
func pendingOf(t *testing.T, ch <-chan approval.Request) approval.Request {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case r := <-ch:
			if r.State == approval.Pending {
				return r
			}
		case <-timeout:
			t.Fatal("no approval request reached the console")
		}
	}
}

// toolCall is callTool that also hands back the call's outcome asynchronously.
func toolCall(t *testing.T, c *client.Client, name string, args map[string]any) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			res = mcp.NewToolResultError("protocol error: " + err.Error())
		}
		out <- res
	}()
	return out
}

func await(t *testing.T, ch <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(90 * time.Second):
		t.Fatal("the call did not return")
	}
	return nil
}

// wantApproval checks the approval an audit record carries.
func wantApproval(t *testing.T, r *historyv1.AuditRecord, state, scope, by string) {
	t.Helper()
	a := r.GetApproval()
	if a.GetState() != state || a.GetScope() != scope || a.GetDecidedBy() != by || a.GetRequestId() == "" || a.GetDecidedAtUnixMilli() == 0 {
		t.Errorf("record of %s %s: approval %v, want %s/%s by %s", r.GetTool(), r.GetArguments(), a, state, scope, by)
	}
	wantOutcome := historyv1.Outcome_OUTCOME_OK
	if state != "approved" {
		wantOutcome = historyv1.Outcome_OUTCOME_DENIED
	}
	if r.GetOutcome() != wantOutcome {
		t.Errorf("record of %s %s: outcome %v, want %v", r.GetTool(), r.GetArguments(), r.GetOutcome(), wantOutcome)
	}
}

const approvalClientName = "elicitation:gateway-test 1.0"

// TestApprovalElicitation: a 2025 client that declared elicitation is
// asked on the call's stream; deny refuses the call (it does not run),
// approve_once runs it, approve_session runs it and the next call of the
// same tool in the session without asking; the trail says who decided.
func TestApprovalElicitation(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	url := startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval"}}})
	site := titleSite(t)
	e := &elicitor{}
	c := elicitingClient(t, url, false, e)

	if res := callTool(t, c, "open", map[string]any{"url": site}); res.IsError || e.count() != 0 {
		t.Fatalf("open (not monitored): %s, %d forms", text(res), e.count())
	}
	e.decide("deny")
	res := callTool(t, c, "eval", map[string]any{"script": `document.title = "denied"; "ran"`})
	if !res.IsError || text(res) != "eval was denied by "+approvalClientName {
		t.Fatalf("denied eval: %v %q", res.IsError, text(res))
	}
	form := e.last()
	if !strings.Contains(form.Params.Message, `{"script":"document.title = \"denied\"; \"ran\""}`) ||
		!strings.Contains(form.Params.Message, `tool "eval" is monitored`) {
		t.Errorf("the form does not show the exact call: %q", form.Params.Message)
	}
	schema, _ := json.Marshal(form.Params.RequestedSchema)
	if !strings.Contains(string(schema), `"enum":["approve_once","approve_session","deny"]`) {
		t.Errorf("form schema %s", schema)
	}
	if res := callTool(t, c, "get_title", nil); text(res) != "Start" {
		t.Fatalf("the denied eval ran: title %q", text(res))
	}

	e.decide("approve_once")
	if res := callTool(t, c, "eval", map[string]any{"script": `document.title = "once"; "ran once"`}); res.IsError || !strings.Contains(text(res), "ran once") {
		t.Fatalf("approved eval: %q", text(res))
	}
	e.decide("approve_session")
	if res := callTool(t, c, "eval", map[string]any{"script": `document.title = "s1"`}); res.IsError {
		t.Fatalf("eval approved for the session: %q", text(res))
	}
	asked := e.count()
	e.decide("deny") // would refuse, were it asked
	if res := callTool(t, c, "eval", map[string]any{"script": `document.title = "s2"`}); res.IsError {
		t.Fatalf("eval after approve_session: %q", text(res))
	}
	if e.count() != asked || asked != 3 {
		t.Errorf("%d forms after the session approval, %d before; want 3 and no new one", e.count(), asked)
	}
	if res := callTool(t, c, "get_title", nil); text(res) != "s2" {
		t.Errorf("title %q, want s2", text(res))
	}

	recs := auditRecords(t, srv, 7)
	wantApproval(t, recs[1], "denied", "", approvalClientName)
	if recs[2].GetApproval() != nil || recs[0].GetApproval() != nil {
		t.Errorf("calls of tools that are not monitored carry approvals: %v, %v", recs[0].GetApproval(), recs[2].GetApproval())
	}
	wantApproval(t, recs[3], "approved", "once", approvalClientName)
	wantApproval(t, recs[4], "approved", "session", approvalClientName)
	wantApproval(t, recs[5], "approved", "session", approvalClientName)
	if recs[5].GetApproval().GetRequestId() != recs[4].GetApproval().GetRequestId() || recs[5].GetApproval().GetWaitedMs() != 0 {
		t.Errorf("the call allowed by the session grant: %v, want the request of %v", recs[5].GetApproval(), recs[4].GetApproval())
	}
	if !strings.Contains(recs[1].GetResult(), "denied by") {
		t.Errorf("denied record result %q", recs[1].GetResult())
	}
}

// TestApprovalConsole: a client that cannot be asked waits for the
// console, here another replica's: it sees the exact call (without the
// session handle) and decides; the call runs or is refused with who denied
// it and why.
func TestApprovalConsole(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	url := startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval"}}})
	q := console(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := elicitingClient(t, url, true, nil) // 2026, no elicitation
	handle := metaSession(callTool(t, c, "open", map[string]any{"url": titleSite(t)}))
	if handle == "" {
		t.Fatal("no handle")
	}

	call := toolCall(t, c, "eval", map[string]any{"session": handle, "script": `document.title = "approved"; 40 + 2`})
	p := pendingOf(t, watch)
	if p.Tool != "eval" || p.Arguments != `{"script":"document.title = \"approved\"; 40 + 2"}` || p.Caller != gateway.Anonymous ||
		p.Client != "gateway-test 1.0" || p.Scope == "" || p.Grant != "tool:eval" || !strings.Contains(p.Reason, "monitored") {
		t.Errorf("the console sees %+v", p)
	}
	all, _ := json.Marshal(p)
	if strings.Contains(string(all), handle) {
		t.Errorf("the approval request holds the session handle: %s", all)
	}
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); res.IsError || !strings.Contains(text(res), "42") {
		t.Fatalf("eval approved on the console: %q", text(res))
	}

	call = toolCall(t, c, "eval", map[string]any{"session": handle, "script": `document.title = "denied"`})
	p = pendingOf(t, watch)
	if _, err := q.Decide(ctx, p.ID, false, "", "console:admin", "not on this site"); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); !res.IsError || text(res) != "eval was denied by console:admin: not on this site" {
		t.Fatalf("eval denied on the console: %v %q", res.IsError, text(res))
	}
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:other", ""); err == nil || !strings.Contains(err.Error(), "denied by console:admin") {
		t.Errorf("deciding again: %v", err)
	}
	if res := callTool(t, c, "get_title", map[string]any{"session": handle}); text(res) != "approved" {
		t.Errorf("title %q: the denied eval ran", text(res))
	}
	recs := auditRecords(t, srv, 4)
	wantApproval(t, recs[1], "approved", "once", "console:admin")
	wantApproval(t, recs[2], "denied", "", "console:admin")
	if w := recs[1].GetApproval().GetWaitedMs(); w < 0 || w > 60000 {
		t.Errorf("waited %d ms", w)
	}
}

// TestApprovalTimeout: a call nobody decides is denied after
// --approval-timeout, with a clear error, and recorded so.
func TestApprovalTimeout(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 1)
	url := startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval", "click"}, ApprovalTimeout: 5 * time.Second}})
	c := elicitingClient(t, url, false, nil) // 2025, no elicitation
	callTool(t, c, "open", map[string]any{"url": titleSite(t)})
	start := time.Now()
	res := callTool(t, c, "eval", map[string]any{"script": `document.title = "late"`})
	if took := time.Since(start); took < 5*time.Second || took > 20*time.Second {
		t.Errorf("the undecided call returned after %s", took)
	}
	if !res.IsError || text(res) != "eval needs approval and nobody decided within 5s; it was not run" {
		t.Fatalf("undecided eval: %v %q", res.IsError, text(res))
	}
	if res := callTool(t, c, "get_title", nil); text(res) != "Start" {
		t.Errorf("title %q: the undecided eval ran", text(res))
	}
	recs := auditRecords(t, srv, 3)
	wantApproval(t, recs[1], "timeout", "", "timeout")
}

// TestApprovalRoundTrip: a 2026 client that declares elicitation gets the
// form as an input_required result and answers in its retry; the retry
// resumes the pending request (the console may decide first), and a replay
// of an approved retry does not run the tool again.
func TestApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	url := startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval"}}})
	q := console(t, srv)
	e := &elicitor{}
	c := elicitingClient(t, url, true, e)
	handle := metaSession(callTool(t, c, "open", map[string]any{"url": titleSite(t)}))
	if handle == "" {
		t.Fatal("no handle")
	}
	eval := func(script string) *mcp.CallToolResult {
		return callTool(t, c, "eval", map[string]any{"session": handle, "script": script})
	}

	e.decide("approve_once")
	onceArgs := map[string]any{"session": handle, "script": `window.runs = (window.runs || 0) + 1; window.runs`}
	if res := callTool(t, c, "eval", onceArgs); res.IsError || text(res) != "1" {
		t.Fatalf("approved eval: %q", text(res))
	}
	onceID := formRequestID(t, e.last())

	e.decide("deny")
	if res := eval(`document.title = "denied"`); !res.IsError || text(res) != "eval was denied by "+approvalClientName {
		t.Fatalf("denied eval: %q", text(res))
	}

	// The console decides while the user looks at the form: the console's
	// decision counts.
	e.mu.Lock()
	e.answer = func(req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if _, err := q.Decide(context.Background(), formRequestID(t, req), false, "", "console:admin", ""); err != nil {
			return nil, err
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": "approve_once"}}}, nil
	}
	e.mu.Unlock()
	if res := eval(`document.title = "console"`); !res.IsError || text(res) != "eval was denied by console:admin" {
		t.Fatalf("eval the console denied first: %q", text(res))
	}

	// A replay of the approved retry: refused, the script does not run.
	replayed := replayApproval(t, c, onceArgs, onceID)
	if !replayed.IsError || !strings.Contains(text(replayed), "already used") {
		t.Fatalf("replayed retry: %v %q", replayed.IsError, text(replayed))
	}

	e.decide("approve_session")
	if res := eval(`document.title = "s1"; window.runs`); res.IsError || text(res) != "1" {
		t.Fatalf("eval approved for the session: %q (window.runs is 1 unless the replay ran)", text(res))
	}
	asked := e.count()
	e.decide("deny")
	if res := eval(`document.title = "s2"`); res.IsError || e.count() != asked {
		t.Fatalf("eval after approve_session: %q, %d forms (was %d)", text(res), e.count(), asked)
	}
	if res := callTool(t, c, "get_title", map[string]any{"session": handle}); text(res) != "s2" {
		t.Errorf("title %q, want s2", text(res))
	}

	// One record per call: the input_required rounds are not calls.
	recs := auditRecords(t, srv, 8)
	wantApproval(t, recs[1], "approved", "once", approvalClientName)
	wantApproval(t, recs[2], "denied", "", approvalClientName)
	wantApproval(t, recs[3], "denied", "", "console:admin")
	if r := recs[4]; r.GetOutcome() != historyv1.Outcome_OUTCOME_DENIED || !strings.Contains(r.GetResult(), "already used") {
		t.Errorf("replay record: %v", r)
	}
	wantApproval(t, recs[5], "approved", "session", approvalClientName)
	wantApproval(t, recs[6], "approved", "session", approvalClientName)
	if recs[7].GetTool() != "get_title" {
		t.Errorf("records: %v", recs)
	}
}

func TestApprovalConfig(t *testing.T) {
	good := gateway.Config{
		Listen: "127.0.0.1:8080", ToolTimeout: time.Minute, SessionTTL: time.Hour, MaxBody: 1 << 20, Bucket: "sov_sessions",
		// shell_exec is a system tool, jira__search a script tool: both
		// may be monitored although the gateway may not serve them yet.
		ApprovalConfig: gateway.ApprovalConfig{
			ApproveTools:    []string{"eval", "fill", "shell_exec", "jira__search"},
			ApprovalTimeout: 5 * time.Second,
		},
	}
	if err := good.Validate(); err != nil {
		t.Errorf("valid approval settings: %v", err)
	}
	for _, tc := range []struct {
		modify func(*gateway.Config)
		want   string
	}{
		{func(c *gateway.Config) { c.ApproveTools = []string{"eval", "evaluate"} }, `--approve-tools: "evaluate" is not a tool of the catalog, a script tool (stem__name) or an HTTP tool of --http-tools; the tools are login_status, login, logout, switch_identity, open, `},
		{func(c *gateway.Config) { c.ApprovalTimeout = time.Second }, "--approval-timeout: 1s must be from 5s to 1h0m0s"},
		{func(c *gateway.Config) { c.ApprovalTimeout = 2 * time.Hour }, "--approval-timeout: 2h0m0s must be from 5s to 1h0m0s"},
	} {
		c := good
		tc.modify(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want one error %q…", c, err, tc.want)
		}
	}

	t.Setenv("SOVEREIGN_APPROVE_TOOLS", "eval, fill")
	t.Setenv("SOVEREIGN_APPROVAL_TIMEOUT", "30s")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var errs []error
	cfg := gateway.RegisterFlags(fs, &errs)
	if err := fs.Parse(nil); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if strings.Join(cfg.ApproveTools, ",") != "eval,fill" || cfg.ApprovalTimeout != 30*time.Second {
		t.Errorf("from the environment: %v %s", cfg.ApproveTools, cfg.ApprovalTimeout)
	}
	if err := fs.Parse([]string{"--approve-tools", "click", "--approval-timeout", "1m"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.ApproveTools, ",") != "click" || cfg.ApprovalTimeout != time.Minute {
		t.Errorf("from flags: %v %s", cfg.ApproveTools, cfg.ApprovalTimeout)
	}
}

// replayApproval sends c's retry of an eval call with args, as a 2026
// client answering the approval form of request id with approve_once.
func replayApproval(t *testing.T, c *client.Client, args map[string]any, id string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := map[string]any{
		"name": "eval", "arguments": args, "requestState": "sov-approval:" + id,
		"inputResponses": map[string]any{"sovereign_approval": map[string]any{"action": "accept", "content": map[string]any{"decision": "approve_once"}}},
		"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion: c.ProtocolVersion(), mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
			mcp.MetaKeyClientInfo: map[string]any{"name": "gateway-test", "version": "1.0"},
		},
	}
	header := http.Header{}
	header.Set(mcp.HeaderMethod, "tools/call")
	header.Set(mcp.HeaderName, "eval")
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(99)),
		Method: "tools/call", Params: params, Header: header})
	if err != nil || resp.Error != nil {
		t.Fatalf("replayed retry: %v %+v", err, resp.Error)
	}
	res, err := mcp.ParseCallToolResult(&resp.Result)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
