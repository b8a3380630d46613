package httptools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// Request is the template of one call: what the worker sends once it has
// put the secrets in. URL and Headers still hold the {{secrets.NAME}}
// placeholders of the file; every argument in URL is percent-encoded, so
// no argument can form a placeholder, and Body is never substituted.
type Request struct {
	Method  string
	URL     string
	Headers map[string]string
	Body    []byte // nil for GET and DELETE
}

// hasBody reports whether the method sends the arguments as a JSON body.
func hasBody(method string) bool { return method == "POST" || method == "PUT" || method == "PATCH" }

// Build checks a call's arguments against the tool's parameters and
// returns its request template. The error says which argument is wrong
// and why.
func (t *Tool) Build(args map[string]any) (Request, error) {
	var errs []error
	values := map[string]any{}
	for _, name := range sortedKeys(args) {
		v := args[name]
		p, ok := t.Parameters[name]
		if !ok {
			errs = append(errs, t.unknown(name))
			continue
		}
		if v == nil {
			continue // null: as if absent
		}
		cv, err := checkValue(p.Type, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("argument %q %v", name, err))
			continue
		}
		if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { ev, _ := checkValue(p.Type, e); return ev == cv }) {
			errs = append(errs, fmt.Errorf("argument %q is %s; it must be one of %s", name, show(v), showAll(p.Enum)))
			continue
		}
		values[name] = cv
	}
	var missing []string
	for _, name := range sortedKeys(t.Parameters) {
		if _, ok := values[name]; !ok && (t.Parameters[name].Required || t.inPath[name]) {
			if _, given := args[name]; !given || args[name] == nil {
				missing = append(missing, strconv.Quote(name))
			}
		}
	}
	if len(missing) > 0 {
		noun := "argument"
		if len(missing) > 1 {
			noun = "arguments"
		}
		errs = append(errs, fmt.Errorf("missing required %s %s", noun, strings.Join(missing, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return Request{}, err
	}

	var u strings.Builder
	for _, p := range t.tpl {
		if p.param == "" {
			u.WriteString(p.text)
			continue
		}
		s := format(values[p.param])
		if s == "" || s == "." || s == ".." {
			return Request{}, fmt.Errorf("argument %q is %q: it goes in the URL path, where it may be neither empty nor a dot segment (. or ..)", p.param, s)
		}
		u.WriteString(url.PathEscape(s))
	}
	rest := map[string]any{}
	for name, v := range values {
		if !t.inPath[name] {
			rest[name] = v
		}
	}
	req := Request{Method: t.Method, Headers: make(map[string]string, len(t.Headers)+1)}
	for k, v := range t.Headers {
		req.Headers[k] = v
	}
	if hasBody(t.Method) {
		body, err := json.Marshal(rest)
		if err != nil {
			return Request{}, fmt.Errorf("encode the arguments: %w", err)
		}
		req.Body = body
		if !t.hasHeader("Content-Type") {
			req.Headers["Content-Type"] = "application/json"
		}
	} else if len(rest) > 0 {
		q := url.Values{}
		for name, v := range rest {
			q.Set(name, format(v))
		}
		s := u.String()
		switch {
		case !strings.Contains(s, "?"):
			u.WriteByte('?')
		case !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "&"):
			u.WriteByte('&')
		}
		u.WriteString(q.Encode()) // escapes { and }: no argument forms a placeholder
	}
	req.URL = u.String()
	return req, nil
}

func (t *Tool) hasHeader(name string) bool {
	for k := range t.Headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func (t *Tool) unknown(name string) error {
	if len(t.Parameters) == 0 {
		return fmt.Errorf("unknown argument %q: the tool takes no arguments", name)
	}
	return fmt.Errorf("unknown argument %q: the tool takes %s", name, strings.Join(sortedKeys(t.Parameters), ", "))
}

// checkValue checks v against a parameter type and returns it in its
// canonical Go type: string, float64, int64 or bool. The error reads after
// the argument's name.
func checkValue(typ string, v any) (any, error) {
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "number", "integer":
		f, ok := catalog.NumberValue(v)
		if !ok {
			break
		}
		if typ == "number" {
			return f, nil
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, fmt.Errorf("is %s, want a whole number", show(v))
		}
		return int64(f), nil
	}
	return nil, fmt.Errorf("is %s, want %s", catalog.JSONType(v), article(typ))
}

// format renders a checked value for a URL.
func format(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}

func article(typ string) string {
	if typ == "integer" {
		return "an integer"
	}
	return "a " + typ
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 80 {
		return catalog.JSONType(v)
	}
	return string(b)
}

func showAll(vs []any) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = show(v)
	}
	return strings.Join(out, ", ")
}
