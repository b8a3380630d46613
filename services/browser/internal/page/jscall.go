package page

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// The Go–JavaScript interface. The in-page code lives in .js files of this
// package (page.js, forms.js, linted by scripts/jslint); Go calls each of
// their functions through one typed wrapper (js_*.go, by domain), and every
// wrapper through the generic helpers here, which send the one function
// declaration of call.js with the function's name and its arguments and
// decode its result. No other JavaScript is written in Go strings.

// callJSDecl dispatches a call to a function of an in-page api by name.
//
//go:embed call.js
var callJSDecl string

// jsFunc names a function of an in-page api.
type jsFunc struct {
	api  string // the global that holds the api: pageAPI or formsAPI
	name string
}

const (
	// pageAPI is page.js's api, installed in every frame document.
	pageAPI = "__sov"
	// formsAPI is forms.js's api, installed next to it.
	formsAPI = "__sovForms"
)

// pageFn and formsFn name functions of page.js and forms.js.
func pageFn(name string) jsFunc  { return jsFunc{pageAPI, name} }
func formsFn(name string) jsFunc { return jsFunc{formsAPI, name} }

// String names the function as errors show it: "page.js point".
func (f jsFunc) String() string {
	if f.api == formsAPI {
		return "forms.js " + f.name
	}
	return "page.js " + f.name
}

// jsCall is call.js's request.
type jsCall struct {
	API  string `json:"api"`
	Name string `json:"name"`
	Args []any  `json:"args,omitempty"`
	// At names the element to find and call the function with.
	At *jsTarget `json:"at,omitempty"`
	// Self calls the function with the remote object the call is made on.
	Self bool `json:"self,omitempty"`
	// Objects passes the remote objects after req as one last argument.
	Objects bool `json:"objects,omitempty"`
}

// jsTarget is an element that call.js finds: by ref number in its frame,
// or by CSS selector in the main frame.
type jsTarget struct {
	Ref      int64  `json:"ref,omitempty"`
	Selector string `json:"selector,omitempty"`
}

// noResult is the result type of a function whose result Go ignores.
type noResult struct{}

// sendJS calls fn through call.js with req on the target of p (an
// execution context or a remote object, and whether the result comes by
// value), awaiting a promise. An exception the function throws is a
// *jsError; every error names fn.
func sendJS(ctx context.Context, fn jsFunc, req jsCall, p runtime.CallFunctionOnParams, objs ...*runtime.CallArgument) (runtime.CallFunctionOnResult, error) {
	req.API, req.Name = fn.api, fn.name
	b, err := json.Marshal(req)
	if err != nil {
		return runtime.CallFunctionOnResult{}, fmt.Errorf("%s: %w", fn, err)
	}
	p.FunctionDeclaration = callJSDecl
	p.Arguments = append([]*runtime.CallArgument{{Value: b}}, objs...)
	p.AwaitPromise, p.Silent = new(true), new(true)
	r, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
	if err == nil && r.ExceptionDetails != nil {
		err = &jsError{details: r.ExceptionDetails}
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", fn, err)
	}
	return r, nil
}

// resultJS decodes the value that fn returned as a T, resolving the clips
// that page.js marked in its strings (limits.go).
func resultJS[T any](fn jsFunc, r runtime.CallFunctionOnResult) (T, error) {
	var v T
	if _, ignore := any(&v).(*noResult); ignore || r.Result == nil || len(r.Result.Value) == 0 {
		return v, nil
	}
	raw, err := resolveJSONClips(r.Result.Value)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		return v, fmt.Errorf("%s: decode the result: %w", fn, err)
	}
	return v, nil
}

// byValue is the target of a call in the execution context world whose
// result comes back as JSON.
func byValue(world runtime.ExecutionContextID) runtime.CallFunctionOnParams {
	return runtime.CallFunctionOnParams{ExecutionContextID: world, ReturnByValue: new(true)}
}

