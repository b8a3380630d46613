package scripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
)

// Host runs the gateway's tools for a script call: the gateway's
// dispatcher, acting for the caller of the script tool (its identity and
// browser session, URL policy, approvals, audit). args is a JSON object.
// A tool that fails answers isError with its message as text; err is for
// calls that reached no tool.
type Host interface {
	CallTool(ctx context.Context, name string, args json.RawMessage) (text string, isError bool, err error)
}

// HostFunc adapts a function to [Host].
type HostFunc func(ctx context.Context, name string, args json.RawMessage) (string, bool, error)

// CallTool calls f.
func (f HostFunc) CallTool(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
	return f(ctx, name, args)
}

var regexpOnce sync.Once

// sandbox is one interpreter with the script globals: the ECMAScript
// built-ins (the allocating ones capped), console and tools.
type sandbox struct {
	vm   *goja.Runtime
	lim  Limits
	log  *slog.Logger
	logs int // console lines logged so far

	// The call's tool context; host is nil at load.
	ctx  context.Context
	host Host
	tool string

	rangeError  goja.Value
	stringify   goja.Callable  // JSON.stringify (capped)
	parse       goja.Callable  // JSON.parse (capped)
	hasInstance goja.Callable  // Function.prototype[Symbol.hasInstance]
	joining     []*goja.Object // arrays being joined (cycles join as "")
}

func newSandbox(lim Limits, log *slog.Logger) *sandbox {
	regexpOnce.Do(func() { regexp2.DefaultMatchTimeout = RegexpTimeout })
	vm := goja.New()
	vm.SetMaxCallStackSize(MaxCallStack)
	s := &sandbox{vm: vm, lim: lim, log: log, ctx: context.Background()}
	s.rangeError = vm.Get("RangeError")
	s.hasInstance, _ = goja.AssertFunction(vm.Get("Function").ToObject(vm).Get("prototype").ToObject(vm).GetSymbol(goja.SymHasInstance))
	s.harden()
	s.parse, _ = goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	s.stringify, _ = goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	s.must(vm.Set("console", s.console()))
	s.must(vm.Set("tools", vm.NewDynamicObject(&toolsObject{s: s, fns: map[string]goja.Value{}})))
	return s
}

// must panics on an error setting up the sandbox (a bug).
func (s *sandbox) must(err error) {
	if err != nil {
		panic(fmt.Sprintf("scripts: sandbox setup: %v", err))
	}
}

// run runs fn under guard, with the sandbox's memory budget, and renders
// what the script threw while the budgets still apply (reading a thrown
// value's message may run script code).
func (s *sandbox) run(ctx context.Context, budget time.Duration, fn func(ctx context.Context) error) error {
	return guard(ctx, s.vm, budget, s.lim.Memory, s.lim.Grace, s.log, func(ctx context.Context) error {
		return s.render(fn(ctx))
	})
}

// thrownError is what a script threw, rendered.
type thrownError struct{ msg string }

func (e *thrownError) Error() string { return e.msg }

// render turns a JavaScript exception into a thrownError.
func (s *sandbox) render(err error) error {
	var ex *goja.Exception
	if !errors.As(err, &ex) {
		return err
	}
	var msg string
	if perr := s.protect(func() { msg = thrown(ex.Value()) }); perr != nil {
		if !errors.As(perr, new(*goja.Exception)) {
			return perr // stopped
		}
		msg = "the script threw a value whose message cannot be read"
	}
	return &thrownError{msg}
}

// protect runs f, which reads script values from Go, as a native
// function of the interpreter, so that what the script throws (from a
// getter, a proxy trap, a toJSON) or an interrupt comes back as an error
// instead of a panic.
func (s *sandbox) protect(f func()) error {
	fn, _ := goja.AssertFunction(s.vm.ToValue(func(goja.FunctionCall) goja.Value {
		f()
		return goja.Undefined()
	}))
	_, err := fn(goja.Undefined())
	return err
}

// throwRange throws a RangeError from a native function.
func (s *sandbox) throwRange(format string, args ...any) {
	obj, err := s.vm.New(s.rangeError, s.vm.ToValue(fmt.Sprintf(format, args...)))
	if err != nil {
		panic(s.vm.NewTypeError(fmt.Sprintf(format, args...)))
	}
	panic(obj)
}

