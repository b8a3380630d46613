package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Why a run's context ends.
var (
	errCancelled = errors.New("run cancelled")
	errShutdown  = errors.New("agent shutting down")
	// errEnded: someone else ended the run (the recovery of another
	// replica that took this one for dead); the loop stops silently.
	errEnded = errors.New("the run was ended elsewhere")
)

// ErrNoProvider is the error of a run when no model provider is set.
const ErrNoProvider = "no model provider configured: set SOVEREIGN_LLM_BASE_URL and SOVEREIGN_LLM_MODEL, or open the console's chat settings"

// historyTimeout bounds one chat history request of a run.
const historyTimeout = 30 * time.Second

// run is one agent run on this replica.
type run struct {
	a        *Agent
	id       string
	chatID   string
	caller   *toolsv1.Caller
	message  string
	settings settings
	maxIter  int
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelCauseFunc

	ending bool // its slot is free: it is recording its end (guarded by a.mu)

	mu        sync.Mutex
	rec       *agentv1.Run // the loop's view of the record
	sess      string       // browser session handle
	cancelled bool
	cancelBy  string
}

func newRun(a *Agent, id string, req *agentv1.StartRunRequest, msg string, s settings, maxIter int, parent trace.SpanContext) *run {
	base := context.Background()
	if parent.IsValid() {
		base = trace.ContextWithRemoteSpanContext(base, parent)
	}
	ctx, cancel := context.WithCancelCause(base)
	return &run{a: a, id: id, caller: proto.Clone(req.GetCaller()).(*toolsv1.Caller), message: msg, settings: s,
		maxIter: maxIter, sess: req.GetSession(), ctx: ctx, cancel: cancel, log: a.log.With("run", id)}
}

func (r *run) session() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

func (r *run) setSession(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sess = s
}

// requestCancel stops the run: the call in flight fails and the loop ends
// it CANCELLED.
func (r *run) requestCancel(by string) {
	r.mu.Lock()
	if !r.cancelled {
		r.cancelled, r.cancelBy = true, by
	}
	r.mu.Unlock()
	r.cancel(errCancelled)
}

func (r *run) isCancelled() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancelled, r.cancelBy
}

// check is the test before every model and tool call.
func (r *run) check() error {
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	return nil
}

// save applies mutate to the run, writes it (compare and set, keeping a
// cancel request stored meanwhile) and publishes it. A cancel request
// found in the store stops the run.
func (r *run) save(mutate func(*agentv1.Run)) error {
	r.mu.Lock()
	mutate(r.rec)
	snap := proto.Clone(r.rec).(*agentv1.Run)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 15*time.Second)
	defer cancel()
	stored, err := r.a.updateRun(ctx, r.id, func(s *agentv1.Run) error {
		if terminal(s.State) {
			return errEnded
		}
		cancelReq, cancelErr := s.CancelRequested, s.Error
		proto.Reset(s)
		proto.Merge(s, snap)
		if cancelReq && !snap.CancelRequested {
			s.CancelRequested = true
			if !terminal(snap.State) {
				s.Error = cancelErr
			}
		}
		return nil
	})
	if errors.Is(err, errEnded) {
		r.cancel(errEnded)
		return errEnded
	}
	if err != nil {
		return fmt.Errorf("save the run record: %w", err)
	}
	if stored.CancelRequested && !snap.CancelRequested {
		r.mu.Lock()
		r.rec.CancelRequested, r.rec.Error = true, stored.Error
		r.mu.Unlock()
		if !terminal(stored.State) {
			r.requestCancel(strings.TrimPrefix(stored.Error, "cancelled by "))
		}
	}
	r.a.publish(stored)
	return nil
}

// loop works on the run until it ends, then records how.
func (r *run) loop() {
	defer r.a.loops.Done()
	defer r.a.forget(r)
	defer r.cancel(nil)
	final, capped, err := r.work()
	r.a.mu.Lock()
	r.ending = true
	r.a.mu.Unlock()
	r.end(final, capped, err)
}

