package scripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// Patterns of stems and declared names.
const (
	StemPattern = `^[a-z][a-z0-9_]{0,31}$`
	NamePattern = `^[a-z][a-z0-9_]{0,63}$`
)

var (
	stemRE = regexp.MustCompile(StemPattern)
	nameRE = regexp.MustCompile(NamePattern)
)

// Separator joins a stem and a declared name into a tool name.
const Separator = "__"

// Tool is a tool a script declares.
type Tool struct {
	// Name is the tool's name: "<stem>__<name>".
	Name string `json:"name"`
	// Stem is the script's stem.
	Stem string `json:"stem"`
	// Short is the declared name.
	Short string `json:"short"`
	// Description is the declared description (may be empty).
	Description string `json:"description,omitempty"`
	// InputSchema is the declared JSON Schema of the arguments: an object
	// schema.
	InputSchema json.RawMessage `json:"inputSchema"`
}

// same reports whether t and u declare the same tool.
func (t Tool) same(u Tool) bool {
	return t.Name == u.Name && t.Description == u.Description && string(t.InputSchema) == string(u.InputSchema)
}

// LoadError is why a script did not load.
type LoadError struct {
	Stem string
	// Reasons are the problems found, each naming the declaration it is
	// about, if any.
	Reasons []string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("script %q: %s", e.Stem, strings.Join(e.Reasons, "; "))
}

// Options configure loads and calls. The zero value is usable.
type Options struct {
	// Limits are the budgets (zero fields: defaults).
	Limits Limits
	// Log receives console output and problems (default slog.Default()).
	Log *slog.Logger
}

func (o Options) logger(stem string) *slog.Logger {
	l := o.Log
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", "scripts", "script", stem)
}

// Script is a loaded script: its tools and its compiled program. It is
// safe for concurrent calls (each call has an interpreter of its own).
type Script struct {
	Stem  string
	Tools []Tool

	prog  *goja.Program
	own   map[string]bool // declared names with a function of their own
	limit Limits
	log   *slog.Logger
}

// Load compiles a script, runs its top-level code and describe() and
// checks the declarations, with the default options.
func Load(stem string, src []byte) (*Script, error) {
	return Options{}.Load(stem, src)
}

// Load compiles a script, runs its top-level code and describe() and
// checks the declarations. A script that does not load returns a
// *LoadError.
func (o Options) Load(stem string, src []byte) (*Script, error) {
	fail := func(reasons ...string) (*Script, error) { return nil, &LoadError{Stem: stem, Reasons: reasons} }
	if !stemRE.MatchString(stem) {
		return fail(fmt.Sprintf("bad name: the file stem must match %s (a lower-case letter, then lower-case letters, digits or _, at most 32 in all)", StemPattern))
	}
	if len(src) > MaxSource {
		return fail(fmt.Sprintf("the script is %d bytes, over the %d KiB limit", len(src), MaxSource>>10))
	}
	if err := o.Limits.Check(); err != nil {
		return fail(err.Error())
	}
	lim := o.Limits.withDefaults()
	log := o.logger(stem)
	prog, err := goja.Compile(stem+".js", string(src), false)
	if err != nil {
		return fail("syntax error: " + err.Error())
	}
	sb := newSandbox(lim, log)
	pristine := globals(sb.vm)
	ctx := context.Background()

	err = sb.run(ctx, lim.Load, func(context.Context) error {
		_, err := sb.vm.RunProgram(prog)
		return err
	})
	if err != nil {
		return fail("top-level code: " + jsError(err))
	}
	// describe() and the checks of what it returns read script values
	// (getters, proxies), so they run under the budget too.
	s := &Script{Stem: stem, prog: prog, own: map[string]bool{}, limit: lim, log: log}
	var reasons []string
	err = sb.run(ctx, lim.Load, func(context.Context) error {
		return sb.protect(func() { reasons = sb.describe(s, pristine) })
	})
	if err != nil {
		return fail("describe(): " + jsError(err))
	}
	if len(reasons) > 0 {
		return fail(reasons...)
	}
	return s, nil
}

