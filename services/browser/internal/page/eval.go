package page

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// The page's side of eval, in the page's main world (the page can see it
// there: nothing of Sovereign's isolated world goes with it).
var (
	// serializeJS turns an eval result into JSON text in the page.
	//
	//go:embed serialize.js
	serializeJS string
	// evalBodyJS runs a script as the body of an async function.
	//
	//go:embed eval_body.js
	evalBodyJS string
	// evalElementJS calls a script, a function, with an element.
	//
	//go:embed eval_element.js
	evalElementJS string
	// evalParkedJS calls evalElementJS with a parked element.
	//
	//go:embed eval_parked.js
	evalParkedJS string
	// parkJS parks an element under a global name, or takes it away.
	//
	//go:embed park.js
	parkJS string
)

// parking is park.js's argument.
type parking struct {
	Key string `json:"key"`
	On  bool   `json:"on"`
}

// withScript returns the eval template tmpl with the script (or another
// template) in place of its placeholders: each of pairs is a placeholder
// and its text. A template names its placeholders only where they go, never
// in a comment: a script of several lines would end a line comment.
func withScript(tmpl string, pairs ...string) string {
	return strings.NewReplacer(pairs...).Replace(tmpl)
}

// eval runs script in the page's main world and returns its value as JSON.
//
// The script is first evaluated as a REPL script, as in the DevTools
// console: an expression (document.title), statements whose last value is
// the result (let n = 2; n * 21) and top-level await all work, and a
// returned promise is awaited. When that does not parse (return x), the
// script becomes the body of an async function, so return gives the
// result.
func (t *Tab) eval(ctx context.Context, script string) (*browserv1.ToolResult, error) {
	if strings.TrimSpace(script) == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "eval needs script, such as document.title")
	}
	obj, exc, err := evaluate(ctx, script, true)
	if err == nil && exc != nil && isCompileError(exc) {
		var exc2 *runtime.ExceptionDetails
		obj, exc2, err = evaluate(ctx, withScript(evalBodyJS, "__SCRIPT__", script), false)
		if exc2 == nil || !isCompileError(exc2) {
			exc = exc2
		}
	}
	if err != nil {
		return nil, err
	}
	// A primitive result makes no remote object; releasing the group would
	// cost a round trip for nothing.
	t.madeObjects = exc != nil || (obj != nil && obj.ObjectID != "")
	if exc == nil && obj != nil && obj.Subtype == runtime.RemoteObjectSubtypePromise {
		obj, exc, err = awaitPromise(ctx, obj.ObjectID)
		if err != nil {
			return nil, err
		}
	}
	return t.evalResult(ctx, obj, exc)
}

// evalResult turns what a script returned (or threw) into the result of
// eval: its value as JSON text, cut at the call's cap, and as
// {"type", "value"} in the structured result.
func (t *Tab) evalResult(ctx context.Context, obj *runtime.RemoteObject, exc *runtime.ExceptionDetails) (*browserv1.ToolResult, error) {
	if exc != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_SCRIPT_ERROR, "the script threw %s", exceptionText(exc))
	}
	text, value, err := jsonOf(ctx, obj)
	if err != nil {
		return nil, err
	}
	total, limit := utf8.RuneCountInString(text), t.capChars(DefaultTextChars)
	truncated := total > limit
	if truncated {
		// The value is as large as its text: the structured copy goes too.
		text = clipRunes(text, limit) + cutMarker(limit, total, "return a smaller part of the value (slice it in the script), or pass a larger max_chars")
		value = json.RawMessage("null")
	}
	out, err := structured.Object(struct {
		Type      string          `json:"type"`
		Value     json.RawMessage `json:"value"`
		Truncated bool            `json:"truncated,omitempty"`
	}{string(obj.Type), value, truncated})
	if err != nil {
		return nil, err
	}
	return &browserv1.ToolResult{Content: []*browserv1.Content{textContent(text)}, Structured: out}, nil
}

