package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// The agent tests run the agent service as separate processes (`sovereign
// agent`, one or two replicas) with nats-server, `sovereign history`,
// `sovereign gateway --system-tools agent` and, where a run browses, a
// worker; the model is a scripted OpenAI-compatible server (llmtest) in the
// test process. Runs are driven over the bus (sov.agent.run.*).

// agentCaller is who the runs of these tests act for.
var agentCaller = &toolsv1.Caller{Kind: "console", Id: "e2e", Name: "e2e"}

// agentFleet is a fleet for agent runs, without the agents.
type agentFleet struct {
	*harness.Fleet
	// Workspace is the gateway's system-tools workspace.
	Workspace string
	ctx       context.Context
}

// startAgentFleet starts nats-server, history, a gateway with the system
// tools for agent runs and, when worker is set, a browser worker (id aw1,
// two sessions).
func startAgentFleet(t *testing.T, worker bool) *agentFleet {
	t.Helper()
	f := harness.NewFleet(binaries(t), t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the fleet's processes:\n%s", f.Logs())
		}
		f.Close()
	})
	ctx := callCtx(t, 2*time.Minute)
	start := time.Now()
	if _, err := f.StartNATS(ctx); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	workerErr := make(chan error, 1)
	if worker {
		go func() {
			_, err := f.StartWorker(ctx, "aw1", 2)
			workerErr <- err
		}()
	} else {
		workerErr <- nil
	}
	if _, err := f.StartHistory(ctx, filepath.Join(f.Dir, "history"), ""); err != nil {
		t.Fatalf("start history: %v", err)
	}
	ws := filepath.Join(f.Dir, "workspace")
	if _, err := f.StartGateway(ctx, "--system-tools", "agent", "--workspace", ws); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Logf("fleet up in %s (worker: %v)", time.Since(start).Round(time.Millisecond), worker)
	return &agentFleet{Fleet: f, Workspace: ws, ctx: ctx}
}

// agent starts the replica name pointed at llm.
func (af *agentFleet) agent(t *testing.T, name string, llm *llmtest.Server, extra ...string) *harness.Agent {
	t.Helper()
	start := time.Now()
	a, err := af.StartAgent(af.ctx, name, nil, append([]string{"--llm-base-url", llm.URL, "--llm-model", "scripted"}, extra...)...)
	if err != nil {
		t.Fatalf("start agent %s: %v", name, err)
	}
	t.Logf("agent %s ready in %s", name, time.Since(start).Round(time.Millisecond))
	return a
}

// start starts a run of message. A replica at its run limit answers
// NO_CAPACITY; the start is then sent again (another replica may take it),
// up to 50 times.
func (af *agentFleet) start(message string) (*agentv1.Run, error) {
	var err error
	for range 50 {
		var run *agentv1.Run
		run, err = af.StartRun(af.ctx, &agentv1.StartRunRequest{Message: message, Caller: agentCaller})
		if err == nil {
			return run, nil
		}
		if !bus.Is(err, commonv1.ErrorCode_NO_CAPACITY) {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond) // spaces the tries: each refusal is part of what the test counts
	}
	return nil, err
}

