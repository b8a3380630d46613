package agent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/agentbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

// Subjects of the agent endpoints, under the bus prefix.
const (
	SubjectRunStart    = "agent.run.start"
	SubjectRunGet      = "agent.run.get"
	SubjectRunCancel   = "agent.run.cancel"
	SubjectRunList     = "agent.run.list"
	SubjectSettingsGet = "agent.settings.get"
	SubjectSettingsPut = "agent.settings.put"
	// SubjectRunEvent is followed by ".<run id>": a Run after every change.
	SubjectRunEvent = "agent.run.event"
	// QueueGroup is the queue group of the endpoints.
	QueueGroup = "sovereign-agent"
)

// Limits of requests.
const (
	// MaxMessage bounds the user message of a run (characters).
	MaxMessage = 100_000
	// titleLen is the length of a new chat's title (the message, clipped).
	titleLen = 60
	// taskLen is the length of Run.task.
	taskLen = 200
	// DefaultListLimit and MaxListLimit bound sov.agent.run.list.
	DefaultListLimit = 50
	MaxListLimit     = 500
)

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// register adds the micro service "sovereign-agent" with its endpoints in
// the queue group "sovereign-agent".
func (a *Agent) register() error {
	svc, err := a.bus.AddService("sovereign-agent", Version, "Sovereign agent orchestrator: LLM tool loops on the fleet",
		map[string]string{"replica": a.owner})
	if err != nil {
		return fmt.Errorf("agent service: %w", err)
	}
	a.svc = svc
	c := a.bus
	q := micro.WithGroupQueueGroup(QueueGroup)
	runs := svc.AddGroup(agentbus.RunGroup(c), q)
	set := svc.AddGroup(agentbus.SettingsGroup(c), q)
	for _, e := range []struct {
		g    micro.Group
		name string
		h    micro.Handler
	}{
		{runs, agentbus.Start.Name, bus.Handle(c, counted("run.start", a.start))},
		{runs, agentbus.Get.Name, bus.Handle(c, counted("run.get", a.get))},
		{runs, agentbus.Cancel.Name, bus.Handle(c, counted("run.cancel", a.cancelRun))},
		{runs, agentbus.List.Name, bus.Handle(c, counted("run.list", a.list))},
		{set, agentbus.GetSettings.Name, bus.Handle(c, counted("settings.get", a.getSettings))},
		{set, agentbus.PutSettings.Name, bus.Handle(c, counted("settings.put", a.putSettings))},
	} {
		if err := e.g.AddEndpoint(e.name, e.h); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("agent endpoint %s: %w", e.name, err)
		}
	}
	return c.Served() // a request made once this returns is answered
}

func invalid(format string, args ...any) error {
	return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, format, args...)
}