// evalOn runs script, a function, with the element that el names, in the
// page's main world (where the page's own variables are): (el) =>
// el.textContent. The element is handed over under a one-time global name
// that the expression deletes before it calls the function, so the call
// is an ordinary evaluation that V8 stops at the deadline.
func (t *Tab) evalOn(ctx context.Context, el *browserv1.Element, script string) (*browserv1.ToolResult, error) {
	if strings.TrimSpace(script) == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "eval needs script, a function of the element such as (el) => el.textContent")
	}
	e, err := t.resolve(ctx, el, "eval")
	if err != nil {
		return nil, err
	}
	node, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: e.obj})
	if err != nil {
		return nil, fmt.Errorf("eval: describe %s: %w", e.what, err)
	}
	// Without an execution context, DOM.resolveNode answers in the main
	// world of the element's frame.
	main, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: node.Node.BackendNodeID, ObjectGroup: objectGroup})
	if err != nil || main.Object == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s is no longer in the page; take a new snapshot", e.what)
	}
	fn := withScript(evalElementJS, "__SCRIPT__", script)
	if e.prefix != "" {
		// An element in a frame: called on it directly, in its frame's
		// main world (V8's deadline does not reach this call).
		r, err := chromedp.Call(ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
			FunctionDeclaration: fn,
			ObjectID:            main.Object.ObjectID, ObjectGroup: objectGroup, AwaitPromise: new(true), Silent: new(true),
		})
		if err != nil {
			return nil, err
		}
		t.madeObjects = true
		return t.evalResult(ctx, r.Result, r.ExceptionDetails)
	}
	key := fmt.Sprintf("__sovEvalEl%d", time.Now().UnixNano())
	if err := callMain(ctx, main.Object.ObjectID, parkJS, nil, parking{key, true}); err != nil {
		return nil, err
	}
	k, _ := json.Marshal(key)
	obj, exc, err := evaluate(ctx, withScript(evalParkedJS, "__KEY__", string(k), "__FUNCTION__", fn), false)
	if err != nil {
		return nil, err
	}
	if exc != nil && isCompileError(exc) {
		// The expression never ran, so the element is still parked.
		_ = callMain(ctx, main.Object.ObjectID, parkJS, nil, parking{key, false})
	}
	t.madeObjects = true
	if exc == nil && obj != nil && obj.Subtype == runtime.RemoteObjectSubtypePromise {
		if obj, exc, err = awaitPromise(ctx, obj.ObjectID); err != nil {
			return nil, err
		}
	}
	return t.evalResult(ctx, obj, exc)
}

// evaluate evaluates expr in the main world of the main frame. V8 stops a
// script that runs (not awaits) past the soft deadline, so a loop that
// never ends does not wedge the tab.
func evaluate(ctx context.Context, expr string, repl bool) (obj *runtime.RemoteObject, exc *runtime.ExceptionDetails, err error) {
	ctx, span := startSpan(ctx, spanEvaluate, attribute.Int("sovereign.script.size", len(expr)), attribute.Bool("sovereign.script.repl", repl))
	defer func() {
		if exc != nil {
			span.SetAttributes(attribute.Bool("sovereign.script.threw", true))
		}
		if obj != nil {
			span.SetAttributes(attribute.String("sovereign.result.type", string(obj.Type)), attribute.Int("sovereign.result.size", len(obj.Value)))
		}
		endSpan(span, err)
	}()
	limit := max(time.Until(softDeadline(ctx, 0)), 10*time.Millisecond)
	start := time.Now()
	r, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{
		Expression:   expr,
		ObjectGroup:  objectGroup,
		ReplMode:     new(repl),
		AwaitPromise: new(true),
		UserGesture:  new(true),
		Silent:       new(true),
		Timeout:      runtime.TimeDelta(limit.Milliseconds()),
	})
	var ce *cdproto.Error
	if time.Since(start) >= limit && (errors.As(err, &ce) || (err == nil && r.Result == nil && r.ExceptionDetails == nil)) {
		// V8 ended the script at the timeout; Chromium answers with an
		// internal error (or an empty result).
		return nil, nil, errTerminated
	}
	return r.Result, r.ExceptionDetails, err
}

// errTerminated says that V8 stopped a script at its deadline.
var errTerminated = bus.Errorf(commonv1.ErrorCode_TIMEOUT, "eval: the script was still running at the request deadline and was stopped; avoid endless loops or split the work")

// awaitPromise waits for the promise obj to settle.
func awaitPromise(ctx context.Context, obj runtime.RemoteObjectID) (*runtime.RemoteObject, *runtime.ExceptionDetails, error) {
	r, err := chromedp.Call(ctx, runtime.AwaitPromise, runtime.AwaitPromiseParams{PromiseObjectID: obj})
	return r.Result, r.ExceptionDetails, err
}

// isCompileError reports whether the exception is a syntax error of the
// script itself rather than one that the script threw while it ran
// (JSON.parse throws SyntaxError too, with a stack).
func isCompileError(d *runtime.ExceptionDetails) bool {
	return d.Exception != nil && d.Exception.ClassName == "SyntaxError" &&
		(d.StackTrace == nil || len(d.StackTrace.CallFrames) == 0)
}

// jsonOf returns the text of a result for the model and its JSON value.
// undefined is the text "undefined" and the value null.
func jsonOf(ctx context.Context, obj *runtime.RemoteObject) (string, json.RawMessage, error) {
	switch {
	case obj == nil || obj.Type == runtime.RemoteObjectTypeUndefined:
		return "undefined", json.RawMessage("null"), nil
	case obj.UnserializableValue != "":
		s := string(obj.UnserializableValue)
		v, _ := json.Marshal(s)
		return s, v, nil
	case obj.ObjectID != "":
		var s *string
		if err := callMain(ctx, obj.ObjectID, serializeJS, &s, nil); err != nil {
			if !isJSError(err) {
				return "", nil, err
			}
		}
		if s == nil || !json.Valid([]byte(*s)) {
			v, _ := json.Marshal(obj.Description)
			return string(v), v, nil
		}
		return *s, json.RawMessage(*s), nil
	case len(obj.Value) > 0:
		return string(obj.Value), json.RawMessage(obj.Value), nil
	}
	return "null", json.RawMessage("null"), nil
}