// describe runs describe() and checks its declarations into s, returning
// the problems.
func (sb *sandbox) describe(s *Script, pristine map[string]goja.Value) []string {
	describe, ok := goja.AssertFunction(sb.vm.Get("describe"))
	if !ok {
		return []string{"no describe() function: a script defines describe() returning its tool declarations"}
	}
	decls, err := describe(goja.Undefined())
	if err != nil {
		stopOn(err)
		return []string{"describe(): " + jsError(err)}
	}
	var list []goja.Value
	if o, ok := decls.(*goja.Object); ok && o.ClassName() == "Array" {
		n := o.Get("length").ToInteger()
		if n > MaxTools {
			return []string{fmt.Sprintf("describe() declares %d tools, over the limit of %d", n, MaxTools)}
		}
		for i := range n {
			list = append(list, o.Get(strconv.FormatInt(i, 10)))
		}
	} else {
		list = []goja.Value{decls}
	}
	if len(list) == 0 {
		return []string{"describe() declares no tools"}
	}
	call := sb.vm.Get("call")
	_, dispatcher := goja.AssertFunction(call)
	if dispatcher && call == pristine["call"] {
		dispatcher = false
	}
	var reasons []string
	seen := map[string]bool{}
	for i, d := range list {
		t, err := sb.declaration(s.Stem, d)
		if err != nil {
			if t.Short != "" {
				reasons = append(reasons, fmt.Sprintf("declaration %q: %v", t.Short, err))
			} else {
				reasons = append(reasons, fmt.Sprintf("declaration %d: %v", i+1, err))
			}
			continue
		}
		if seen[t.Short] {
			reasons = append(reasons, fmt.Sprintf("declaration %q: declared twice", t.Short))
			continue
		}
		seen[t.Short] = true
		fn := sb.vm.Get(t.Short)
		if _, isFn := goja.AssertFunction(fn); isFn && fn != pristine[t.Short] {
			s.own[t.Short] = true
		} else if !dispatcher {
			reasons = append(reasons, fmt.Sprintf("declaration %q: no function %s(args) and no call(name, args) dispatcher", t.Short, t.Short))
			continue
		}
		s.Tools = append(s.Tools, t)
	}
	return reasons
}

// stopOn passes an interrupt (or another error that is not a JavaScript
// exception) on, so that the interpreter stops and guard says why.
func stopOn(err error) {
	var ex *goja.Exception
	if err != nil && !errors.As(err, &ex) {
		panic(err)
	}
}

// globals are the global values of a fresh sandbox, by name (to tell the
// script's own functions from built-ins of the same name).
func globals(vm *goja.Runtime) map[string]goja.Value {
	g := vm.GlobalObject()
	m := map[string]goja.Value{}
	for _, k := range g.GetOwnPropertyNames() {
		m[k] = g.Get(k)
	}
	return m
}

var declKeys = []string{"name", "description", "inputSchema"}