// start takes a run: it checks the request, reserves a slot on this
// replica, creates the chat when the request names none, stores the run
// (IDLE) and starts its loop. It answers at once.
func (a *Agent) start(ctx context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error) {
	msg := strings.TrimSpace(req.GetMessage())
	switch {
	case msg == "":
		return nil, invalid("message is required: the task or question for the agent")
	case utf8.RuneCountInString(msg) > MaxMessage:
		return nil, invalid("message is %d characters; at most %d", utf8.RuneCountInString(msg), MaxMessage)
	case req.GetCaller().GetId() == "":
		return nil, invalid("caller is required (caller.id and kind: who the run acts for; its tool calls carry this caller's policy)")
	case req.GetMaxIterations() < 0 || req.GetMaxIterations() > MaxIterationsLimit:
		return nil, invalid("max_iterations %d: must be 1 to %d (0 for the configured cap)", req.GetMaxIterations(), MaxIterationsLimit)
	}
	id := req.GetId()
	if id == "" {
		id = "r_" + randomID(22)
	} else if !runIDPattern.MatchString(id) {
		return nil, invalid("run id %q: use 1 to 64 letters, digits, - or _ (or leave it empty)", id)
	}

	sv, _, err := a.loadSaved(ctx)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%v", err)
	}
	s := a.effective(sv, true)
	maxIter := s.MaxIterations
	if m := req.GetMaxIterations(); m > 0 {
		maxIter = int(m)
	}

	r := newRun(a, id, req, msg, s, maxIter, trace.SpanContextFromContext(ctx))
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "this agent replica is shutting down; try again")
	case a.working() >= a.cfg.MaxRuns:
		a.mu.Unlock()
		return nil, bus.Errorf(commonv1.ErrorCode_NO_CAPACITY, "this agent replica already works on %d runs, its limit (SOVEREIGN_AGENT_MAX_RUNS=%d): wait for one to end, stop one, or raise the limit", a.cfg.MaxRuns, a.cfg.MaxRuns)
	case a.runs[id] != nil:
		a.mu.Unlock()
		return nil, invalid("run id %q is taken", id)
	}
	a.runs[id] = r
	a.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			a.forget(r)
		}
	}()

	// The chat: the request's (it must exist) or a new one.
	chatID, newChat := req.GetChatId(), false
	if chatID == "" {
		chatID, newChat = newUUID(), true
	} else if _, err := a.chatGet(ctx, chatID, 1); err != nil {
		return nil, historyError(err, chatID)
	}
	r.chatID = chatID
	now := time.Now().UnixMilli()
	r.rec = &agentv1.Run{Id: id, ChatId: chatID, State: agentv1.RunState_RUN_STATE_IDLE, MaxIterations: int32(maxIter),
		CallerName: callerName(req), Replica: a.owner, CreatedUnixMilli: now, UpdatedUnixMilli: now, Task: clipTitle(msg, taskLen)}
	b, err := encodeRun(r.rec)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode run: %v", err)
	}
	if _, err := a.kv.Create(ctx, keyRunPrefix+id, b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, invalid("run id %q is taken", id)
		}
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "store the run: %v", err)
	}
	if _, err := a.kv.Put(ctx, keyActivePrefix+id, []byte(a.owner)); err != nil {
		_ = a.kv.Purge(context.WithoutCancel(ctx), keyRunPrefix+id)
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "store the run: %v", err)
	}
	if newChat {
		if _, err := a.chatCreate(ctx, chatID, clipTitle(msg, titleLen)); err != nil {
			_ = a.kv.Purge(context.WithoutCancel(ctx), keyActivePrefix+id)
			_ = a.kv.Purge(context.WithoutCancel(ctx), keyRunPrefix+id)
			return nil, historyError(err, chatID)
		}
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		_ = a.kv.Purge(context.WithoutCancel(ctx), keyActivePrefix+id)
		_ = a.kv.Purge(context.WithoutCancel(ctx), keyRunPrefix+id)
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "this agent replica is shutting down; try again")
	}
	a.loops.Add(1)
	a.mu.Unlock()
	ok = true
	runsStarted.Inc()
	runsActive.Set(float64(a.active()))
	out := proto.Clone(r.rec).(*agentv1.Run)
	a.publish(out)
	r.log.Info("run started", "chat", chatID, "new_chat", newChat, "caller", out.GetCallerName(), "max_iterations", maxIter)
	go r.loop()
	return out, nil
}

// active is the number of runs on this replica.
func (a *Agent) active() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.runs)
}

// working is the number of runs that take a slot: those not ending.
// The caller holds a.mu.
func (a *Agent) working() int {
	n := 0
	for _, r := range a.runs {
		if !r.ending {
			n++
		}
	}
	return n
}

// forget drops r from the replica's runs.
func (a *Agent) forget(r *run) {
	a.mu.Lock()
	if a.runs[r.id] == r {
		delete(a.runs, r.id)
	}
	n := len(a.runs)
	a.mu.Unlock()
	runsActive.Set(float64(n))
}

func callerName(req *agentv1.StartRunRequest) string {
	if n := req.GetCaller().GetName(); n != "" {
		return n
	}
	return req.GetCaller().GetId()
}

// clipTitle is s on one line, clipped to n characters with "…".
func clipTitle(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// historyError is the bus error of a failed chat request.
func historyError(err error, chatID string) error {
	if bus.Is(err, commonv1.ErrorCode_NOT_FOUND) {
		return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no chat %q in the history: %v", chatID, err)
	}
	if bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "chat %q: %v", chatID, err)
	}
	return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "the chat history is not reachable (is the history service running?): %v", err)
}

