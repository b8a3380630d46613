package page

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
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

// jsParams returns the parameters of Runtime.callFunctionOn that call fn
// with args, passed by value, and then the remote objects objs.
func jsParams(fn jsFunc, req jsCall, objs ...*runtime.CallArgument) runtime.CallFunctionOnParams {
	req.API, req.Name = fn.api, fn.name
	b, err := json.Marshal(req)
	if err != nil {
		// Only a Go value that JSON cannot hold fails, a bug of the wrapper.
		b = []byte(`{"api":"","name":""}`)
	}
	return runtime.CallFunctionOnParams{
		FunctionDeclaration: callJSDecl,
		Arguments:           append([]*runtime.CallArgument{{Value: b}}, objs...),
		ReturnByValue:       new(true),
		AwaitPromise:        new(true),
		Silent:              new(true),
	}
}

// decodeJS decodes the result of a call of fn into a T.
func decodeJS[T any](fn jsFunc, r runtime.CallFunctionOnResult, err error) (T, error) {
	var v T
	var out any = &v
	if _, ok := out.(*noResult); ok {
		out = nil
	}
	if err := decodeCall(r, err, out); err != nil {
		return v, fmt.Errorf("%s: %w", fn, err)
	}
	return v, nil
}

// callJS calls fn in Sovereign's world of frame with args and returns its
// result (awaited, when it is a promise). A thrown exception is a *jsError.
func callJS[T any](ctx context.Context, t *Tab, frame cdp.FrameID, fn jsFunc, args ...any) (T, error) {
	var v T
	err := t.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		p := jsParams(fn, jsCall{Args: args})
		p.ExecutionContextID = world
		r, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
		v, err = decodeJS[T](fn, r, err)
		return err
	})
	return v, err
}

// callJSWith calls fn in the world with args and then objs, remote objects
// of that world, as one array.
func callJSWith[T any](ctx context.Context, world runtime.ExecutionContextID, fn jsFunc, objs []*runtime.CallArgument, args ...any) (T, error) {
	p := jsParams(fn, jsCall{Args: args, Objects: true}, objs...)
	p.ExecutionContextID = world
	r, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
	return decodeJS[T](fn, r, err)
}

// callJSOn calls fn with the element obj, a remote object of Sovereign's
// world, and args.
func callJSOn[T any](ctx context.Context, obj runtime.RemoteObjectID, fn jsFunc, args ...any) (T, error) {
	p := jsParams(fn, jsCall{Args: args, Self: true})
	p.ObjectID = obj
	r, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
	return decodeJS[T](fn, r, err)
}

// objectJS calls fn in Sovereign's world of frame and returns the object it
// returns as a remote object of the tool call's group, or "" for null.
func objectJS(ctx context.Context, t *Tab, frame cdp.FrameID, fn jsFunc, args ...any) (runtime.RemoteObjectID, error) {
	var obj runtime.RemoteObjectID
	err := t.inWorld(ctx, frame, func(world runtime.ExecutionContextID) error {
		p := jsParams(fn, jsCall{Args: args})
		p.ExecutionContextID, p.ObjectGroup, p.ReturnByValue = world, objectGroup, nil
		r, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
		if err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		if r.ExceptionDetails != nil {
			return fmt.Errorf("%s: %w", fn, &jsError{details: r.ExceptionDetails})
		}
		if r.Result != nil && r.Result.ObjectID != "" {
			obj = r.Result.ObjectID
			t.madeObjects = true
		}
		return nil
	})
	return obj, err
}

// elementAt is an element that a tool names, parsed but not yet found: the
// frame to look in and what call.js looks for there.
type elementAt struct {
	frame  cdp.FrameID
	target jsTarget
	// what names the element in messages ("ref e5", `selector "#a"`);
	// prefix is the ref prefix of its frame ("" or "f1").
	what, prefix string
	// ref is the cleaned ref, "" for a selector.
	ref string
}

// elementAt parses the element that el names, for tool's messages.
func (t *Tab) elementAt(el *browserv1.Element, tool string) (elementAt, error) {
	switch ref, sel := strings.TrimSpace(el.GetRef()), strings.TrimSpace(el.GetSelector()); {
	case ref != "":
		num, id, err := t.parseRef(ref)
		if err != nil {
			return elementAt{}, err
		}
		f, ok := t.frameByNum(num)
		if !ok {
			return elementAt{}, staleRef(cleanRef(ref))
		}
		a := elementAt{frame: f, target: jsTarget{Ref: id}, what: "ref " + cleanRef(ref), ref: cleanRef(ref)}
		if num > 0 {
			a.prefix = "f" + strconv.Itoa(num)
		}
		return a, nil
	case sel != "":
		return elementAt{frame: t.main(), target: jsTarget{Selector: sel}, what: fmt.Sprintf("selector %q", sel)}, nil
	}
	return elementAt{}, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s needs ref (from snapshot), target or selector", tool)
}

// callJSAt finds the element at names and calls fn with it and args, in
// one round trip to the page and without a remote object. An element that
// is not there fails with NOT_FOUND (a stale ref, a selector that matches
// nothing), a selector that is not CSS with INVALID_ARGUMENT.
func callJSAt[T any](ctx context.Context, t *Tab, at elementAt, fn jsFunc, args ...any) (T, error) {
	var v T
	var r atResult
	err := t.inWorld(ctx, at.frame, func(world runtime.ExecutionContextID) error {
		p := jsParams(fn, jsCall{Args: args, At: &at.target})
		p.ExecutionContextID = world
		res, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
		r, err = decodeJS[atResult](fn, res, err)
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
	if _, ok := any(&v).(*noResult); ok || len(r.V) == 0 {
		return v, nil
	}
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
