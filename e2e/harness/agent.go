package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
)

// Agent is a running `sovereign agent` (one agent replica).
type Agent struct {
	*Proc
	// Name is the replica's --agent-name; its runs name it as
	// "<name>/<incarnation>".
	Name string
	// Base is its health and metrics URL (http://127.0.0.1:port).
	Base string
}

// StartAgent starts `sovereign agent` named name (--agent-name) with its
// health listener on a port of its choosing and waits for /readyz. env adds
// environment variables; extra adds flags (e.g. --llm-base-url). Starting
// the same name again after the first was killed is a restart of that
// replica.
func (f *Fleet) StartAgent(ctx context.Context, name string, env []string, extra ...string) (*Agent, error) {
	if f.NATS == nil {
		return nil, errors.New("start NATS before agents")
	}
	args := append([]string{"agent", "--nats-url", f.NATS.URL, "--listen", anyPort, "--agent-name", name}, extra...)
	// A restart of the same name shows as "agent NAME #2" in the logs.
	f.mu.Lock()
	n := 1
	for _, p := range f.procs {
		if p.Name == "agent "+name || strings.HasPrefix(p.Name, "agent "+name+" #") {
			n++
		}
	}
	f.mu.Unlock()
	procName := "agent " + name
	if n > 1 {
		procName = fmt.Sprintf("agent %s #%d", name, n)
	}
	p, base, err := f.startService(ctx, procName, "agent health and metrics", args, env)
	if err != nil {
		return nil, err
	}
	return &Agent{Proc: p, Name: name, Base: base}, nil
}

// agentCallTimeout bounds one agent request of the harness.
const agentCallTimeout = 10 * time.Second

// agentRequest sends one request to the agent replicas (any of them
// answers) on sov.agent.<verb...>.
func (f *Fleet) agentRequest(ctx context.Context, req, resp proto.Message, verb ...string) error {
	bc := f.Bus()
	if bc == nil {
		return errors.New("no NATS connection")
	}
	ctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	defer cancel()
	return bc.Request(ctx, bc.Subject(append([]string{"agent"}, verb...)...), req, resp)
}

// StartRun asks the agent replicas to start a run (sov.agent.run.start).
func (f *Fleet) StartRun(ctx context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	if err := f.agentRequest(ctx, req, run, "run", "start"); err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	return run, nil
}

// GetRun reads a run (sov.agent.run.get).
func (f *Fleet) GetRun(ctx context.Context, id string) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	if err := f.agentRequest(ctx, &agentv1.GetRunRequest{Id: id}, run, "run", "get"); err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return run, nil
}

// CancelRun asks for a run to stop (sov.agent.run.cancel), by says who.
func (f *Fleet) CancelRun(ctx context.Context, id, by string) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	if err := f.agentRequest(ctx, &agentv1.CancelRunRequest{Id: id, By: by}, run, "run", "cancel"); err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	return run, nil
}

// RunEnded reports whether s is a final state (complete, error, cancelled).
func RunEnded(s agentv1.RunState) bool {
	return s == agentv1.RunState_RUN_STATE_COMPLETE || s == agentv1.RunState_RUN_STATE_ERROR ||
		s == agentv1.RunState_RUN_STATE_CANCELLED
}

// WaitRun polls the run until done(run) holds (RunEnded of its state when
// done is nil), ctx ends or timeout passes, and returns the last record
// read.
func (f *Fleet) WaitRun(ctx context.Context, id string, timeout time.Duration, done func(*agentv1.Run) bool) (*agentv1.Run, error) {
	if done == nil {
		done = func(r *agentv1.Run) bool { return RunEnded(r.GetState()) }
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *agentv1.Run
	var lastErr error
	for {
		run, err := f.GetRun(ctx, id)
		if err == nil {
			last = run
			if done(run) {
				return run, nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("run %s: %v (last error: %v)", id, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("run %s not there after %s: %v (state %s, error %q)", id, timeout, ctx.Err(), last.GetState(), last.GetError())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