func (af *agentFleet) get(t *testing.T, id string) *agentv1.Run {
	t.Helper()
	run, err := af.GetRun(af.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// wait waits (at most a minute) for the run to end.
func (af *agentFleet) wait(t *testing.T, id string) *agentv1.Run {
	t.Helper()
	run, err := af.WaitRun(af.ctx, id, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// replicaName is the name part of a run's "<name>/<incarnation>".
func replicaName(run *agentv1.Run) string {
	name, _, _ := strings.Cut(run.GetReplica(), "/")
	return name
}

// waitChan waits (at most d) for ch to close.
func waitChan(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("waited %s for %s", d, what)
	}
}

// scrapeAgent scrapes a replica's /metrics.
func scrapeAgent(t *testing.T, ctx context.Context, a *harness.Agent) harness.Metrics {
	t.Helper()
	m, err := harness.Scrape(ctx, a.Base+"/metrics")
	if err != nil {
		t.Fatalf("agent %s: %v", a.Name, err)
	}
	return m
}

// checkAgentHealth checks that the replica's /healthz and /readyz answer
// 200.
func checkAgentHealth(t *testing.T, ctx context.Context, a *harness.Agent) {
	t.Helper()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := harness.Status(ctx, a.Base+path); err != nil || code != 200 {
			t.Errorf("agent %s %s = %d %s %v, want 200", a.Name, path, code, body, err)
		}
	}
}

func toolCall(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

// TestAgentRestartMarksRunsError: a run browses (open and get_title go
// through the gateway to the worker), then its model call blocks; the
// agent process is SIGKILLed mid-run and started again with the same
// --agent-name. The new incarnation finds its predecessor's run at start
// (before it answers on the bus) and ends it in ERROR "agent restarted";
// the model request of the dead process was given up; the restarted
// replica takes new runs.
//
// The other half of the recovery (a replica of another name gives up the
// runs of one whose heartbeat went stale) is not tested here: the
// staleness bound (agent.Config.HeartbeatStale, 30 s, scanned every 10 s)
// has no flag or variable, so it would take most of a minute; the agent's
// own tests cover it with a short bound.
func TestAgentRestartMarksRunsError(t *testing.T) {
	t.Parallel()
	site := newSite(t)
	gate := llmtest.NewGate()
	defer gate.Release()
	llm := llmtest.New(t,
		llmtest.Call(toolCall("open", map[string]any{"url": site + "/form"})),
		llmtest.Call(toolCall("get_title", map[string]any{})),
		llmtest.Step{Block: gate, Text: "too late"},
		llmtest.Reply("back again"),
	)
	af := startAgentFleet(t, true)
	ctx := af.ctx
	a1 := af.agent(t, "a1", llm)

	run, err := af.start("open the form and tell me its title")
	if err != nil {
		t.Fatal(err)
	}
	waitChan(t, gate.Entered(), time.Minute, "the run's third model call")
	// The tool calls reached the browser: get_title saw the page's title.
	reqs := llm.Requests()
	if res := reqs[2].ToolResults(); len(res) != 1 || !strings.Contains(res[0].Content, harness.FormTitle) {
		t.Fatalf("the model got get_title results %+v; want the form's title %q", res, harness.FormTitle)
	}
	mid := af.get(t, run.GetId())
	if mid.GetState() != agentv1.RunState_RUN_STATE_THINKING || mid.GetIteration() != 3 || mid.GetToolCalls() != 2 ||
		replicaName(mid) != "a1" {
		t.Fatalf("mid-run: %v; want THINKING at iteration 3 after 2 tool calls, on a1", mid)
	}

	if err := a1.Kill(); err != nil {
		t.Fatal(err)
	}
	// The dead process's connection to the model is gone with it.
	waitChan(t, gate.Cancelled(), 30*time.Second, "the killed agent's model request to be given up")

	a1b := af.agent(t, "a1", llm)
	// Recovery runs before the restarted replica registers its endpoints,
	// so the first answer already has the run ended.
	after := af.get(t, run.GetId())
	if after.GetState() != agentv1.RunState_RUN_STATE_ERROR || after.GetError() != "agent restarted" {
		t.Fatalf("after the restart: %v; want ERROR \"agent restarted\"", after)
	}
	if after.GetReplica() != mid.GetReplica() || after.GetIteration() != 3 {
		t.Errorf("the ended run says replica %q, iteration %d; want the dead incarnation %q at 3", after.GetReplica(), after.GetIteration(), mid.GetReplica())
	}

	// The restarted replica works.
	next, err := af.start("hello again")
	if err != nil {
		t.Fatal(err)
	}
	done := af.wait(t, next.GetId())
	if done.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || done.GetFinalAnswer() != "back again" ||
		done.GetReplica() == mid.GetReplica() || replicaName(done) != "a1" {
		t.Fatalf("a run after the restart: %v; want COMPLETE \"back again\" on a1's new incarnation", done)
	}

	checkAgentHealth(t, ctx, a1b)
	k := harness.Key
	waitAgentMetrics(t, ctx, a1b, map[string]float64{
		k("sovereign_agent_runs_ended_total", "outcome", "restarted"): 1,
		k("sovereign_agent_runs_ended_total", "outcome", "complete"):  1,
		k("sovereign_agent_runs_started_total"):                       1,
		k("sovereign_agent_runs_active"):                              0,
		k("sovereign_nats_reconnects_total"):                          0,
	})
}

// waitAgentMetrics reads the replica's /metrics until every key has its
// wanted value, for up to 30 s: a run's record says it ended a moment
// before its replica has finished ending it (chat note, active key,
// counters).
func waitAgentMetrics(t *testing.T, ctx context.Context, a *harness.Agent, want map[string]float64) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		m := scrapeAgent(t, ctx, a)
		var bad []string
		for key, v := range want {
			if got, ok := m[key]; !ok || got != v {
				bad = append(bad, fmt.Sprintf("%s = %v (present %v), want %v", key, got, ok, v))
			}
		}
		return kittest.Check(len(bad) == 0, "agent %s /metrics: %s", a.Name, strings.Join(bad, "; "))
	})
}

