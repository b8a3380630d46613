// Package httptools reads the custom HTTP tools file (--http-tools): each
// tool is an HTTP endpoint the operator describes (name, description,
// endpoint, method, parameters, headers), served to MCP clients as a tool
// whose JSON Schema comes from its parameters. A call's arguments are put
// into a request template (Tool.Build) that a browser worker sends after
// filling in the {{secrets.NAME}} placeholders: the gateway never sees a
// secret value.
//
// The file (seed 003's tools.json shape):
//
//	{"tools": [{
//	  "name": "GetWeather",                          // ^[A-Za-z][A-Za-z0-9_]{0,63}$
//	  "description": "Get current weather for a city",
//	  "endpoint": "https://api.weather.example/v1/current",
//	  "method": "GET",                                // GET (default), POST, PUT, PATCH, DELETE
//	  "parameters": {
//	    "city": {"type": "string", "description": "City name", "required": true},
//	    "units": {"type": "string", "enum": ["metric", "imperial"]}
//	  },
//	  "headers": {"Authorization": "Bearer {{secrets.WEATHER_API_KEY}}"},
//	  "max_response_bytes": 1048576,                  // optional: 1 MiB by default, at most 16 MiB
//	  "redirects": ["login.weather.example"]          // optional: see below
//	}]}
//
// Parameter types are string, number, integer and boolean. Arguments go
// to the query string of a GET or DELETE and, as a JSON object, to the
// body of a POST, PUT or PATCH; a {{name}} in the endpoint's path is
// filled from that argument (percent-encoded; such a parameter is always
// required) and not sent again. {{secrets.NAME}} placeholders may stand in
// the endpoint's path or query and in header values, nowhere else: never
// in the host, never filled from an argument.
//
// Redirects: the worker follows a redirect within the endpoint's origin
// (scheme, host and port) only. "redirects" lists where else one may
// lead, as URL patterns (kit/urlpolicy: "login.example.com",
// "*.example.com", "https://cdn.example.com:8443", or "*" for any host);
// such a hop carries none of the tool's headers. No hop ever carries a
// Referer, and every hop is checked against the caller's URL policy.
package httptools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// Response body limits.
const (
	// DefaultMaxResponseBytes is the body a call returns when the tool sets
	// no max_response_bytes; the rest is clipped with a note.
	DefaultMaxResponseBytes = 1 << 20
	// MaxResponseBytesLimit is the largest max_response_bytes.
	MaxResponseBytesLimit = 16 << 20
)

// Methods are the HTTP methods a tool may use.
var Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// Types are the parameter types.
var Types = []string{"string", "number", "integer", "boolean"}

var (
	toolName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)
	paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// File is the tools file.
type File struct {
	Tools []Spec `json:"tools"`
}

// Spec is one tool as the file declares it.
type Spec struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Endpoint    string            `json:"endpoint"`
	Method      string            `json:"method,omitempty"`
	Parameters  map[string]Param  `json:"parameters,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// MaxResponseBytes caps the body a call returns (0:
	// DefaultMaxResponseBytes).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// Redirects are URL patterns of the hosts a redirect may lead to
	// besides the endpoint's origin (none: same-origin redirects only).
	Redirects []string `json:"redirects,omitempty"`
}

// Param is one parameter of a tool.
type Param struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Enum        []any  `json:"enum,omitempty"`
}

// Tool is a checked tool, ready to serve.
type Tool struct {
	Spec                   // Method upper case, MaxResponseBytes set
	Index  int             // its position in the file's "tools" list
	schema json.RawMessage // the JSON Schema of its arguments
	tpl    []piece         // the endpoint: text and placeholders
	inPath map[string]bool // parameters filled into the path
}

// Error is what is wrong with one tool of the file: it names the tool and
// the field.
type Error struct {
	Index int    // the tool's position in the file's "tools" list
	Name  string // the tool's name as written; "" when it has none
	Field string // "method", "parameters.city.type", "headers.Authorization"; "" for the whole tool
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tools[%d]", e.Index)
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Parse reads a tools file. err is for a file that is not a tools file at
// all (not JSON, no "tools" list): nothing of it can be used. Otherwise
// tools are the good tools, in file order, and errs says what is wrong
// with each other one (a bad tool is left out, the others are kept; of
// two tools with one name, the first is kept).
func Parse(data []byte) (tools []*Tool, errs []*Error, err error) {
	var file struct {
		Tools *[]json.RawMessage `json:"tools"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, nil, fmt.Errorf("not a tools file (a JSON object {\"tools\": [...]}): %s", jsonError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("not a tools file: more data after the JSON object")
	}
	if file.Tools == nil {
		return nil, nil, errors.New(`not a tools file: it has no "tools" list`)
	}
	seen := map[string]int{}
	for i, raw := range *file.Tools {
		t, terrs := parseTool(i, raw)
		if t != nil {
			if first, dup := seen[t.Name]; dup {
				terrs = append(terrs, &Error{Index: i, Name: t.Name, Field: "name",
					Msg: fmt.Sprintf("duplicate: tools[%d] has this name already (the first one is kept)", first)})
				t = nil
			}
		}
		if len(terrs) > 0 {
			errs = append(errs, terrs...)
			continue
		}
		seen[t.Name] = i
		tools = append(tools, t)
	}
	return tools, errs, nil
}

