// Package agent is the agent orchestrator: it runs LLM tool loops against
// any OpenAI-compatible chat-completions API (OpenAI, OpenRouter, Ollama,
// LM Studio, vLLM, … through github.com/openai/openai-go) and drives the
// browser fleet through the gateway's one dispatcher on the bus
// (sov.tools.list, sov.tools.call), so an agent's tool calls get the same
// URL policy, approvals, secrets and audit as an MCP client's.
//
// # Service
//
// Every replica serves the micro service "sovereign-agent" (queue group
// "sovereign-agent"): sov.agent.run.start|get|cancel|list and
// sov.agent.settings.get|put (see proto/sovereign/agent/v1). A start is
// answered at once with the run in state IDLE; the run goes on in a
// goroutine of the replica that took it, at most Config.MaxRuns at once
// per replica (a start beyond it gets NO_CAPACITY naming the limit).
//
// Run records live in the KV bucket "<prefix>_agent" ([Bucket]):
//
//	run.<id>        the Run (protojson), changed by compare and set
//	active.<id>     "<name>/<incarnation>" of the owner, while the run has not ended
//	replica.<name>  the replica's heartbeat (incarnation and time, every 5 s)
//	settings        the provider settings saved from the console (API key sealed)
//
// After every change the owner publishes the Run on
// sov.agent.run.event.<id>. A cancel (any replica) sets cancel_requested
// in the record and tells the owner on
// sov.agent.r.<name>.<incarnation>.cancel, which cancels the model or tool
// call in flight; the loop also re-reads the record before every model and
// tool call. A replica ends in ERROR "agent restarted" the active runs of
// its own name with another incarnation (its previous life) and, every
// 10 s, those of replicas whose heartbeat is missing or older than 30 s:
// no run stays THINKING for ever. Ended runs are removed 7 days after
// their last change ([RunRetention]).
//
// # The loop
//
// Settings are the environment's (SOVEREIGN_LLM_*) overlaid with the
// console's saved ones. The run appends the user message to its chat in
// the history service, lists the tools (for_agent) as OpenAI function
// tools without their "session" argument (the run keeps the browser
// session handle itself and passes it on every call), then repeats: call
// the model (streaming by default) → store its message → run each tool
// call → store each result, until the model answers without tool calls
// (COMPLETE, final_answer) or Config.MaxIterations model calls were made
// (COMPLETE, final_answer "Stopped after N iterations (the cap): …").
// A call of an unknown tool, arguments that are not a JSON object, a tool
// failure and a failed bus request go back to the model as "error: …"
// tool results; the run goes on. Tool results show text only (images are
// named, not shown) and are clipped to [MaxToolResult] characters. Model
// calls are retried on 408, 409, 429, 5xx and connection errors (3
// retries, exponential backoff from 0.5 s, Retry-After honoured), then
// the run ends in ERROR with the provider's status and message.
//
// # Context budget
//
// Tokens are estimated as characters / 4. Every request carries the
// system prompt, the tool definitions, and room for the reply (a quarter
// of the budget, at most 4096 tokens); the new user message and the run's
// newest exchange (its last assistant message and the tool results after
// it) are always kept. The rest of the budget (SOVEREIGN_LLM_CONTEXT_TOKENS,
// default 32000) is filled with the other messages — earlier chat history
// and the run's earlier exchanges — newest first, as one stretch: the first
// message that does not fit and everything older are left out. A stretch
// never starts with tool results whose assistant call was left out: those
// are dropped too. The log says how many messages were left out. Stored
// history is made well-formed first: a tool call without a stored result
// (a run that ended mid-call) gets a result saying so.
package agent