// gates tracks, per task, when its run's model call reached the gate.
type gates struct {
	mu      sync.Mutex
	entered map[string]chan struct{}
	count   int
	all     chan struct{} // closed when n have entered
	n       int
}

func newGates(n int) *gates {
	return &gates{entered: map[string]chan struct{}{}, all: make(chan struct{}), n: n}
}

func (g *gates) ch(task string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.entered[task]
	if !ok {
		c = make(chan struct{})
		g.entered[task] = c
	}
	return c
}

func (g *gates) enter(task string) {
	c := g.ch(task)
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c:
		return
	default:
	}
	close(c)
	g.count++
	if g.count == g.n {
		close(g.all)
	}
}

// taskOf is the task of a run's model request: its first user message.
func taskOf(r llmtest.Request) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// TestAgentRunsAcrossReplicas: two agent replicas, each limited to two runs
// at once; four runs are started together (a start refused by a full
// replica is sent again). Each run writes a file through the gateway's
// system tools and then blocks in the model until all four have got
// there: the runs are spread two and two over both replicas, a fifth start
// is refused by both, and once released all four complete with their
// files written. Then runs are cancelled over the bus while they wait for
// the model, until one cancel was answered by the replica that does not
// run it: it ends CANCELLED all the same, its model request given up.
func TestAgentRunsAcrossReplicas(t *testing.T) {
	t.Parallel()
	const runs = 4
	release := llmtest.NewGate()
	hold := llmtest.NewGate() // never released before the test ends
	defer release.Release()
	defer hold.Release()
	g := newGates(runs)
	llm := llmtest.New(t)
	llm.SetDefault(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		task := taskOf(r)
		switch {
		case strings.HasPrefix(task, "cancel-"):
			g.enter(task)
			return llmtest.Step{Block: hold, Text: "not cancelled"}
		case r.LastMessage().Role == "user":
			return llmtest.Call(toolCall("fs_write", map[string]any{"path": task + ".txt", "content": "written by " + task + "\n"}))
		default:
			g.enter(task)
			return llmtest.Step{Block: release, Text: "done " + task}
		}
	}))
	af := startAgentFleet(t, false)
	ctx := af.ctx
	agents := map[string]*harness.Agent{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range []string{"r1", "r2"} {
		wg.Go(func() {
			a, err := af.StartAgent(ctx, name, nil, "--llm-base-url", llm.URL, "--llm-model", "scripted", "--agent-max-runs", "2")
			if err != nil {
				t.Errorf("start agent %s: %v", name, err)
				return
			}
			mu.Lock()
			agents[name] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	ids := make([]string, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			run, err := af.start(fmt.Sprintf("task-%d", i+1))
			if err == nil {
				ids[i] = run.GetId()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start task-%d: %v", i+1, err)
		}
	}
	waitChan(t, g.all, time.Minute, "all four runs to reach the model after their tool call")

	perReplica := map[string]int{}
	for i, id := range ids {
		run := af.get(t, id)
		if run.GetState() != agentv1.RunState_RUN_STATE_THINKING || run.GetToolCalls() != 1 {
			t.Errorf("task-%d while blocked: %v; want THINKING after 1 tool call", i+1, run)
		}
		perReplica[replicaName(run)]++
	}
	t.Logf("runs per replica: %v", perReplica)
	if len(perReplica) != 2 || perReplica["r1"] != 2 || perReplica["r2"] != 2 {
		t.Errorf("runs per replica = %v; want two on r1 and two on r2", perReplica)
	}
	// Both replicas are full: a fifth run is refused, saying why.
	_, err := af.StartRun(ctx, &agentv1.StartRunRequest{Message: "task-5", Caller: agentCaller})
	if !bus.Is(err, commonv1.ErrorCode_NO_CAPACITY) || !strings.Contains(err.Error(), "SOVEREIGN_AGENT_MAX_RUNS=2") {
		t.Errorf("a fifth start with both replicas full: %v; want NO_CAPACITY naming SOVEREIGN_AGENT_MAX_RUNS=2", err)
	}

	release.Release()
	for i, id := range ids {
		task := fmt.Sprintf("task-%d", i+1)
		run := af.wait(t, id)
		if run.GetState() != agentv1.RunState_RUN_STATE_COMPLETE || run.GetFinalAnswer() != "done "+task {
			t.Errorf("%s ended %v; want COMPLETE \"done %s\"", task, run, task)
		}
		b, err := os.ReadFile(filepath.Join(af.Workspace, task+".txt"))
		if err != nil || string(b) != "written by "+task+"\n" {
			t.Errorf("%s.txt in the workspace = %q, %v; want what the run wrote", task, b, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Cancels: each is answered by either replica; go on until one was
	// answered by the replica that does not own the run (each try has even
	// odds, so 16 tries all landing on the owner is 1 in 65536).
	k := harness.Key
	cancelsOK := func(a *harness.Agent) float64 {
		return scrapeAgent(t, ctx, a)[k("sovereign_agent_requests_total", "endpoint", "run.cancel", "outcome", "ok")]
	}
	crossed := false
	tries := 0
	for try := 1; try <= 16 && !crossed; try++ {
		tries = try
		task := fmt.Sprintf("cancel-%d", try)
		run, err := af.start(task)
		if err != nil {
			t.Fatal(err)
		}
		waitChan(t, g.ch(task), time.Minute, task+"'s model call")
		owner := replicaName(run)
		before := map[string]float64{"r1": cancelsOK(agents["r1"]), "r2": cancelsOK(agents["r2"])}
		if _, err := af.CancelRun(ctx, run.GetId(), "e2e"); err != nil {
			t.Fatal(err)
		}
		answered := ""
		for name, a := range agents {
			if cancelsOK(a) > before[name] {
				answered = name
			}
		}
		done := af.wait(t, run.GetId())
		if done.GetState() != agentv1.RunState_RUN_STATE_CANCELLED || done.GetError() != "cancelled by e2e" {
			t.Fatalf("%s (on %s, cancel answered by %q) ended %v; want CANCELLED \"cancelled by e2e\"", task, owner, answered, done)
		}
		switch answered {
		case "":
			t.Fatalf("neither replica counted the cancel of %s", task)
		case owner:
			t.Logf("%s: the cancel was answered by its own replica %s; again", task, owner)
			continue
		}
		crossed = true
		t.Logf("%s: run on %s, cancel answered by %s: CANCELLED", task, owner, answered)
		// The owner gave up the model request in flight.
		kittest.Eventually(t, 30*time.Second, func() error {
			return kittest.Check(modelCancelled(llm, task), "%s: the model request of the cancelled run has not been given up", task)
		})
	}
	if !crossed {
		t.Fatalf("in %d tries no cancel was answered by the other replica", tries)
	}

	// A run's record says CANCELLED before its replica has finished ending
	// it (chat note, active key, metrics), so the tally is read until it
	// settles.
	for _, name := range []string{"r1", "r2"} {
		checkAgentHealth(t, ctx, agents[name])
	}
	tally := func() (ended map[string]float64, active map[string]float64) {
		ended, active = map[string]float64{}, map[string]float64{}
		for _, name := range []string{"r1", "r2"} {
			m := scrapeAgent(t, ctx, agents[name])
			for _, outcome := range []string{"complete", "cancelled"} {
				ended[outcome] += m[k("sovereign_agent_runs_ended_total", "outcome", outcome)]
			}
			ended["no_capacity"] += m[k("sovereign_agent_requests_total", "endpoint", "run.start", "outcome", "NO_CAPACITY")]
			active[name] = m[k("sovereign_agent_runs_active")]
		}
		return ended, active
	}
	settled := func(ended, active map[string]float64) bool {
		return ended["complete"] == runs && ended["cancelled"] == float64(tries) && ended["no_capacity"] >= 1 &&
			active["r1"] == 0 && active["r2"] == 0
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		ended, active := tally()
		return kittest.Check(settled(ended, active), "over both replicas after the last run ended: %v runs complete, %v cancelled, %v starts refused, active %v; want %d, %d, at least 1 and none active",
			ended["complete"], ended["cancelled"], ended["no_capacity"], active, runs, tries)
	})
}

// modelCancelled reports whether the model request of task's run was given
// up by its client.
func modelCancelled(llm *llmtest.Server, task string) bool {
	for _, r := range llm.Requests() {
		if taskOf(r) == task && r.Cancelled {
			return true
		}
	}
	return false
}
