package catalog

import (
	"encoding/json"
	"errors"
	"strings"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// The agent tools start agent runs on the agent orchestrator
// (sov.agent.run.*). The gateway answers them with a handler of their own;
// they are never offered to agent runs (no run starts another).

// RunBrowserTask is the tool that hands a whole task to the agent.
const RunBrowserTask = "run_browser_task"

// MaxTaskChars bounds the task of run_browser_task (characters).
const MaxTaskChars = 32 << 10

// MaxRunIterations is the highest max_iterations run_browser_task accepts
// (the agent's own cap).
const MaxRunIterations = 1000

var agentTools = []Tool{
	{
		Name: RunBrowserTask, Title: "Run a browser task",
		Description: "Hand a whole multi-step browsing task to Sovereign's agent, described in plain language " +
			"(\"find the pricing page of example.com and list the plans\"). The agent plans and runs the browser " +
			"tools itself, in this call's browser session, and returns its final answer. A task can take minutes: " +
			"the call reports progress (iteration and current tool) while it works, and cancelling the call stops " +
			"the run. Pass chat_id from an earlier result to continue that conversation. Needs the agent service " +
			"and a configured model provider.",
		params: []Param{
			{Name: "task", Type: String, Required: true, Description: "What to do, in plain language, with everything the agent needs to know"},
			{Name: "max_iterations", Type: Integer, Min: bound(1), Max: bound(MaxRunIterations),
				Description: "Most model calls the run may make (default: the agent's configured cap, 100 unless changed)"},
			{Name: "chat_id", Type: String, Description: "Continue this chat (chat_id of an earlier run_browser_task result) instead of starting a new one"},
		},
		build: func(Args) (*browserv1.ToolRequest, error) {
			return nil, errors.New("run_browser_task has a handler of its own; it builds no browser request")
		},
	},
}

// StartsRuns reports whether t starts agent runs: such tools are not
// offered to agent runs, nor callable on the bus.
func (t Tool) StartsRuns() bool { return t.Name == RunBrowserTask }

// AgentInputSchema is t's input schema without the session argument: an
// agent run acts in the browser session its request names, never in one
// the model picks.
func (t Tool) AgentInputSchema() json.RawMessage {
	return Tool{Local: true, params: t.params}.InputSchema()
}

// Task is a checked run_browser_task call.
type Task struct {
	Task          string
	MaxIterations int32 // 0: the agent's default
	ChatID        string
	// Session is the explicit session handle argument, "" when absent.
	Session string
}

// ParseTask checks the arguments of run_browser_task. A bad argument is an
// *ArgError whose message names it.
func ParseTask(raw any) (Task, error) {
	t, _ := Lookup(RunBrowserTask)
	args, err := check(t.Params(), raw)
	if err != nil {
		return Task{}, err
	}
	task, err := nonEmpty(args, "task")
	if err != nil {
		return Task{}, err
	}
	if n := len([]rune(task)); n > MaxTaskChars {
		return Task{}, argErr("task", "is %d characters long; at most %d are accepted (put long material on a page and name its URL)", n, MaxTaskChars)
	}
	out := Task{Task: task, ChatID: strings.TrimSpace(args.str("chat_id")), Session: args.str(SessionParam)}
	if n, ok := args.integer("max_iterations"); ok {
		out.MaxIterations = int32(n)
	}
	return out, nil
}
