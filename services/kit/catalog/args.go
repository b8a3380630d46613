package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Type is the JSON type of a parameter.
type Type string

// Parameter types.
const (
	String  Type = "string"
	Integer Type = "integer"
	Boolean Type = "boolean"
	Number  Type = "number"
	// Array parameters hold Items; Object ones (as items) hold Fields.
	Array  Type = "array"
	Object Type = "object"
)

// Param is one argument of a tool. The JSON input schema, the argument
// checks and the docs all come from it.
type Param struct {
	Name        string
	Type        Type
	Description string
	Required    bool
	// Default is applied when the argument is absent (or null).
	Default any
	// Enum lists the accepted values of a string parameter.
	Enum []string
	// Min and Max bound an integer parameter when set.
	Min, Max *int64
	// AcceptBool lets a string parameter with an Enum that holds "true"
	// and "false" take a JSON boolean too (snapshot: true or "diff").
	AcceptBool bool
	// Items is the type of an array's members; MaxItems bounds its length
	// when set.
	Items    *Param
	MaxItems int
	// Fields are the members of an object.
	Fields []Param
}

// ArgError is a bad argument; its message names the argument.
type ArgError struct {
	Arg string
	Msg string
}

func (e *ArgError) Error() string {
	if e.Arg == "" {
		return e.Msg
	}
	return fmt.Sprintf("argument %q %s", e.Arg, e.Msg)
}

func argErr(arg, format string, a ...any) *ArgError {
	return &ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
}

// Args are checked arguments: each present value has its parameter's Go
// type (string, int64, float64, bool, []any of those or Args for an
// array, Args for an object), and absent ones with a default have it.
type Args map[string]any

func (a Args) str(name string) string {
	s, _ := a[name].(string)
	return s
}

func (a Args) integer(name string) (int64, bool) {
	n, ok := a[name].(int64)
	return n, ok
}

func (a Args) boolean(name string) bool {
	b, _ := a[name].(bool)
	return b
}

func (a Args) number(name string) (float64, bool) {
	n, ok := a[name].(float64)
	return n, ok
}

// strings returns an array of strings.
func (a Args) strings(name string) []string {
	list, _ := a[name].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// objects returns an array of objects.
func (a Args) objects(name string) []Args {
	list, _ := a[name].([]any)
	out := make([]Args, 0, len(list))
	for _, v := range list {
		if o, ok := v.(Args); ok {
			out = append(out, o)
		}
	}
	return out
}

// check validates raw call arguments against params.
func check(params []Param, raw any) (Args, error) {
	var in map[string]any
	switch v := raw.(type) {
	case nil:
	case map[string]any:
		in = v
	case json.RawMessage:
		if err := json.Unmarshal(v, &in); err != nil {
			return nil, &ArgError{Msg: "arguments must be a JSON object"}
		}
	default:
		return nil, &ArgError{Msg: fmt.Sprintf("arguments must be a JSON object, got %s", JSONType(raw))}
	}
	for name := range in {
		if !slices.ContainsFunc(params, func(p Param) bool { return p.Name == name }) {
			return nil, &ArgError{Msg: fmt.Sprintf("unknown argument %q; this tool takes %s", name, paramNames(params))}
		}
	}
	out := make(Args, len(params))
	for _, p := range params {
		v, present := in[p.Name]
		if !present || v == nil {
			if p.Required {
				return nil, argErr(p.Name, "is required (%s)", p.Description)
			}
			if p.Default != nil {
				out[p.Name] = normalizeDefault(p.Default)
			}
			continue
		}
		got, err := convert(p, v)
		if err != nil {
			return nil, err
		}
		out[p.Name] = got
	}
	return out, nil
}

func convert(p Param, v any) (any, error) {
	switch p.Type {
	case String:
		if b, isBool := v.(bool); isBool && p.AcceptBool {
			v = fmt.Sprint(b)
		}
		s, ok := v.(string)
		if !ok {
			return nil, argErr(p.Name, "must be a string, got %s", JSONType(v))
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
			return nil, argErr(p.Name, "must be one of %s, got %q", strings.Join(p.Enum, ", "), s)
		}
		return s, nil
	case Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, argErr(p.Name, "must be true or false, got %s", JSONType(v))
		}
		return b, nil
	case Integer:
		n, ok := wholeNumber(v)
		if !ok {
			return nil, argErr(p.Name, "must be a whole number, got %s", describe(v))
		}
		if p.Min != nil && n < *p.Min {
			return nil, argErr(p.Name, "must be at least %d, got %d", *p.Min, n)
		}
		if p.Max != nil && n > *p.Max {
			return nil, argErr(p.Name, "must be at most %d, got %d", *p.Max, n)
		}
		return n, nil
	case Number:
		f, ok := NumberValue(v)
		if !ok {
			return nil, argErr(p.Name, "must be a number, got %s", describe(v))
		}
		return f, nil
	case Array:
		return convertArray(p, v)
	case Object:
		if _, ok := v.(map[string]any); !ok {
			return nil, argErr(p.Name, "must be an object, got %s", JSONType(v))
		}
		args, err := check(p.Fields, v)
		if err != nil {
			var ae *ArgError
			if errors.As(err, &ae) {
				return nil, nested(p.Name, ae)
			}
			return nil, err
		}
		return args, nil
	}
	return nil, argErr(p.Name, "has unsupported type %s", p.Type)
}

// convertArray checks an array and each of its members.
func convertArray(p Param, v any) (any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, argErr(p.Name, "must be an array, got %s", JSONType(v))
	}
	if p.MaxItems > 0 && len(list) > p.MaxItems {
		return nil, argErr(p.Name, "may hold at most %d items, got %d", p.MaxItems, len(list))
	}
	out := make([]any, len(list))
	for i, item := range list {
		ip := *p.Items
		ip.Name = fmt.Sprintf("%s[%d]", p.Name, i)
		if item == nil {
			return nil, argErr(ip.Name, "must not be null")
		}
		got, err := convert(ip, item)
		if err != nil {
			return nil, err
		}
		out[i] = got
	}
	return out, nil
}

// nested names a member's argument error by its path (fields[0].ref).
func nested(parent string, ae *ArgError) *ArgError {
	if ae.Arg == "" {
		return &ArgError{Arg: parent, Msg: ae.Msg}
	}
	return &ArgError{Arg: parent + "." + ae.Arg, Msg: ae.Msg}
}

// NumberValue accepts the number forms a decoded JSON value can take (a
// finite float64, other Go number types, json.Number).
func NumberValue(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// wholeNumber accepts the number forms a decoded JSON value can take and
// reports whether v is an integer that fits an int32 (the proto type).
func wholeNumber(v any) (int64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, false
		}
		f = float64(i)
	default:
		return 0, false
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int64(f), true
}

func normalizeDefault(v any) any {
	if n, ok := wholeNumber(v); ok {
		return n
	}
	return v
}

func paramNames(params []Param) string {
	if len(params) == 0 {
		return "no arguments"
	}
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// JSONType names the JSON type of a decoded value ("a string", "an
// object", …) for error messages.
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, float32, int, int32, int64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func describe(v any) string {
	switch n := v.(type) {
	case float64:
		return fmt.Sprintf("%v", n)
	case string:
		return fmt.Sprintf("a string (%q)", n)
	}
	return JSONType(v)
}