func (a *Agent) get(ctx context.Context, req *agentv1.GetRunRequest) (*agentv1.Run, error) {
	if !runIDPattern.MatchString(req.GetId()) {
		return nil, invalid("run id %q: want the id start returned", req.GetId())
	}
	r, _, err := a.getRun(ctx, req.GetId())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no run %q (runs are kept %s after they end)", req.GetId(), RunRetention)
	}
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "read run %s: %v", req.GetId(), err)
	}
	return r, nil
}

// cancelRun marks the run cancel_requested (compare and set) and tells its
// owner, which stops the model or tool call in flight. A run that ended
// is returned as it is.
func (a *Agent) cancelRun(ctx context.Context, req *agentv1.CancelRunRequest) (*agentv1.Run, error) {
	if !runIDPattern.MatchString(req.GetId()) {
		return nil, invalid("run id %q: want the id start returned", req.GetId())
	}
	by := strings.TrimSpace(req.GetBy())
	if by == "" {
		by = "an unnamed caller"
	}
	by = clipTitle(by, 100)
	changed := false
	rec, err := a.updateRun(ctx, req.GetId(), func(r *agentv1.Run) error {
		changed = !terminal(r.State) && !r.CancelRequested
		if !changed {
			return errStop
		}
		r.CancelRequested, r.Error = true, cancelText(by)
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no run %q", req.GetId())
	}
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "cancel run %s: %v", req.GetId(), err)
	}
	if terminal(rec.State) {
		return rec, nil
	}
	if e, err := a.kv.Get(ctx, keyActivePrefix+req.GetId()); err == nil {
		_ = a.bus.NATS().Publish(a.cancelSubject(string(e.Value())), []byte(req.GetId()+"\n"+by))
	}
	if changed {
		a.log.Info("run cancel requested", "run", req.GetId(), "by", by)
		a.publish(rec)
	}
	return rec, nil
}

func cancelText(by string) string { return "cancelled by " + by }

func (a *Agent) list(ctx context.Context, req *agentv1.ListRunsRequest) (*agentv1.ListRunsResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > MaxListLimit:
		return nil, invalid("limit %d: must be 0 (default %d) to %d", limit, DefaultListLimit, MaxListLimit)
	case limit == 0:
		limit = DefaultListLimit
	}
	var runs []*agentv1.Run
	if req.GetActiveOnly() {
		entries, err := a.scan(ctx, keyActivePrefix+">")
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "list runs: %v", err)
		}
		for _, e := range entries {
			r, _, err := a.getRun(ctx, strings.TrimPrefix(e.Key(), keyActivePrefix))
			if err == nil && !terminal(r.State) {
				runs = append(runs, r)
			}
		}
	} else {
		entries, err := a.scan(ctx, keyRunPrefix+">")
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "list runs: %v", err)
		}
		for _, e := range entries {
			if r, err := decodeRun(e.Value()); err == nil {
				runs = append(runs, r)
			}
		}
	}
	if c := req.GetChatId(); c != "" {
		runs = slices.DeleteFunc(runs, func(r *agentv1.Run) bool { return r.GetChatId() != c })
	}
	slices.SortFunc(runs, func(x, y *agentv1.Run) int {
		if x.GetCreatedUnixMilli() != y.GetCreatedUnixMilli() {
			return int(y.GetCreatedUnixMilli() - x.GetCreatedUnixMilli())
		}
		return strings.Compare(y.GetId(), x.GetId())
	})
	if len(runs) > limit {
		runs = runs[:limit]
	}
	return &agentv1.ListRunsResponse{Runs: runs}, nil
}

// History requests (the history service's chat store).

func (a *Agent) chatGet(ctx context.Context, id string, last int32) (*historyv1.GetChatSessionResponse, error) {
	return historybus.ChatGet.Call(ctx, a.bus, &historyv1.GetChatSessionRequest{Id: id, LastMessages: last})
}

func (a *Agent) chatCreate(ctx context.Context, id, title string) (*historyv1.ChatSession, error) {
	return historybus.ChatCreate.Call(ctx, a.bus, &historyv1.CreateChatSessionRequest{Id: id, Title: title})
}

func (a *Agent) chatAppend(ctx context.Context, id string, msgs ...*historyv1.ChatMessage) error {
	_, err := historybus.ChatAppend.Call(ctx, a.bus, &historyv1.AppendChatMessagesRequest{SessionId: id, Messages: msgs})
	return err
}

func protoMarshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }
