package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/agentbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// run_browser_task: an MCP client hands a whole task to the agent
// orchestrator (proto/sovereign/agent/v1).
//
// The call binds the caller's browser session exactly as a browser tool
// does, so that the run acts in it: "mcp:<MCP session id>" for a 2025
// client, the handle for a 2026 one (a new handle when it gave none; the
// result names it). It picks the run id, subscribes to
// <prefix>.agent.run.event.<id> and only then sends
// <prefix>.agent.run.start with the caller (and its policy), so no event is
// missed. While the run works, every change of iteration, state or tool
// becomes a notifications/progress (when the request has a progress token);
// <prefix>.agent.run.get is polled every runPollInterval in case an event
// was lost. The run's end is the call's result. When the MCP request ends
// first (the client cancelled or went away) or --task-timeout passes, the
// run is cancelled (<prefix>.agent.run.cancel).

// Task timeout: default and bounds.
const (
	DefaultTaskTimeout = 30 * time.Minute
	minTaskTimeout     = time.Second
	maxTaskTimeout     = 24 * time.Hour
)

// runPollInterval is how often a waiting run_browser_task asks for its
// run's record besides the events.
const runPollInterval = 3 * time.Second

// agentRequestTimeout bounds one request to the agent service.
const agentRequestTimeout = 15 * time.Second

// registerAgentFlags adds --task-timeout.
func registerAgentFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.DurationVar(&cfg.TaskTimeout, "task-timeout", config.MustDuration(errs, "SOVEREIGN_TASK_TIMEOUT", DefaultTaskTimeout),
		"longest a run_browser_task call may take; its agent run is cancelled then (1s to 24h) [SOVEREIGN_TASK_TIMEOUT]")
}

// validateAgent checks the agent settings.
func (c Config) validateAgent(bad func(flag, format string, a ...any)) {
	if c.TaskTimeout != 0 && (c.TaskTimeout < minTaskTimeout || c.TaskTimeout > maxTaskTimeout) {
		bad("task-timeout", "%s must be from %s to %s", c.TaskTimeout, minTaskTimeout, maxTaskTimeout)
	}
}

// runTaskHandler is the handler of run_browser_task.
func (g *Gateway) runTaskHandler(t catalog.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		task, err := catalog.ParseTask(c.Args)
		if err != nil {
			return dispatch.Errorf("%s: %v", t.Name, err)
		}
		if c.Transport == dispatch.Bus { // the bus adapter refuses it first
			return dispatch.ErrorText(t.Name + " cannot be called by an agent run")
		}
		bctx, cancel := context.WithTimeout(ctx, g.cfg.ToolTimeout)
		b, err := g.bind(bctx, c, "")
		if err != nil {
			msg := g.errorText(bctx, t, err)
			cancel()
			return dispatch.ErrorText(msg)
		}
		cancel()
		session := b.id
		if b.kind == state.MCP {
			session = mcpRefPrefix + b.id
		}
		return b.result(g.runTask(ctx, t, c, task, session))
	}
}

// runTask starts the run and waits for its end.
func (g *Gateway) runTask(ctx context.Context, t catalog.Tool, call *dispatch.Call, task catalog.Task, session string) *dispatch.Result {
	id := newRunID()
	events := make(chan *nats.Msg, 64)
	sub, err := g.bus.NATS().ChanSubscribe(agentbus.RunEvents(g.bus, id), events)
	if err != nil {
		return dispatch.ErrorText(fmt.Sprintf("%s: subscribe to the run's events: %v", t.Name, err))
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The subscription reaches the server before the request, on the same
	// connection: no event is missed.
	c := call.Caller
	start := &agentv1.StartRunRequest{
		Id: id, ChatId: task.ChatID, Message: task.Task, Session: session, MaxIterations: task.MaxIterations,
		Caller: &toolsv1.Caller{Kind: c.Kind, Id: c.ID, Name: c.Name, UrlAllow: c.URLAllow, UrlBlock: c.URLBlock, Approve: c.Approve},
	}
	run, err := agentCall(ctx, g, agentbus.Start, start)
	if err != nil {
		if ctx.Err() != nil {
			g.cancelRun(ctx, id, "mcp client") // it may have started all the same
		}
		return dispatch.ErrorText(g.agentErrorText(ctx, t, err))
	}
	g.log.InfoContext(ctx, "agent run started", "run", run.GetId(), "chat", run.GetChatId(), "caller", dispatch.CallerLabel(c.ID))

	deadline := time.NewTimer(g.cfg.TaskTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(runPollInterval)
	defer poll.Stop()
	p := &runProgress{to: call.Progress}
	for {
		if ended(run) {
			return runResult(t, run)
		}
		g.notifyRun(ctx, p, run)
		select {
		case <-ctx.Done():
			g.cancelRun(ctx, id, "mcp client")
			return dispatch.ErrorText(fmt.Sprintf("%s was cancelled by the client; agent run %s was told to stop", t.Name, id))
		case <-deadline.C:
			g.cancelRun(ctx, id, t.Name+" timeout")
			return dispatch.ErrorText(fmt.Sprintf("%s did not finish within %s (the gateway's --task-timeout); agent run %s was cancelled",
				t.Name, g.cfg.TaskTimeout, id))
		case m := <-events:
			next := &agentv1.Run{}
			if err := proto.Unmarshal(m.Data, next); err != nil {
				g.log.WarnContext(ctx, "bad agent run event", "run", id, "err", err)
				continue
			}
			run = newer(run, next)
		case <-poll.C:
			next, err := agentCall(ctx, g, agentbus.Get, &agentv1.GetRunRequest{Id: id})
			switch {
			case err == nil:
				run = newer(run, next)
			case bus.Is(err, commonv1.ErrorCode_NOT_FOUND):
				return dispatch.ErrorText(fmt.Sprintf("%s: agent run %s is gone from the agent service's records", t.Name, id))
			case ctx.Err() == nil:
				g.log.InfoContext(ctx, "poll agent run", "run", id, "err", err) // the events may still come
			}
		}
	}
}

// newer returns next unless it is older than cur (a poll answered before
// an event it crossed).
func newer(cur, next *agentv1.Run) *agentv1.Run {
	if next.GetUpdatedUnixMilli() < cur.GetUpdatedUnixMilli() {
		return cur
	}
	return next
}

func ended(r *agentv1.Run) bool {
	switch r.GetState() {
	case agentv1.RunState_RUN_STATE_COMPLETE, agentv1.RunState_RUN_STATE_ERROR, agentv1.RunState_RUN_STATE_CANCELLED:
		return true
	}
	return false
}

// stateName is a run state as results say it: "complete", "error", …
func stateName(s agentv1.RunState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "RUN_STATE_"))
}

// runResult is the result of an ended run: the final answer, or a tool
// error with the reason; structured content either way.
func runResult(t catalog.Tool, r *agentv1.Run) *dispatch.Result {
	fields := map[string]any{
		"run_id": r.GetId(), "chat_id": r.GetChatId(), "state": stateName(r.GetState()),
		"iterations": r.GetIteration(), "tool_calls": r.GetToolCalls(),
	}
	var res *dispatch.Result
	switch r.GetState() {
	case agentv1.RunState_RUN_STATE_COMPLETE:
		answer := r.GetFinalAnswer()
		if strings.TrimSpace(answer) == "" {
			answer = "(the agent finished without an answer)"
		}
		return dispatch.Structured(answer, fields)
	case agentv1.RunState_RUN_STATE_CANCELLED:
		res = dispatch.Structured(fmt.Sprintf("%s: agent run %s was cancelled: %s", t.Name, r.GetId(), orUnknown(r.GetError())), fields)
	default:
		res = dispatch.Structured(fmt.Sprintf("%s: agent run %s failed: %s", t.Name, r.GetId(), orUnknown(r.GetError())), fields)
	}
	res.IsError = true
	return res
}

func orUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "no reason given"
	}
	return s
}

// runProgress is what a waiting call last told its caller.
type runProgress struct {
	to   dispatch.Progress
	sent bool
	last float64 // progress values only grow
	said string  // the last message
}