// str converts v to a string the way ToString does.
func (s *sandbox) str(v goja.Value) goja.String {
	if x, ok := v.(goja.String); ok {
		return x
	}
	t := v.ToString() // primitives other than strings return themselves
	if x, ok := t.(goja.String); ok {
		return x
	}
	if x, ok := s.vm.ToValue(t.String()).(goja.String); ok {
		return x
	}
	panic(fmt.Sprintf("scripts: no string for %T", v))
}

// --- console ---

func (s *sandbox) console() *goja.Object {
	c := s.vm.NewObject()
	for name, level := range map[string]slog.Level{
		"log": slog.LevelInfo, "info": slog.LevelInfo, "debug": slog.LevelDebug,
		"warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		s.must(c.Set(name, func(call goja.FunctionCall) goja.Value {
			s.print(level, call.Arguments)
			return goja.Undefined()
		}))
	}
	return c
}

// print logs one console line.
func (s *sandbox) print(level slog.Level, args []goja.Value) {
	s.logs++
	switch {
	case s.logs == MaxLogLines+1:
		s.log.Warn("script console: further lines dropped", "limit", MaxLogLines, "tool", s.tool)
		return
	case s.logs > MaxLogLines:
		return
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = s.show(a)
	}
	line := strings.Join(parts, " ")
	if len(line) > MaxLogLine {
		line = strings.ToValidUTF8(line[:MaxLogLine], "") + "…(cut)"
	}
	attrs := []any{"console", line}
	if s.tool != "" {
		attrs = append(attrs, "tool", s.tool)
	}
	s.log.Log(s.ctx, level, "script console", attrs...)
}

// show renders a console argument: strings as they are, objects as JSON
// where they have one.
func (s *sandbox) show(v goja.Value) string {
	if o, ok := v.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); !isFn && o.ClassName() != "Error" {
			if v, err := s.stringify(goja.Undefined(), o); err == nil && goja.IsString(v) {
				return v.String()
			}
		}
	}
	return v.String()
}

// --- tools ---

