package scripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/dop251/goja"
)

type depthKey struct{}

// depth is how many script calls ctx is nested in.
func depth(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// ErrUnknownTool is returned by Call for a name the script does not declare.
var ErrUnknownTool = errors.New("unknown script tool")

// Call runs one of the script's tools (by its full name, "<stem>__<name>")
// in a fresh interpreter under the call budgets, with host for the
// script's tool calls. Whatever the script does wrong (it throws, it runs
// over a budget, its result is too large or not JSON) is an error result:
// isError with a message that says what happened. err is for calls that
// ran no script: an unknown tool ([ErrUnknownTool]), arguments that are
// not JSON, script tools nested deeper than [MaxDepth].
func (s *Script) Call(ctx context.Context, tool string, args map[string]any, host Host) (result string, isError bool, err error) {
	var short string
	for _, t := range s.Tools {
		if t.Name == tool {
			short = t.Short
		}
	}
	if short == "" {
		return "", false, fmt.Errorf("%w %q in script %q", ErrUnknownTool, tool, s.Stem)
	}
	d := depth(ctx)
	if d >= MaxDepth {
		return "", false, fmt.Errorf("%s: script tools nested %d deep (the limit is %d): a script calling itself?", tool, d+1, MaxDepth)
	}
	if args == nil {
		args = map[string]any{}
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return "", false, fmt.Errorf("%s: arguments are not JSON: %w", tool, err)
	}

	log := s.log.With("tool", tool)
	sb := newSandbox(s.limit, log)
	sb.tool, sb.host = tool, host
	var out string
	ctx = context.WithValue(ctx, depthKey{}, d+1)
	err = sb.run(ctx, s.limit.Call, func(ctx context.Context) error {
		sb.ctx = ctx // the tools the script calls get the call's deadline
		if _, err := sb.vm.RunProgram(s.prog); err != nil {
			return err
		}
		// Reading the script's globals and its result may run script code
		// (getters, proxies, toJSON): under protect.
		var callErr error
		var ret goja.Value
		err := sb.protect(func() {
			parsed, err := sb.parse(goja.Undefined(), sb.vm.ToValue(string(argsJSON)))
			if err != nil {
				callErr = err
				return
			}
			var fn goja.Callable
			fargs := []goja.Value{parsed}
			if s.own[short] {
				fn, _ = goja.AssertFunction(sb.vm.Get(short))
			} else {
				fn, _ = goja.AssertFunction(sb.vm.Get("call"))
				fargs = []goja.Value{sb.vm.ToValue(short), parsed}
			}
			if fn == nil {
				callErr = fmt.Errorf("the script no longer defines %s() nor call() when it runs", short)
				return
			}
			ret, callErr = fn(goja.Undefined(), fargs...)
		})
		if err != nil {
			return err
		}
		if callErr != nil {
			return callErr
		}
		// The promise jobs ran when protect returned: a promise has
		// settled if it ever will.
		if err := sb.protect(func() { out, callErr = sb.result(ret) }); err != nil {
			return err
		}
		return callErr
	})
	if err != nil {
		return fmt.Sprintf("%s: %s", tool, jsError(err)), true, nil
	}
	return out, false, nil
}

var promiseType = reflect.TypeOf((*goja.Promise)(nil))

// result renders a tool function's return value.
func (s *sandbox) result(v goja.Value) (string, error) {
	if o, ok := v.(*goja.Object); ok && o.ExportType() == promiseType {
		p, _ := o.Export().(*goja.Promise)
		switch {
		case p == nil:
		case p.State() == goja.PromiseStateFulfilled:
			v = p.Result()
		case p.State() == goja.PromiseStateRejected:
			return "", errors.New(thrown(p.Result()))
		default:
			return "", fmt.Errorf("the tool returned a promise that never settled (scripts have no timers: await only tools and other synchronous work)")
		}
	}
	var text string
	switch {
	case v == nil || goja.IsUndefined(v):
		text = ""
	case goja.IsString(v):
		text = v.String()
	default:
		js, err := s.stringify(goja.Undefined(), v)
		if err != nil {
			return "", err
		}
		if goja.IsUndefined(js) {
			text = "" // a function or a symbol: no JSON
		} else {
			text = js.String()
		}
	}
	if len(text) > s.lim.MaxResult {
		return "", fmt.Errorf("the result is %s, over the %s limit", mib(uint64(len(text))), mib(uint64(s.lim.MaxResult)))
	}
	return text, nil
}