// notifyRun reports r's progress when r says something new: progress is
// the iteration (growing in halves toward the next while the iteration
// stays), total the cap.
func (g *Gateway) notifyRun(ctx context.Context, p *runProgress, r *agentv1.Run) {
	msg := progressText(r)
	if msg == p.said {
		return
	}
	v := float64(r.GetIteration())
	if p.sent && v <= p.last {
		v = p.last + (math.Floor(p.last)+1-p.last)/2
	}
	if err := p.to.Report(ctx, v, float64(r.GetMaxIterations()), msg); err != nil {
		g.log.InfoContext(ctx, "send run progress", "err", err)
		return
	}
	p.sent, p.last, p.said = true, v, msg
}

// progressText says what the run does: "iteration 3/100: snapshot".
func progressText(r *agentv1.Run) string {
	step := fmt.Sprintf("iteration %d", r.GetIteration())
	if n := r.GetMaxIterations(); n > 0 {
		step += fmt.Sprintf("/%d", n)
	}
	switch r.GetState() {
	case agentv1.RunState_RUN_STATE_IDLE, agentv1.RunState_RUN_STATE_UNSPECIFIED:
		return "agent run " + r.GetId() + " started"
	case agentv1.RunState_RUN_STATE_TOOL_CALL:
		return step + ": " + orDefault(r.GetCurrentTool(), "a tool")
	}
	return step + ": thinking"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// agentCall sends one request to the agent service's endpoint e.
func agentCall[Req, Resp proto.Message](ctx context.Context, g *Gateway, e bus.Endpoint[Req, Resp], req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, agentRequestTimeout)
	defer cancel()
	return e.Call(ctx, g.bus, req)
}

// cancelRun asks the agent to stop run id, on a context of its own (the
// call's has ended).
func (g *Gateway) cancelRun(ctx context.Context, id, by string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agentRequestTimeout)
	defer cancel()
	if _, err := agentCall(ctx, g, agentbus.Cancel, &agentv1.CancelRunRequest{Id: id, By: by}); err != nil {
		g.log.WarnContext(ctx, "cancel agent run", "run", id, "by", by, "err", err)
		return
	}
	g.log.InfoContext(ctx, "agent run cancelled", "run", id, "by", by)
}

// agentErrorText is the message of a failed start.
func (g *Gateway) agentErrorText(ctx context.Context, t catalog.Tool, err error) string {
	msg := bus.MessageOf(err)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return t.Name + " was cancelled"
	case bus.Is(err, commonv1.ErrorCode_UNAVAILABLE) && !g.agentRunning(ctx):
		return fmt.Sprintf("%s needs the agent service, and none is running (nothing answers %s): start it with `sovereign agent` "+
			"(or run `sovereign up`) and configure its model provider (SOVEREIGN_LLM_BASE_URL, SOVEREIGN_LLM_MODEL)",
			t.Name, agentbus.Start.Subject(g.bus))
	case bus.Is(err, commonv1.ErrorCode_UNAVAILABLE):
		return fmt.Sprintf("%s: the agent service is unavailable: %s", t.Name, msg)
	case bus.Is(err, commonv1.ErrorCode_TIMEOUT):
		return fmt.Sprintf("%s: the agent service did not answer within %s", t.Name, agentRequestTimeout)
	case bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT):
		return fmt.Sprintf("%s: invalid argument: %s", t.Name, msg)
	case bus.Is(err, commonv1.ErrorCode_NOT_FOUND):
		return fmt.Sprintf("%s: not found: %s", t.Name, msg)
	}
	g.log.ErrorContext(ctx, "start agent run", "err", err)
	return fmt.Sprintf("%s: the agent service failed: %s", t.Name, msg)
}

// agentRunning reports whether anything serves the agent's run subjects
// (an UNAVAILABLE error may also come from a service the agent needs).
func (g *Gateway) agentRunning(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return agentbus.Serving(ctx, g.bus)
}

// runIDAlphabet are the characters of a run id after "r_" (base62).
const runIDAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newRunID returns "r_" and 22 random base62 characters (131 bits), the
// agent's run id format.
func newRunID() string {
	b := make([]byte, 22)
	max := big.NewInt(int64(len(runIDAlphabet)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
		}
		b[i] = runIDAlphabet[n.Int64()]
	}
	return "r_" + string(b)
}