// end writes the run's final state and removes its active key.
func (r *run) end(final string, capped bool, err error) {
	cause := context.Cause(r.ctx)
	if errors.Is(err, errEnded) || errors.Is(cause, errEnded) {
		r.log.Warn("run ended elsewhere (taken for dead by another replica); stopping")
		return
	}
	var state agentv1.RunState
	var text, outcome string
	cancelled, by := r.isCancelled()
	switch {
	case err == nil:
		state, outcome = agentv1.RunState_RUN_STATE_COMPLETE, "complete"
		if capped {
			outcome = "capped"
		}
	case cancelled:
		state, text, outcome = agentv1.RunState_RUN_STATE_CANCELLED, cancelText(by), "cancelled"
	case errors.Is(cause, errShutdown):
		state, text, outcome = agentv1.RunState_RUN_STATE_ERROR, errTextShutdown, "error"
	default:
		state, text, outcome = agentv1.RunState_RUN_STATE_ERROR, err.Error(), "error"
	}
	if serr := r.save(func(rec *agentv1.Run) {
		rec.State, rec.CurrentTool, rec.Error, rec.FinalAnswer = state, "", text, final
	}); serr != nil {
		if errors.Is(serr, errEnded) {
			return
		}
		r.log.Error("could not record the end of the run", "state", state.String(), "err", serr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if state != agentv1.RunState_RUN_STATE_COMPLETE {
		// The chat says how the run ended, so the conversation (and the
		// model, on a follow-up) does not show an unanswered message.
		note := "[stopped: " + text + "]"
		if state == agentv1.RunState_RUN_STATE_ERROR {
			note = "[the run failed: " + text + "]"
		}
		if aerr := r.a.chatAppend(ctx, r.chatID, &historyv1.ChatMessage{Role: "assistant", Content: note}); aerr != nil {
			r.log.Warn("could not note the end of the run in the chat", "err", aerr)
		}
	}
	if derr := r.a.kv.Delete(ctx, keyActivePrefix+r.id); derr != nil {
		r.log.Warn("active key not removed (the recovery scan will)", "err", derr)
	}
	runsEnded.WithLabelValues(outcome).Inc()
	r.mu.Lock()
	it, tools := r.rec.Iteration, r.rec.ToolCalls
	r.mu.Unlock()
	if state == agentv1.RunState_RUN_STATE_ERROR {
		r.log.Warn("run failed", "iterations", it, "tool_calls", tools, "err", text)
	} else {
		r.log.Info("run ended", "state", state.String(), "iterations", it, "tool_calls", tools, "error", text)
	}
}

// work is the loop: model call, tool calls, repeat, until the model
// answers without tool calls (final) or the cap is hit (final says so,
// capped). Any error ends the run.
func (r *run) work() (final string, capped bool, err error) {
	s := r.settings
	if s.BaseURL == "" || s.Model == "" {
		return "", false, errors.New(ErrNoProvider)
	}
	if s.keyErr != nil {
		return "", false, s.keyErr
	}
	hctx, cancel := context.WithTimeout(r.ctx, historyTimeout)
	chat, err := r.a.chatGet(hctx, r.chatID, 0)
	cancel()
	if err != nil {
		if e := r.check(); e != nil {
			return "", false, e
		}
		return "", false, historyRunError(err, r.chatID)
	}
	msgs := fromHistory(chat.GetMessages())
	pinned := len(msgs)
	msgs = append(msgs, message{Role: "user", Content: r.message})
	if err := r.appendChat(&historyv1.ChatMessage{Role: "user", Content: r.message}); err != nil {
		return "", false, err
	}
	cat, err := r.a.listTools(r.ctx)
	if err != nil {
		if e := r.check(); e != nil {
			return "", false, e
		}
		return "", false, err
	}
	budget := r.a.cfg.ContextTokens
	fixed := estimate(len([]rune(s.SystemPrompt))) + estimate(cat.chars)
	reserve := min(4096, budget/4)

	var last string
	lastDropped := -1
	for it := 1; it <= r.maxIter; it++ {
		if err := r.check(); err != nil {
			return "", false, err
		}
		if err := r.save(func(rec *agentv1.Run) {
			rec.State, rec.Iteration, rec.CurrentTool = agentv1.RunState_RUN_STATE_THINKING, int32(it), ""
		}); err != nil {
			return "", false, err
		}
		if err := r.check(); err != nil {
			return "", false, err
		}
		t := fit(msgs, pinned, budget, fixed, reserve)
		if t.Dropped != lastDropped && t.Dropped > 0 {
			r.log.Info("context trimmed to fit the model's budget", "iteration", it, "dropped_messages", t.Dropped,
				"dropped_tokens_est", t.DroppedTokens, "kept_messages", len(t.Messages), "budget_tokens", budget)
		}
		lastDropped = t.Dropped
		rep, err := r.model(it, t.Messages, cat)
		if err != nil {
			if e := r.check(); e != nil {
				return "", false, e
			}
			return "", false, err
		}
		for i := range rep.Calls {
			if rep.Calls[i].ID == "" {
				rep.Calls[i].ID = fmt.Sprintf("call_%d_%d", it, i)
			}
		}
		msgs = append(msgs, message{Role: "assistant", Content: rep.Text, Calls: rep.Calls})
		am := &historyv1.ChatMessage{Role: "assistant", Content: rep.Text}
		if len(rep.Calls) > 0 {
			b, _ := json.Marshal(rep.Calls)
			am.ToolCallsJson = string(b)
		}
		if err := r.appendChat(am); err != nil {
			return "", false, err
		}
		if rep.Text != "" {
			last = rep.Text
			r.mu.Lock()
			r.rec.LastMessage = clip(rep.Text, 4000)
			r.mu.Unlock()
		}
		if len(rep.Calls) == 0 {
			return rep.Text, false, nil
		}
		for _, tc := range rep.Calls {
			if err := r.check(); err != nil {
				return "", false, err
			}
			if err := r.save(func(rec *agentv1.Run) {
				rec.State, rec.CurrentTool = agentv1.RunState_RUN_STATE_TOOL_CALL, clip(tc.Function.Name, 100)
			}); err != nil {
				return "", false, err
			}
			if err := r.check(); err != nil {
				return "", false, err
			}
			text := r.tool(it, cat, tc)
			if err := r.check(); err != nil {
				return "", false, err
			}
			msgs = append(msgs, message{Role: "tool", Content: text, ToolCallID: tc.ID})
			if err := r.appendChat(&historyv1.ChatMessage{Role: "tool", Content: text, ToolCallId: tc.ID}); err != nil {
				return "", false, err
			}
			r.mu.Lock()
			r.rec.ToolCalls++
			r.mu.Unlock()
		}
	}
	final = fmt.Sprintf("Stopped after %d iterations (the cap)", r.maxIter)
	if last != "" {
		final += ": " + last
	} else {
		final += " before the model gave an answer."
	}
	if err := r.appendChat(&historyv1.ChatMessage{Role: "assistant", Content: final}); err != nil {
		return "", false, err
	}
	r.mu.Lock()
	r.rec.LastMessage = clip(final, 4000)
	r.mu.Unlock()
	return final, true, nil
}

// model makes one model call under the LLM timeout, in a span.
func (r *run) model(it int, msgs []message, cat *catalog) (reply, error) {
	ctx, span := r.a.tracer.Start(r.ctx, "agent.model_call", trace.WithAttributes(
		attribute.String("sovereign.agent.run_id", r.id), attribute.Int("sovereign.agent.iteration", it),
		attribute.String("gen_ai.request.model", r.settings.Model), attribute.Int("sovereign.agent.messages", len(msgs))))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, r.a.cfg.LLMTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, timeoutKey{}, r.a.cfg.LLMTimeout)
	start := time.Now()
	rep, err := complete(ctx, modelCall{settings: r.settings, stream: !r.a.cfg.NoStream, retries: r.a.cfg.LLMRetries,
		messages: msgs, tools: cat.params})
	modelSeconds.Observe(time.Since(start).Seconds())
	outcome := "ok"
	var me *modelError
	if errors.As(err, &me) {
		outcome = me.outcome
	} else if err != nil {
		outcome = "error"
	}
	modelRequests.WithLabelValues(outcome).Inc()
	if err != nil {
		span.SetStatus(codes.Error, outcome)
		span.SetAttributes(attribute.String("error.type", outcome))
		return reply{}, err
	}
	span.SetAttributes(attribute.Int("sovereign.agent.tool_calls", len(rep.Calls)))
	return rep, nil
}

// tool makes one tool call in a span and returns the text for the model.
func (r *run) tool(it int, cat *catalog, tc toolCall) string {
	ctx, span := r.a.tracer.Start(r.ctx, "agent.tool_call", trace.WithAttributes(
		attribute.String("sovereign.agent.run_id", r.id), attribute.Int("sovereign.agent.iteration", it),
		attribute.String("gen_ai.tool.name", clip(tc.Function.Name, 100)), attribute.String("gen_ai.tool.call.id", tc.ID)))
	defer span.End()
	text, outcome := r.callTool(ctx, cat, tc)
	toolCalls.WithLabelValues(string(outcome)).Inc()
	if outcome != toolOK {
		span.SetStatus(codes.Error, string(outcome))
		span.SetAttributes(attribute.String("error.type", string(outcome)))
		r.log.Info("tool call failed", "tool", clip(tc.Function.Name, 100), "outcome", string(outcome))
	}
	return text
}

// appendChat stores a message of the run in its chat. It is not cut short
// by a cancel (the chat stays well-formed); a failure ends the run.
func (r *run) appendChat(m *historyv1.ChatMessage) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), historyTimeout)
	defer cancel()
	if err := r.a.chatAppend(ctx, r.chatID, m); err != nil {
		return historyRunError(err, r.chatID)
	}
	return nil
}

// historyRunError is the run error of a failed history request.
func historyRunError(err error, chatID string) error {
	if bus.Is(err, commonv1.ErrorCode_NOT_FOUND) {
		return fmt.Errorf("the chat %s is no longer in the history (deleted?): %v", chatID, err)
	}
	if bus.Is(err, commonv1.ErrorCode_TOO_LARGE) || bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) {
		return fmt.Errorf("the chat history refused a message: %v", err)
	}
	return fmt.Errorf("the chat history is not reachable (is the history service running?): %v", err)
}
