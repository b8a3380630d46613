package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// reply is what the model answered.
type reply struct {
	Text  string
	Calls []toolCall
}

// toolCall is one tool call of the assistant, as history stores it
// (tool_calls_json is a JSON array of these: the OpenAI shape).
type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func newToolCall(id, name, args string) toolCall {
	tc := toolCall{ID: id, Type: "function"}
	tc.Function.Name, tc.Function.Arguments = name, args
	return tc
}

// modelCall is one chat completion.
type modelCall struct {
	settings settings
	stream   bool
	retries  int
	messages []message
	tools    []openai.ChatCompletionToolUnionParam
}

// complete asks the model once (retrying 408, 409, 429, 5xx and
// connection errors with backoff, honouring Retry-After, as openai-go
// does) and returns its reply, or an error that says what went wrong in
// words an operator can act on.
func complete(ctx context.Context, mc modelCall) (reply, error) {
	var attempts atomic.Int32
	svc := openai.NewChatCompletionService(
		option.WithBaseURL(mc.settings.BaseURL),
		option.WithHTTPClient(http.DefaultClient),
		option.WithAPIKey(mc.settings.APIKey),
		option.WithMaxRetries(mc.retries),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			attempts.Add(1)
			return next(r)
		}),
	)
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(mc.settings.Model),
		Messages: toParams(mc.settings.SystemPrompt, mc.messages),
		Tools:    mc.tools,
	}
	if t := mc.settings.Temperature; t != nil {
		params.Temperature = openai.Float(*t)
	}
	var (
		rep reply
		err error
	)
	if mc.stream {
		rep, err = streamed(ctx, svc, params)
	} else {
		rep, err = whole(ctx, svc, params)
	}
	if err != nil {
		return reply{}, describe(ctx, err, int(attempts.Load()), mc.settings)
	}
	return rep, nil
}

func whole(ctx context.Context, svc openai.ChatCompletionService, params openai.ChatCompletionNewParams) (reply, error) {
	cc, err := svc.New(ctx, params)
	if err != nil {
		return reply{}, err
	}
	if len(cc.Choices) == 0 {
		return reply{}, errNoChoices
	}
	return fromMessage(cc.Choices[0].Message), nil
}

func streamed(ctx context.Context, svc openai.ChatCompletionService, params openai.ChatCompletionNewParams) (reply, error) {
	stream := svc.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return reply{}, err
	}
	if len(acc.Choices) == 0 {
		return reply{}, errNoChoices
	}
	return fromMessage(acc.Choices[0].Message), nil
}

var errNoChoices = errors.New("the model provider answered without a reply (no choices)")

func fromMessage(m openai.ChatCompletionMessage) reply {
	r := reply{Text: m.Content}
	for _, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			// A custom tool call: not something this agent offers; the
			// loop answers it as an unknown tool.
			r.Calls = append(r.Calls, newToolCall(tc.ID, tc.Custom.Name, tc.Custom.Input))
			continue
		}
		r.Calls = append(r.Calls, newToolCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	return r
}

// toParams builds the request messages: the system prompt, then msgs.
func toParams(system string, msgs []message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs)+1)
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range msgs {
		switch m.Role {
		case "user":
			out = append(out, openai.UserMessage(m.Content))
		case "tool":
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			p := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" || len(m.Calls) == 0 {
				p.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.Calls {
				p.ToolCalls = append(p.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: tc.Function.Name, Arguments: tc.Function.Arguments,
						},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &p})
		}
	}
	return out
}

// describe turns a failed model call into an error an operator can act
// on. The API key never appears in it: a provider that echoes it gets it
// replaced.
func describe(ctx context.Context, err error, attempts int, s settings) error {
	tries := func() string {
		if attempts <= 1 {
			return "1 attempt"
		}
		return fmt.Sprintf("%d attempts", attempts)
	}
	var apiErr *openai.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &modelError{msg: fmt.Sprintf("the model did not answer within the LLM timeout (%s, SOVEREIGN_LLM_TIMEOUT) after %s", timeoutOf(ctx), tries()), outcome: "timeout"}
	case ctx.Err() != nil:
		return &modelError{msg: "the model call was cancelled", outcome: "cancelled", err: context.Canceled}
	case errors.As(err, &apiErr):
		status := fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
		msg := scrubKey(providerMessage(apiErr), s.APIKey)
		var text string
		switch code := apiErr.StatusCode; {
		case code == http.StatusUnauthorized:
			text = fmt.Sprintf("the model provider refused the API key (%s): %s; check the key in the chat settings or SOVEREIGN_LLM_API_KEY", status, msg)
		case code == http.StatusForbidden:
			text = fmt.Sprintf("the model provider denied access (%s): %s; check the API key's permissions for model %q", status, msg, s.Model)
		case code == http.StatusNotFound:
			text = fmt.Sprintf("the model provider answered %s: unknown model %q, or the base URL %s is not an OpenAI-compatible API (it usually ends in /v1): %s", status, s.Model, redactURL(s.BaseURL), msg)
		case code == http.StatusTooManyRequests || code >= 500 || code == http.StatusRequestTimeout || code == http.StatusConflict:
			text = fmt.Sprintf("the model provider answered %s after %s: %s", status, tries(), msg)
		default:
			text = fmt.Sprintf("the model provider rejected the request (%s): %s", status, msg)
		}
		return &modelError{msg: text, outcome: fmt.Sprintf("http_%d", apiErr.StatusCode)}
	case errors.Is(err, errNoChoices):
		return &modelError{msg: err.Error(), outcome: "bad_reply"}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return &modelError{msg: fmt.Sprintf("the model provider at %s is not reachable after %s: %s", redactURL(s.BaseURL), tries(), scrubKey(uerr.Err.Error(), s.APIKey)), outcome: "unreachable"}
	}
	return &modelError{msg: fmt.Sprintf("the model call failed after %s: %s", tries(), scrubKey(err.Error(), s.APIKey)), outcome: "error"}
}

// modelError is a failed model call; outcome labels the metric.
type modelError struct {
	msg     string
	outcome string
	err     error
}

func (e *modelError) Error() string { return e.msg }
func (e *modelError) Unwrap() error { return e.err }

// timeoutOf is the timeout that ended ctx, as far as it can be known.
func timeoutOf(ctx context.Context) string {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d.String()
	}
	return "its deadline"
}

type timeoutKey struct{}

// providerMessage is the provider's own words: the OpenAI error message,
// else the start of the response body.
func providerMessage(e *openai.Error) string {
	if e.Message != "" {
		return clip(e.Message, 500)
	}
	if e.Response != nil && e.Response.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(e.Response.Body, 4096))
		if s := strings.TrimSpace(string(b)); s != "" {
			return clip(s, 500)
		}
	}
	return "(no message)"
}

// scrubKey replaces the API key in s.
func scrubKey(s, key string) string {
	if len(key) < 4 {
		return s
	}
	return strings.ReplaceAll(s, key, "[api key]")
}

// redactURL drops credentials, query and fragment from a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a malformed URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// clip cuts s to n characters, saying how many were cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("[… clipped: %d more characters]", len(r)-n)
}
