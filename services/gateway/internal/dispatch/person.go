package dispatch

import "context"

// What a handler may do with the caller while its call runs. Each
// transport provides these capabilities in the Call it builds, or a clear
// refusal; none reaches its transport any other way:
//
//   - Progress: the MCP adapter sends notifications/progress (under the
//     client's progress token) and log messages; the bus adapter drops
//     them (NoProgress: sov.tools.call has one reply and no place for
//     them); a script tool's inner calls pass on notices, not reports.
//   - Asking a person: a 2025 MCP client that declared elicitation is
//     asked on the call's stream (Call.Ask); a 2026 one is answered with a
//     request for input and retries with the reply (Call.Rounds). A call
//     with neither (the bus, clients without elicitation) can only wait for
//     a person on the operator console (the approval queue, which any
//     transport reaches).

// Progress tells the caller how a long call goes.
type Progress interface {
	// Report says how far the call is: progress grows with each report;
	// total is 0 when unknown. A caller that did not ask for progress
	// gets nothing, and that is no error.
	Report(ctx context.Context, progress, total float64, message string) error
	// Notify tells the person behind the caller something that needs
	// their attention now (warn: they must act), as logger.
	Notify(ctx context.Context, logger, text string, warn bool) error
}

// NoProgress drops every report and notice: the Progress of a transport
// with no channel for them (sov.tools.call answers once). Dispatch gives it
// to a Call without a Progress.
var NoProgress Progress = noProgress{}

type noProgress struct{}

func (noProgress) Report(context.Context, float64, float64, string) error { return nil }
func (noProgress) Notify(context.Context, string, string, bool) error     { return nil }

// Form asks a person one question: a message, and one field whose answer
// is one of Choices.
type Form struct {
	Message string
	// Field keys the answer; Title and Description present it.
	Field, Title, Description string
	Choices                   []string
}

// Reply is a person's answer to a Form.
type Reply struct {
	// Accepted is false when they declined or dismissed the form.
	Accepted bool
	// Fields are the form's answers when Accepted.
	Fields map[string]any
}

// Asker puts a form to the person behind a call's caller and waits for
// the reply (MCP elicitation on the call's stream).
type Asker interface {
	Ask(ctx context.Context, f Form) (Reply, error)
}

// Rounds is a call whose caller can be answered with a request for input
// (an InputRequest result) and retries with the person's replies.
type Rounds struct {
	// State is the InputRequest.State the retry carries ("" on a first
	// call).
	State string
	// Replies are the person's replies, by InputRequest.Key; a reply the
	// transport could not read is missing.
	Replies map[string]Reply
}

// InputRequest is a result that asks the caller for a person's reply to
// Form before the call can run; the caller retries with State and the
// reply under Key (Rounds).
type InputRequest struct {
	State string
	Key   string
	Form  Form
}