// parseTool decodes and checks the tool at index i.
func parseTool(i int, raw json.RawMessage) (*Tool, []*Error) {
	var loose struct {
		Name any `json:"name"`
	}
	_ = json.Unmarshal(raw, &loose)
	name, _ := loose.Name.(string)
	decodeErr := func(field string, err error) []*Error {
		e := &Error{Index: i, Name: name, Field: field, Msg: jsonError(err)}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// The shadow struct below embeds Spec: its fields are the tool's.
			e.Field = strings.TrimPrefix(field+"."+strings.TrimPrefix(te.Field, "Spec."), ".")
			e.Msg = fmt.Sprintf("is a JSON %s, want %s", te.Value, jsonKind(te.Type.Kind().String()))
		}
		return []*Error{e}
	}
	// The parameters are decoded one by one, so that an error names the
	// parameter (a decoding error does not name map keys).
	var shadow struct {
		Spec
		Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	}
	if err := strictDecode(raw, &shadow); err != nil {
		return nil, decodeErr("", err)
	}
	s := shadow.Spec
	for p, rawParam := range shadow.Parameters {
		var param Param
		if err := strictDecode(rawParam, &param); err != nil {
			return nil, decodeErr("parameters."+p, err)
		}
		if s.Parameters == nil {
			s.Parameters = map[string]Param{}
		}
		s.Parameters[p] = param
	}
	var errs []*Error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &Error{Index: i, Name: name, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	t := &Tool{Spec: s, Index: i}
	switch {
	case s.Name == "":
		bad("name", "missing")
	case !toolName.MatchString(s.Name):
		bad("name", "%q is not a tool name: a letter, then up to 63 letters, digits or _ (GetWeather)", s.Name)
	}
	if strings.TrimSpace(s.Description) == "" {
		bad("description", "missing (the model reads it to know what the tool does)")
	}
	t.Method = strings.ToUpper(strings.TrimSpace(s.Method))
	if t.Method == "" {
		t.Method = "GET"
	}
	if !slices.Contains(Methods, t.Method) {
		bad("method", "%q is not one of %s", s.Method, strings.Join(Methods, ", "))
	}
	switch {
	case s.MaxResponseBytes == 0:
		t.MaxResponseBytes = DefaultMaxResponseBytes
	case s.MaxResponseBytes < 0 || s.MaxResponseBytes > MaxResponseBytesLimit:
		bad("max_response_bytes", "%d: must be from 1 to %d (16 MiB)", s.MaxResponseBytes, MaxResponseBytesLimit)
	}
	for _, p := range sortedKeys(s.Parameters) {
		for _, msg := range checkParam(p, s.Parameters[p]) {
			bad("parameters."+p+msg.field, "%s", msg.msg)
		}
	}
	tpl, inPath, err := parseEndpoint(s.Endpoint, s.Parameters)
	if err != nil {
		bad("endpoint", "%v", err)
	}
	t.tpl, t.inPath = tpl, inPath
	for _, h := range sortedKeys(s.Headers) {
		if err := checkHeader(h, s.Headers[h]); err != nil {
			bad("headers."+h, "%v", err)
		}
	}
	for i, p := range s.Redirects {
		if _, err := urlpolicy.ParsePattern(p); err != nil {
			bad(fmt.Sprintf("redirects[%d]", i), "%v (a host a redirect may lead to: login.example.com, *.example.com, https://cdn.example.com:8443, or * for any)", err)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	t.schema = t.buildSchema()
	return t, nil
}

// strictDecode decodes one JSON value into v; unknown fields are errors.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// jsonError is a decoding error without Go's "json: " prefix.
func jsonError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	if errors.Is(err, io.EOF) {
		return "empty"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go kind as JSON would.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "int64", "int", "float64":
		return "a number"
	}
	return k
}

type fieldMsg struct{ field, msg string }

// checkParam checks one parameter declaration.
func checkParam(name string, p Param) []fieldMsg {
	var out []fieldMsg
	if !paramName.MatchString(name) {
		out = append(out, fieldMsg{"", fmt.Sprintf("%q is not a parameter name: a letter or _, then up to 63 letters, digits or _", name)})
	}
	switch {
	case p.Type == "":
		out = append(out, fieldMsg{".type", "missing: " + strings.Join(Types, ", ")})
	case !slices.Contains(Types, p.Type):
		out = append(out, fieldMsg{".type", fmt.Sprintf("%q is not a parameter type: %s", p.Type, strings.Join(Types, ", "))})
	default:
		if p.Enum != nil && len(p.Enum) == 0 {
			out = append(out, fieldMsg{".enum", "empty: no value would be accepted"})
		}
		for i, v := range p.Enum {
			if _, err := checkValue(p.Type, v); err != nil {
				out = append(out, fieldMsg{fmt.Sprintf(".enum[%d]", i), err.Error()})
			}
		}
	}
	return out
}

// Header names the worker sets itself.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection"}

// checkHeader checks one header of the file.
func checkHeader(name, value string) error {
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fmt.Errorf("%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
	}
	for _, r := range reservedHeaders {
		if strings.EqualFold(name, r) {
			return fmt.Errorf("%s is set by the worker; leave it out", r)
		}
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return errors.New("the value holds a line break or NUL")
	}
	pieces, err := scan(value)
	if err != nil {
		return err
	}
	for _, p := range pieces {
		if p.param != "" {
			return fmt.Errorf("{{%s}}: only {{secrets.NAME}} placeholders may stand in a header; arguments go to the query or body", p.param)
		}
	}
	return nil
}

func isTokenChar(r rune) bool {
	return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// piece is a part of a template: literal text, a secret placeholder (kept
// as written, for the worker) or a parameter placeholder.
type piece struct {
	text   string // literal text, or the placeholder as written
	secret string // the secret's name
	param  string // the parameter's name
}

// scan splits s into text and placeholders: {{secrets.NAME}} and
// {{param}}, spaces and tabs allowed inside the braces.
func scan(s string) ([]piece, error) {
	var out []piece
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			out = append(out, piece{text: s})
			break
		}
		if i > 0 {
			out = append(out, piece{text: s[:i]})
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q: a {{ without }}", clip(s[i:]))
		}
		ph := s[i : i+j+2]
		inner := strings.Trim(ph[2:len(ph)-2], " \t")
		switch {
		case strings.HasPrefix(inner, "secrets."):
			name := strings.TrimPrefix(inner, "secrets.")
			if err := secrets.ValidName(name); err != nil {
				return nil, fmt.Errorf("%s: %v", ph, err)
			}
			out = append(out, piece{text: ph, secret: name})
		case paramName.MatchString(inner):
			out = append(out, piece{text: ph, param: inner})
		default:
			return nil, fmt.Errorf("%q is not a placeholder: write {{secrets.NAME}} or {{parameter}}", clip(ph))
		}
		s = s[i+j+2:]
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// parseEndpoint checks the endpoint template: an absolute http or https
// URL, placeholders only after its host, parameters only in its path and
// declared.
func parseEndpoint(endpoint string, params map[string]Param) ([]piece, map[string]bool, error) {
	if strings.TrimSpace(endpoint) == "" {
		return nil, nil, errors.New("missing")
	}
	pieces, err := scan(endpoint)
	if err != nil {
		return nil, nil, err
	}
	// Where the path starts and the query starts, in the template.
	schemeEnd := strings.Index(endpoint, "://")
	if schemeEnd < 0 {
		return nil, nil, fmt.Errorf("%q is not an absolute http or https URL", clip(endpoint))
	}
	hostEnd := len(endpoint)
	if k := strings.IndexAny(endpoint[schemeEnd+3:], "/?#"); k >= 0 {
		hostEnd = schemeEnd + 3 + k
	}
	queryStart := len(endpoint)
	if k := strings.IndexByte(endpoint, '?'); k >= 0 {
		queryStart = k
	}
	var probe strings.Builder
	inPath := map[string]bool{}
	at := 0
	for _, p := range pieces {
		start := at
		at += len(p.text)
		if p.secret == "" && p.param == "" {
			probe.WriteString(p.text)
			continue
		}
		probe.WriteString("x")
		if start < hostEnd {
			return nil, nil, fmt.Errorf("%s: placeholders may stand in the path or query, not in the scheme or host", p.text)
		}
		if p.param == "" {
			continue
		}
		if start > queryStart {
			return nil, nil, fmt.Errorf("%s: a parameter may only stand in the path (the others go to the query by themselves)", p.text)
		}
		if _, ok := params[p.param]; !ok {
			return nil, nil, fmt.Errorf("%s: no parameter %q is declared", p.text, p.param)
		}
		inPath[p.param] = true
	}
	u, err := url.Parse(probe.String())
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%q is not a URL: %v", clip(endpoint), errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, nil, fmt.Errorf("%q: the scheme must be http or https", clip(endpoint))
	case u.Hostname() == "":
		return nil, nil, fmt.Errorf("%q has no host", clip(endpoint))
	case u.User != nil:
		return nil, nil, fmt.Errorf("%q: user info in the URL is not supported; send credentials in a header", clip(endpoint))
	case strings.Contains(endpoint, "#"):
		return nil, nil, fmt.Errorf("%q: a fragment (#…) is never sent; leave it out", clip(endpoint))
	}
	return pieces, inPath, nil
}

// buildSchema renders the JSON Schema of the tool's arguments.
func (t *Tool) buildSchema() json.RawMessage {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description,omitempty"`
		Enum        []any  `json:"enum,omitempty"`
	}
	s := struct {
		Type                 string          `json:"type"`
		Properties           map[string]prop `json:"properties"`
		Required             []string        `json:"required,omitempty"`
		AdditionalProperties bool            `json:"additionalProperties"`
	}{Type: "object", Properties: map[string]prop{}}
	for _, name := range sortedKeys(t.Parameters) {
		p := t.Parameters[name]
		s.Properties[name] = prop{Type: p.Type, Description: p.Description, Enum: p.Enum}
		if p.Required || t.inPath[name] {
			s.Required = append(s.Required, name)
		}
	}
	b, _ := json.Marshal(s) // plain values: cannot fail
	return b
}

// InputSchema is the JSON Schema of the tool's arguments.
func (t *Tool) InputSchema() json.RawMessage { return t.schema }

// ReadOnly reports whether the tool only reads (a GET).
func (t *Tool) ReadOnly() bool { return t.Method == "GET" }

// Secrets are the names of the secrets the tool's endpoint and headers
// use, sorted, each once.
func (t *Tool) Secrets() []string {
	var out []string
	add := func(ps []piece) {
		for _, p := range ps {
			if p.secret != "" && !slices.Contains(out, p.secret) {
				out = append(out, p.secret)
			}
		}
	}
	add(t.tpl)
	for _, v := range t.Headers {
		ps, _ := scan(v) // checked by Parse
		add(ps)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