// toolName is what tools.<name> may be; then and constructor are left
// out so that the object is not taken for a thenable or a class.
var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,127}$`)

// toolsObject is the global tools: tools.<name>(args) and
// tools.call(name, args) call the host.
type toolsObject struct {
	s   *sandbox
	fns map[string]goja.Value
}

func (t *toolsObject) Get(key string) goja.Value {
	if f, ok := t.fns[key]; ok {
		return f
	}
	var f goja.Value
	switch {
	case key == "call":
		f = t.s.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			name := call.Argument(0)
			if !goja.IsString(name) {
				panic(t.s.vm.NewTypeError("tools.call(name, args): name must be a string"))
			}
			return t.s.callTool(name.String(), call.Argument(1))
		})
	case key == "then" || key == "constructor" || !toolName.MatchString(key):
		return nil
	default:
		f = t.s.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			return t.s.callTool(key, call.Argument(0))
		})
	}
	t.fns[key] = f
	return f
}

func (t *toolsObject) Set(string, goja.Value) bool { return false }
func (t *toolsObject) Has(key string) bool         { return t.Get(key) != nil }
func (t *toolsObject) Delete(string) bool          { return false }
func (t *toolsObject) Keys() []string              { return nil }

// callTool calls a gateway tool for the script: args is an object or
// undefined. It returns the result text and throws the tool's error.
func (s *sandbox) callTool(name string, args goja.Value) goja.Value {
	switch {
	case s.host == nil && s.tool == "":
		panic(s.vm.NewGoError(fmt.Errorf("tools.%s: gateway tools cannot be called while the script loads (only in a call)", name)))
	case s.host == nil:
		panic(s.vm.NewGoError(fmt.Errorf("tools.%s: no gateway tools are available to this call", name)))
	}
	raw := json.RawMessage("{}")
	if !goja.IsUndefined(args) && !goja.IsNull(args) {
		o, ok := args.(*goja.Object)
		if !ok || o.ClassName() == "Array" {
			panic(s.vm.NewTypeError(fmt.Sprintf("tools.%s(args): args must be an object", name)))
		}
		raw = json.RawMessage(s.apply(s.stringify, goja.Undefined(), o).String())
	}
	if err := s.ctx.Err(); err != nil {
		panic(s.vm.NewGoError(fmt.Errorf("tools.%s: the call is over (%v)", name, err)))
	}
	text, isError, err := s.host.CallTool(s.ctx, name, raw)
	if err == nil && isError {
		err = errors.New(text)
	}
	if err != nil {
		e := s.vm.NewGoError(err)
		_ = e.Set("tool", name)
		panic(e)
	}
	return s.vm.ToValue(text)
}

// --- capped built-ins ---

// harden replaces the built-ins that allocate in proportion to an
// argument in one native (uninterruptible) step with capped versions.
func (s *sandbox) harden() {
	vm := s.vm
	strProto := vm.Get("String").ToObject(vm).Get("prototype").ToObject(vm)
	arrCtor := vm.Get("Array").ToObject(vm)
	arrProto := arrCtor.Get("prototype").ToObject(vm)
	json := vm.Get("JSON").ToObject(vm)

	s.wrap(strProto, "repeat", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		this := s.thisString(call, "repeat")
		n := call.Argument(0).ToFloat()
		if n*float64(this.Length()) > float64(s.lim.MaxString) {
			s.throwRange("String.prototype.repeat: the result would be over %d characters (the script limit)", s.lim.MaxString)
		}
		return s.apply(orig, this, s.vm.ToValue(n))
	})
	for _, name := range []string{"padStart", "padEnd"} {
		s.wrap(strProto, name, func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			this := s.thisString(call, name)
			n := call.Argument(0).ToFloat()
			if n > float64(s.lim.MaxString) {
				s.throwRange("String.prototype.%s: the result would be over %d characters (the script limit)", name, s.lim.MaxString)
			}
			return s.apply(orig, this, s.vm.ToValue(n), call.Argument(1))
		})
	}
	s.wrap(strProto, "concat", func(_ goja.Callable, call goja.FunctionCall) goja.Value {
		var b goja.StringBuilder
		first := s.thisString(call, "concat")
		b.WriteString(first)
		n := first.Length()
		for _, a := range call.Arguments {
			p := s.str(a)
			if n += p.Length(); n > s.lim.MaxString {
				s.throwRange("String.prototype.concat: the result would be over %d characters (the script limit)", s.lim.MaxString)
			}
			b.WriteString(p)
		}
		return b.String()
	})
	s.wrap(strProto, "split", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		limit := call.Argument(1)
		capped := goja.IsUndefined(limit)
		if !capped {
			if n := limit.ToFloat(); n > float64(s.lim.MaxArray) {
				capped, limit = true, goja.Undefined()
			}
		}
		if !capped {
			return s.apply(orig, call.This, call.Argument(0), limit)
		}
		out := s.apply(orig, call.This, call.Argument(0), s.vm.ToValue(s.lim.MaxArray+1))
		if o, ok := out.(*goja.Object); ok && o.Get("length").ToInteger() > int64(s.lim.MaxArray) {
			s.throwRange("String.prototype.split: more than %d parts (the script limit)", s.lim.MaxArray)
		}
		return out
	})

	s.wrap(arrProto, "join", func(_ goja.Callable, call goja.FunctionCall) goja.Value {
		return s.join(call)
	})
	s.wrap(arrProto, "fill", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		o := call.This.ToObject(vm)
		n := float64(o.Get("length").ToInteger())
		start, end := relIndex(call.Argument(1), n, 0), relIndex(call.Argument(2), n, n)
		if end-start > float64(s.lim.MaxArray) {
			s.throwRange("Array.prototype.fill: more than %d elements (the script limit)", s.lim.MaxArray)
		}
		return s.apply(orig, o, call.Argument(0), s.vm.ToValue(start), s.vm.ToValue(end))
	})
	s.wrap(arrProto, "concat", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		total := s.arrayLen(call.This)
		for _, a := range call.Arguments {
			total += s.arrayLen(a)
		}
		if total > float64(s.lim.MaxArray) {
			s.throwRange("Array.prototype.concat: the result would have more than %d elements (the script limit)", s.lim.MaxArray)
		}
		return s.apply(orig, call.This, call.Arguments...)
	})
	s.wrap(arrCtor, "from", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if o, ok := call.Argument(0).(*goja.Object); ok {
			iter := o.GetSymbol(goja.SymIterator)
			if o.ClassName() == "Array" || iter == nil || goja.IsUndefined(iter) {
				if n := o.Get("length"); n != nil && n.ToFloat() > float64(s.lim.MaxArray) {
					s.throwRange("Array.from: more than %d elements (the script limit)", s.lim.MaxArray)
				}
			}
		}
		return s.apply(orig, call.This, call.Arguments...)
	})

	s.wrap(json, "parse", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		text := s.str(call.Argument(0))
		if d := jsonDepth(text.String()); d > MaxJSONDepth {
			s.throwRange("JSON.parse: nested deeper than %d levels (the script limit)", MaxJSONDepth)
		}
		return s.apply(orig, call.This, text, call.Argument(1))
	})

	s.wrap(json, "stringify", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if s.tooDeep(call.Argument(0), MaxJSONDepth, false) {
			s.throwRange("JSON.stringify: nested deeper than %d levels (the script limit)", MaxJSONDepth)
		}
		return s.apply(orig, call.This, call.Arguments...)
	})

	s.wrap(arrProto, "flat", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if d := call.Argument(0); !goja.IsUndefined(d) && d.ToFloat() > MaxJSONDepth && s.tooDeep(call.This, MaxJSONDepth, true) {
			s.throwRange("Array.prototype.flat: arrays nested deeper than %d levels (the script limit)", MaxJSONDepth)
		}
		return s.apply(orig, call.This, call.Arguments...)
	})

	s.capBuffer("ArrayBuffer", 1)
	s.capBuffer("SharedArrayBuffer", 1)
	for name, size := range map[string]float64{
		"Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1, "Int16Array": 2, "Uint16Array": 2,
		"Int32Array": 4, "Uint32Array": 4, "Float32Array": 4, "Float64Array": 8,
		"BigInt64Array": 8, "BigUint64Array": 8,
	} {
		s.capBuffer(name, size)
	}
}

// wrap replaces obj[name] with fn, which gets the original.
func (s *sandbox) wrap(obj *goja.Object, name string, fn func(orig goja.Callable, call goja.FunctionCall) goja.Value) {
	orig, ok := goja.AssertFunction(obj.Get(name))
	if !ok {
		panic("scripts: no built-in " + name)
	}
	f := s.vm.ToValue(func(call goja.FunctionCall) goja.Value { return fn(orig, call) })
	s.must(obj.DefineDataProperty(name, f, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
}

// apply calls a built-in, rethrowing what it throws.
func (s *sandbox) apply(f goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := f(this, args...)
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			panic(ex.Value())
		}
		panic(err) // uncatchable (interrupt, stack overflow): let it through
	}
	return v
}

// thisString is ToString(this) for a String.prototype method, which
// throws on null and undefined.
func (s *sandbox) thisString(call goja.FunctionCall, method string) goja.String {
	if goja.IsUndefined(call.This) || goja.IsNull(call.This) {
		panic(s.vm.NewTypeError("String.prototype." + method + " called on null or undefined"))
	}
	return s.str(call.This)
}

// arrayLen is the length of v if it is an array, else 1 (what concat
// adds for it).
func (s *sandbox) arrayLen(v goja.Value) float64 {
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
		return float64(o.Get("length").ToInteger())
	}
	return 1
}

// join is Array.prototype.join with the string cap.
func (s *sandbox) join(call goja.FunctionCall) goja.Value {
	o := call.This.ToObject(s.vm)
	for _, j := range s.joining {
		if j == o {
			return s.vm.ToValue("") // a cycle, as in V8 and goja
		}
	}
	if len(s.joining) >= MaxJSONDepth {
		s.throwRange("Array.prototype.join: arrays nested deeper than %d levels (the script limit)", MaxJSONDepth)
	}
	s.joining = append(s.joining, o)
	defer func() { s.joining = s.joining[:len(s.joining)-1] }()

	n := o.Get("length").ToInteger()
	if n > int64(s.lim.MaxArray) {
		s.throwRange("Array.prototype.join: more than %d elements (the script limit)", s.lim.MaxArray)
	}
	var sep goja.String = s.str(s.vm.ToValue(","))
	if a := call.Argument(0); !goja.IsUndefined(a) {
		sep = s.str(a)
	}
	var b goja.StringBuilder
	size := 0
	for i := int64(0); i < n; i++ {
		if i > 0 {
			b.WriteString(sep)
			size += sep.Length()
		}
		if e := o.Get(strconv.FormatInt(i, 10)); e != nil && !goja.IsUndefined(e) && !goja.IsNull(e) {
			p := s.str(e)
			size += p.Length()
			if size <= s.lim.MaxString {
				b.WriteString(p)
			}
		}
		if size > s.lim.MaxString {
			s.throwRange("Array.prototype.join: the result would be over %d characters (the script limit)", s.lim.MaxString)
		}
	}
	return b.String()
}

// relIndex is a relative index argument of fill (undefined is def) as a
// position in 0..n.
func relIndex(v goja.Value, n, def float64) float64 {
	if v == nil || goja.IsUndefined(v) {
		return def
	}
	f := v.ToFloat()
	if math.IsNaN(f) {
		f = 0
	}
	f = math.Trunc(f)
	if f < 0 {
		return math.Max(n+f, 0)
	}
	return math.Min(f, n)
}

// capBuffer replaces the global constructor name (of elements of size
// bytes) with a proxy that refuses to allocate more than MaxString bytes.
func (s *sandbox) capBuffer(name string, size float64) {
	vm := s.vm
	v := vm.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return
	}
	target := v.ToObject(vm)
	construct, ok := goja.AssertConstructor(target)
	if !ok {
		return
	}
	limit := float64(s.lim.MaxString)
	check := func(args []goja.Value) {
		if len(args) == 0 {
			return
		}
		var n float64
		switch a := args[0].(type) {
		case *goja.Object:
			if c := a.ClassName(); c == "ArrayBuffer" || c == "SharedArrayBuffer" {
				return // a view of an existing buffer
			}
			if l := a.Get("length"); l != nil && !goja.IsUndefined(l) {
				n = l.ToFloat() * size
			}
		default:
			n = a.ToFloat() * size
		}
		if n > limit {
			s.throwRange("%s: more than %d bytes (the script limit)", name, s.lim.MaxString)
		}
	}
	call, _ := goja.AssertFunction(target)
	proxy := vm.NewProxy(target, &goja.ProxyTrapConfig{
		// Without an apply trap goja's proxy is not callable, and
		// instanceof refuses it.
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			return s.apply(call, this, args...)
		},
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			check(args)
			o, err := construct(newTarget, args...)
			if err != nil {
				var ex *goja.Exception
				if errors.As(err, &ex) {
					panic(ex.Value())
				}
				panic(err)
			}
			return o
		},
	})
	pv := vm.ToValue(proxy)
	// goja's proxies have no [[HasInstance]] of their own, so instanceof
	// with the proxy throws: give the constructor a Symbol.hasInstance
	// that asks the original (or the subclass it was inherited by).
	s.must(target.DefineDataPropertySymbol(goja.SymHasInstance, vm.ToValue(func(call goja.FunctionCall) goja.Value {
		c := call.This
		if c == pv {
			c = target
		}
		return s.apply(s.hasInstance, c, call.Argument(0))
	}), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE))
	s.must(vm.GlobalObject().DefineDataProperty(name, pv, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	if proto, ok := target.Get("prototype").(*goja.Object); ok {
		s.must(proto.DefineDataProperty("constructor", pv, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	}
}

// jsonDepth is the deepest nesting of brackets in a JSON text (strings
// skipped), or MaxJSONDepth+1 as soon as it is deeper.
func jsonDepth(text string) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > MaxJSONDepth {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// tooDeep reports whether plain objects and arrays (or arrays only) nest
// deeper than limit in v (goja's JSON.stringify and flat recurse on the Go
// stack, and stringify checks cycles in time quadratic in the depth). It walks own enumerable properties
// without recursion, each object once (so getters run once more than
// JSON.stringify runs them); objects with a toJSON method are leaves, and
// cycles are left to JSON.stringify to report.
func (s *sandbox) tooDeep(v goja.Value, limit int, arraysOnly bool) bool {
	type frame struct {
		o    *goja.Object
		keys []string
		next int
		h    int // height of the children seen so far
	}
	descend := func(v goja.Value) *goja.Object {
		o, ok := v.(*goja.Object)
		if !ok {
			return nil
		}
		if c := o.ClassName(); c != "Array" && (arraysOnly || c != "Object") {
			return nil
		}
		if _, fn := goja.AssertFunction(o.Get("toJSON")); fn {
			return nil
		}
		return o
	}
	root := descend(v)
	if root == nil {
		return false
	}
	height := map[*goja.Object]int{} // of finished objects
	onPath := map[*goja.Object]bool{root: true}
	path := []*frame{{o: root, keys: root.Keys()}}
	for len(path) > 0 {
		if len(path) > limit {
			return true
		}
		f := path[len(path)-1]
		if f.next == len(f.keys) {
			path = path[:len(path)-1]
			delete(onPath, f.o)
			height[f.o] = f.h + 1
			if len(path) > 0 {
				p := path[len(path)-1]
				p.h = max(p.h, f.h+1)
			}
			continue
		}
		child := descend(f.o.Get(f.keys[f.next]))
		f.next++
		if child == nil || onPath[child] {
			continue
		}
		if h, done := height[child]; done {
			if len(path)+h > limit {
				return true
			}
			f.h = max(f.h, h)
			continue
		}
		onPath[child] = true
		path = append(path, &frame{o: child, keys: child.Keys()})
	}
	return false
}