// declaration checks one element of describe()'s result. Once the name
// is known, the Tool returned with an error has it (in Short).
func (s *sandbox) declaration(stem string, v goja.Value) (Tool, error) {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() == "Array" {
		return Tool{}, fmt.Errorf("not an object {name, description, inputSchema} but %s", kind(v))
	}
	for _, k := range o.Keys() {
		if !slices.Contains(declKeys, k) {
			return Tool{}, fmt.Errorf("unknown key %q (a declaration has name, description and inputSchema)", k)
		}
	}
	nv := o.Get("name")
	if nv == nil || !goja.IsString(nv) {
		return Tool{}, errors.New("no name (a string)")
	}
	name := nv.String()
	switch {
	case !nameRE.MatchString(name):
		return Tool{}, fmt.Errorf("name %q: must match %s", name, NamePattern)
	case strings.Contains(name, Separator):
		return Tool{}, fmt.Errorf("name %q: must not contain %q (it separates the stem from the name)", name, Separator)
	case name == "describe" || name == "call":
		return Tool{}, fmt.Errorf("name %q is reserved (describe and call are the script's own functions)", name)
	}
	t := Tool{Name: stem + Separator + name, Stem: stem, Short: name}
	named := Tool{Short: name}
	if d := o.Get("description"); d != nil && !goja.IsUndefined(d) {
		if !goja.IsString(d) {
			return named, fmt.Errorf("description is %s, not a string", kind(d))
		}
		t.Description = d.String()
		if len(t.Description) > MaxDescription {
			return named, fmt.Errorf("description is %d bytes, over the %d KiB limit", len(t.Description), MaxDescription>>10)
		}
	}
	schema, err := s.schema(o.Get("inputSchema"))
	if err != nil {
		return named, fmt.Errorf("inputSchema: %v", err)
	}
	t.InputSchema = schema
	return t, nil
}

// schema checks an inputSchema and returns it as JSON.
func (s *sandbox) schema(v goja.Value) (json.RawMessage, error) {
	if v == nil || goja.IsUndefined(v) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() == "Array" {
		return nil, fmt.Errorf("a schema that is not an object (%s)", kind(v))
	}
	js, err := s.stringify(goja.Undefined(), o)
	if err != nil {
		stopOn(err)
		return nil, fmt.Errorf("not JSON: %s", jsError(err))
	}
	if len(js.String()) > MaxSchema {
		return nil, fmt.Errorf("%d bytes of JSON, over the %d KiB limit", len(js.String()), MaxSchema>>10)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(js.String()), &m); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	typ, hasType := m["type"]
	props, hasProps := m["properties"]
	switch {
	case hasType && typ != "object":
		return nil, fmt.Errorf("a schema that is not an object (type %s; a tool's arguments are an object: type \"object\")", mustJSON(typ))
	case !hasType && !hasProps:
		return nil, errors.New(`a schema that is not an object (no type and no properties; use {"type": "object", "properties": {...}})`)
	}
	if hasProps {
		if _, ok := props.(map[string]any); !ok {
			return nil, fmt.Errorf("properties is %s, not an object", mustJSON(props))
		}
	}
	if !hasType {
		m["type"] = "object"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// kind names the type of a JavaScript value for errors.
func kind(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		if o.ClassName() == "Array" {
			return "an array"
		}
		if _, fn := goja.AssertFunction(o); fn {
			return "a function"
		}
		return "an object"
	}
	switch {
	case goja.IsString(v):
		return fmt.Sprintf("a string (%q)", v.String())
	case goja.IsNumber(v):
		return "a number (" + v.String() + ")"
	case goja.IsBigInt(v):
		return "a bigint (" + v.String() + ")"
	}
	if v.ExportType() != nil && v.ExportType().Kind() == reflect.Bool {
		return "a boolean (" + v.String() + ")"
	}
	return "a symbol"
}

// jsError is the message of an error from the interpreter: a thrown
// value's message (without the stack), or the reason it was stopped.
func jsError(err error) string {
	var te *thrownError
	if errors.As(err, &te) {
		return te.msg
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return thrown(ex.Value()) // only inside the interpreter: may run script code
	}
	var be *budgetError
	if errors.As(err, &be) {
		return be.msg
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return fmt.Sprintf("stack overflow: calls nested deeper than %d", MaxCallStack)
	}
	return err.Error()
}

// thrown is the message of a thrown value: an Error's "Name: message", or
// the value as a string.
func thrown(v goja.Value) string {
	if o, ok := v.(*goja.Object); ok {
		if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
			name := "Error"
			if n := o.Get("name"); n != nil && !goja.IsUndefined(n) {
				name = n.String()
			}
			if name == "GoError" || name == "Error" {
				return m.String()
			}
			return name + ": " + m.String()
		}
	}
	if v == nil {
		return "undefined"
	}
	return v.String()
}
