package agent

import (
	"encoding/json"
	"unicode/utf8"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// message is one message of a conversation (without the system prompt).
type message struct {
	Role       string // user | assistant | tool
	Content    string
	Calls      []toolCall // assistant
	ToolCallID string     // tool
}

// tokens estimates the tokens of a message: characters / 4, rounded up,
// tool calls included, plus a few for the message's framing.
func (m message) tokens() int {
	n := utf8.RuneCountInString(m.Content) + len(m.ToolCallID)
	for _, c := range m.Calls {
		n += len(c.ID) + utf8.RuneCountInString(c.Function.Name) + utf8.RuneCountInString(c.Function.Arguments)
	}
	return estimate(n) + 4
}

// estimate is the token estimate of n characters.
func estimate(n int) int { return (n + 3) / 4 }

// fromHistory turns stored chat messages into a well-formed conversation:
// system messages are left out (the system prompt is the settings'); an
// assistant message's tool calls without a stored result get one saying
// so (a run that ended before its tool answered); tool results that answer
// no call before them are dropped. Providers refuse both malformations.
func fromHistory(stored []*historyv1.ChatMessage) []message {
	var out []message
	pending := map[string]bool{} // calls of the last assistant message still without a result
	var order []string
	flush := func() {
		for _, id := range order {
			if pending[id] {
				out = append(out, message{Role: "tool", ToolCallID: id, Content: "error: no result was recorded for this call (the run ended before the tool answered)"})
			}
		}
		pending, order = map[string]bool{}, nil
	}
	for _, s := range stored {
		switch s.GetRole() {
		case "tool":
			if !pending[s.GetToolCallId()] {
				continue
			}
			pending[s.GetToolCallId()] = false
			out = append(out, message{Role: "tool", Content: s.GetContent(), ToolCallID: s.GetToolCallId()})
		case "assistant":
			flush()
			m := message{Role: "assistant", Content: s.GetContent()}
			if s.GetToolCallsJson() != "" {
				var calls []toolCall
				if err := json.Unmarshal([]byte(s.GetToolCallsJson()), &calls); err == nil {
					for _, c := range calls {
						if c.ID == "" {
							continue
						}
						if c.Type == "" {
							c.Type = "function"
						}
						m.Calls = append(m.Calls, c)
						pending[c.ID] = true
						order = append(order, c.ID)
					}
				}
			}
			if m.Content == "" && len(m.Calls) == 0 {
				continue
			}
			out = append(out, m)
		case "user":
			flush()
			out = append(out, message{Role: "user", Content: s.GetContent()})
		}
	}
	flush()
	return out
}

// trimmed is the result of fitting a conversation into the budget.
type trimmed struct {
	Messages      []message
	Dropped       int // messages left out
	DroppedTokens int
	Budget        int // tokens available for the messages
}

// fit keeps what the context budget allows, by the rule in the package
// documentation: msgs is the conversation (history, the new user message
// at index pinned, then the run's own messages); fixed is the estimate of
// what every request carries besides them (system prompt, tool
// definitions) and reserve the room left for the reply. The pinned user
// message and the run's newest exchange (its last assistant message and
// the tool results after it) are always kept; older messages are kept
// newest first while they fit, as one contiguous stretch, and a kept
// stretch never starts with tool results whose call was left out.
func fit(msgs []message, pinned, budget, fixed, reserve int) trimmed {
	avail := budget - fixed - reserve
	t := trimmed{Budget: avail}
	if pinned >= 0 && pinned < len(msgs) {
		avail -= msgs[pinned].tokens()
	}
	// The newest exchange of the run: from its last assistant message on.
	mustFrom := len(msgs)
	if pinned >= 0 {
		for i := len(msgs) - 1; i > pinned; i-- {
			if msgs[i].Role == "assistant" {
				mustFrom = i
				break
			}
		}
	}
	for i := mustFrom; i < len(msgs); i++ {
		avail -= msgs[i].tokens()
	}
	// Walk back from the newest message before the must-keep stretch.
	start := mustFrom
	for i := mustFrom - 1; i >= 0; i-- {
		if i == pinned {
			start = i
			continue
		}
		n := msgs[i].tokens()
		if n > avail {
			break
		}
		avail -= n
		start = i
	}
	keep := make([]bool, len(msgs))
	for i := start; i < len(msgs); i++ {
		keep[i] = true
	}
	if pinned >= 0 && pinned < len(msgs) {
		keep[pinned] = true
	}
	// A stretch that starts with tool results (their call was cut) drops
	// them: on either side of the pinned user message.
	for _, from := range []int{start, pinned + 1} {
		for i := from; i >= 0 && i < len(msgs) && i != pinned && keep[i] && msgs[i].Role == "tool"; i++ {
			if i >= mustFrom {
				break
			}
			keep[i] = false
		}
	}
	for i, m := range msgs {
		if keep[i] {
			t.Messages = append(t.Messages, m)
		} else {
			t.Dropped++
			t.DroppedTokens += m.tokens()
		}
	}
	return t
}