// callJS calls fn in Sovereign's world of frame with args and returns its
// result. A thrown exception is a *jsError.
func callJS[T any](ctx context.Context, t *Tab, frame cdp.FrameID, fn jsFunc, args ...any) (T, error) {
	var v T
	err := t.frames.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		r, err := sendJS(ctx, fn, jsCall{Args: args}, byValue(world))
		if err != nil {
			return err
		}
		v, err = resultJS[T](fn, r)
		return err
	})
	return v, err
}

// callJSWith calls fn in world with args and then objs, remote objects of
// that world, as one array.
func callJSWith[T any](ctx context.Context, world runtime.ExecutionContextID, fn jsFunc, objs []*runtime.CallArgument, args ...any) (T, error) {
	r, err := sendJS(ctx, fn, jsCall{Args: args, Objects: true}, byValue(world), objs...)
	if err != nil {
		var v T
		return v, err
	}
	return resultJS[T](fn, r)
}

// callJSOn calls fn with the element obj, a remote object of Sovereign's
// world, and args.
func callJSOn[T any](ctx context.Context, obj runtime.RemoteObjectID, fn jsFunc, args ...any) (T, error) {
	r, err := sendJS(ctx, fn, jsCall{Args: args, Self: true}, runtime.CallFunctionOnParams{ObjectID: obj, ReturnByValue: new(true)})
	if err != nil {
		var v T
		return v, err
	}
	return resultJS[T](fn, r)
}

// objectJS calls fn in Sovereign's world of frame and returns the object it
// returns as a remote object of the tool call's group, or "" for null.
func objectJS(ctx context.Context, t *Tab, frame cdp.FrameID, fn jsFunc, args ...any) (runtime.RemoteObjectID, error) {
	var obj runtime.RemoteObjectID
	err := t.frames.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		r, err := sendJS(ctx, fn, jsCall{Args: args}, runtime.CallFunctionOnParams{ExecutionContextID: world, ObjectGroup: objectGroup})
		if err != nil {
			return err
		}
		if r.Result != nil && r.Result.ObjectID != "" {
			obj = r.Result.ObjectID
			t.madeObjects = true
		}
		return nil
	})
	return obj, err
}

// callJSAt finds the element at names and calls fn with it and args, in
// one round trip to the page and without a remote object. An element that
// is not there fails with NOT_FOUND (a stale ref, a selector that matches
// nothing), a selector that is not CSS with INVALID_ARGUMENT.
func callJSAt[T any](ctx context.Context, t *Tab, at elementAt, fn jsFunc, args ...any) (T, error) {
	var v T
	var r atResult
	err := t.frames.inWorld(ctx, at.frame, func(world runtime.ExecutionContextID) error {
		res, err := sendJS(ctx, fn, jsCall{Args: args, At: &at.target}, byValue(world))
		if err != nil {
			return err
		}
		r, err = resultJS[atResult](fn, res)
		return err
	})
	switch {
	case err != nil && at.ref != "" && (isFrameGone(err) || isJSError(err)):
		return v, staleRef(at.ref)
	case err != nil:
		return v, err
	case r.BadCSS != "":
		return v, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "selector %q is not valid CSS: %s", at.target.Selector, clipText(firstLines(r.BadCSS, 1)))
	case r.Missing && at.ref != "":
		return v, staleRef(at.ref)
	case r.Missing:
		return v, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no element matches selector %q", at.target.Selector)
	}
	if _, ignore := any(&v).(*noResult); ignore || len(r.V) == 0 {
		return v, nil
	}
	// Its clips were resolved with the rest of the answer.
	if err := json.Unmarshal(r.V, &v); err != nil {
		return v, fmt.Errorf("%s: decode the result: %w", fn, err)
	}
	return v, nil
}

// atResult is what call.js answers for a call with at.
type atResult struct {
	Missing bool            `json:"missing"`
	BadCSS  string          `json:"badCSS"`
	V       json.RawMessage `json:"v"`
}

// asJSError returns the exception that err carries, if any.
func asJSError(err error) (*jsError, bool) {
	var je *jsError
	ok := errors.As(err, &je)
	return je, ok
}
