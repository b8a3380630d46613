package httptools

import (
	"encoding/json"
	"strings"
	"testing"
)

const weather = `{"tools": [{
  "name": "GetWeather",
  "description": "Get current weather for a city",
  "endpoint": "https://api.weather.example/v1/current",
  "method": "GET",
  "parameters": {
    "city": {"type": "string", "description": "City name", "required": true},
    "days": {"type": "integer"},
    "units": {"type": "string", "enum": ["metric", "imperial"]},
    "alerts": {"type": "boolean"}
  },
  "headers": {"Authorization": "Bearer {{secrets.WEATHER_API_KEY}}"}
}]}`

func parseOne(t *testing.T, data string) *Tool {
	t.Helper()
	tools, errs, err := Parse([]byte(data))
	if err != nil || len(errs) > 0 || len(tools) != 1 {
		t.Fatalf("Parse = %d tools, errs %v, err %v; want one tool", len(tools), errs, err)
	}
	return tools[0]
}

func TestHTTPToolsParseSeed(t *testing.T) {
	t.Parallel()
	tool := parseOne(t, weather)
	if tool.Name != "GetWeather" || tool.Method != "GET" || !tool.ReadOnly() || tool.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Errorf("tool = %+v", tool.Spec)
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.InputSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"alerts":{"type":"boolean"},"city":{"description":"City name","type":"string"},` +
		`"days":{"type":"integer"},"units":{"enum":["metric","imperial"],"type":"string"}},"required":["city"],"type":"object"}`
	if got, _ := json.Marshal(schema); string(got) != want {
		t.Errorf("schema =\n%s\nwant\n%s", got, want)
	}
	if len(tool.Redirects) != 0 {
		t.Errorf("Redirects = %v, want none (same-origin only)", tool.Redirects)
	}
	if got := tool.Secrets(); len(got) != 1 || got[0] != "WEATHER_API_KEY" {
		t.Errorf("Secrets() = %v", got)
	}
}

func TestHTTPToolsBuild(t *testing.T) {
	t.Parallel()
	get := parseOne(t, weather)
	post := parseOne(t, `{"tools":[{"name":"CreateIssue","description":"d","method":"post",
	  "endpoint":"https://api.example.com/repos/{{repo}}/issues?key={{ secrets.KEY }}",
	  "parameters":{"repo":{"type":"string"},"title":{"type":"string","required":true},"points":{"type":"number"}},
	  "headers":{"X-Api-Key":"{{secrets.KEY}}"}}]}`)
	del := parseOne(t, `{"tools":[{"name":"Del","description":"d","method":"DELETE","endpoint":"https://api.example.com/items/{{id}}?force=1",
	  "parameters":{"id":{"type":"integer"},"why":{"type":"string"}}}]}`)
	for _, tc := range []struct {
		name    string
		tool    *Tool
		args    map[string]any
		url     string
		body    string
		headers map[string]string
	}{
		{name: "get query", tool: get, args: map[string]any{"city": "São Paulo & co", "days": 3.0, "alerts": true, "units": "metric"},
			url:     "https://api.weather.example/v1/current?alerts=true&city=S%C3%A3o+Paulo+%26+co&days=3&units=metric",
			headers: map[string]string{"Authorization": "Bearer {{secrets.WEATHER_API_KEY}}"}},
		{name: "null is absent", tool: get, args: map[string]any{"city": "Oslo", "units": nil},
			url: "https://api.weather.example/v1/current?city=Oslo"},
		{name: "an argument never forms a placeholder", tool: get, args: map[string]any{"city": "{{secrets.WEATHER_API_KEY}}"},
			url: "https://api.weather.example/v1/current?city=%7B%7Bsecrets.WEATHER_API_KEY%7D%7D"},
		{name: "post body and path", tool: post, args: map[string]any{"repo": "a/b {{secrets.KEY}}", "title": "{{secrets.KEY}}", "points": 1.5},
			url:     "https://api.example.com/repos/a%2Fb%20%7B%7Bsecrets.KEY%7D%7D/issues?key={{ secrets.KEY }}",
			body:    `{"points":1.5,"title":"{{secrets.KEY}}"}`,
			headers: map[string]string{"X-Api-Key": "{{secrets.KEY}}", "Content-Type": "application/json"}},
		{name: "delete appends to the query", tool: del, args: map[string]any{"id": 42.0, "why": "dup"},
			url: "https://api.example.com/items/42?force=1&why=dup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.tool.Build(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if r.URL != tc.url || string(r.Body) != tc.body || r.Method != tc.tool.Method {
				t.Errorf("Build = %s %s body %q, want %s body %q", r.Method, r.URL, r.Body, tc.url, tc.body)
			}
			for k, v := range tc.headers {
				if r.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, r.Headers[k], v)
				}
			}
		})
	}
}

func TestHTTPToolsBuildErrors(t *testing.T) {
	t.Parallel()
	get := parseOne(t, weather)
	path := parseOne(t, `{"tools":[{"name":"P","description":"d","endpoint":"https://x.example/{{id}}","parameters":{"id":{"type":"string"}}}]}`)
	for _, tc := range []struct {
		tool *Tool
		args map[string]any
		want string
	}{
		{get, nil, `missing required argument "city"`},
		{get, map[string]any{"city": 5.0}, `argument "city" is a number, want a string`},
		{get, map[string]any{"city": "x", "days": 1.5}, `argument "days" is 1.5, want a whole number`},
		{get, map[string]any{"city": "x", "alerts": "yes"}, `argument "alerts" is a string, want a boolean`},
		{get, map[string]any{"city": "x", "units": "kelvin"}, `argument "units" is "kelvin"; it must be one of "metric", "imperial"`},
		{get, map[string]any{"city": "x", "country": "NO"}, `unknown argument "country": the tool takes alerts, city, days, units`},
		{path, map[string]any{}, `missing required argument "id"`},
		{path, map[string]any{"id": ".."}, `argument "id" is "..": it goes in the URL path`},
		{path, map[string]any{"id": ""}, `argument "id" is "": it goes in the URL path`},
	} {
		_, err := tc.tool.Build(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s.Build(%v) = %v, want %q", tc.tool.Name, tc.args, err, tc.want)
		}
	}
}

// TestHTTPToolsBadFiles: each bad tool is reported naming the tool and the
// field, and the good ones are kept.
func TestHTTPToolsBadFiles(t *testing.T) {
	t.Parallel()
	good := `{"name":"Good","description":"d","endpoint":"https://ok.example/"}`
	for _, tc := range []struct {
		name, tool, want string
	}{
		{"bad name", `{"name":"get-weather","description":"d","endpoint":"https://x.example/"}`, `tools[1] "get-weather": name: "get-weather" is not a tool name`},
		{"no name", `{"description":"d","endpoint":"https://x.example/"}`, `tools[1]: name: missing`},
		{"no description", `{"name":"T","endpoint":"https://x.example/"}`, `tools[1] "T": description: missing`},
		{"bad method", `{"name":"T","description":"d","endpoint":"https://x.example/","method":"FETCH"}`, `tools[1] "T": method: "FETCH" is not one of GET, POST, PUT, PATCH, DELETE`},
		{"no endpoint", `{"name":"T","description":"d"}`, `tools[1] "T": endpoint: missing`},
		{"relative endpoint", `{"name":"T","description":"d","endpoint":"/v1/x"}`, `endpoint: "/v1/x" is not an absolute http or https URL`},
		{"ftp endpoint", `{"name":"T","description":"d","endpoint":"ftp://x.example/"}`, `endpoint: "ftp://x.example/": the scheme must be http or https`},
		{"bad URL", `{"name":"T","description":"d","endpoint":"https://x.exa mple/"}`, `endpoint: "https://x.exa mple/" is not a URL`},
		{"fragment", `{"name":"T","description":"d","endpoint":"https://x.example/#top"}`, `a fragment`},
		{"user info", `{"name":"T","description":"d","endpoint":"https://u:p@x.example/"}`, `user info`},
		{"secret in host", `{"name":"T","description":"d","endpoint":"https://{{secrets.H}}.example/"}`, `endpoint: {{secrets.H}}: placeholders may stand in the path or query, not in the scheme or host`},
		{"param in query", `{"name":"T","description":"d","endpoint":"https://x.example/?q={{q}}","parameters":{"q":{"type":"string"}}}`, `endpoint: {{q}}: a parameter may only stand in the path`},
		{"undeclared path param", `{"name":"T","description":"d","endpoint":"https://x.example/{{id}}"}`, `endpoint: {{id}}: no parameter "id" is declared`},
		{"bad placeholder", `{"name":"T","description":"d","endpoint":"https://x.example/{{a b}}"}`, `endpoint: "{{a b}}" is not a placeholder`},
		{"bad secret name", `{"name":"T","description":"d","endpoint":"https://x.example/","headers":{"A":"{{secrets.9x}}"}}`, `headers.A: {{secrets.9x}}: secret name "9x"`},
		{"param in header", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"q":{"type":"string"}},"headers":{"X-Q":"{{q}}"}}`, `headers.X-Q: {{q}}: only {{secrets.NAME}} placeholders may stand in a header`},
		{"bad header name", `{"name":"T","description":"d","endpoint":"https://x.example/","headers":{"X Q":"v"}}`, `headers.X Q: "X Q" is not a header name`},
		{"reserved header", `{"name":"T","description":"d","endpoint":"https://x.example/","headers":{"host":"v"}}`, `headers.host: Host is set by the worker`},
		{"unknown type", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"q":{"type":"date"}}}`, `parameters.q.type: "date" is not a parameter type: string, number, integer, boolean`},
		{"no type", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"q":{}}}`, `parameters.q.type: missing`},
		{"bad enum", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"q":{"type":"integer","enum":[1,"two"]}}}`, `parameters.q.enum[1]: is a string, want an integer`},
		{"bad param name", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"a-b":{"type":"string"}}}`, `parameters.a-b: "a-b" is not a parameter name`},
		{"unknown field", `{"name":"T","description":"d","endpoint":"https://x.example/","endpont":"x"}`, `tools[1] "T": unknown field "endpont"`},
		{"wrong JSON type", `{"name":"T","description":"d","endpoint":"https://x.example/","parameters":{"q":{"type":"string","required":"yes"}}}`, `tools[1] "T": parameters.q.required: is a JSON string, want true or false`},
		{"response cap", `{"name":"T","description":"d","endpoint":"https://x.example/","max_response_bytes":99999999}`, `max_response_bytes: 99999999: must be from 1 to 16777216`},
		{"bad redirect pattern", `{"name":"T","description":"d","endpoint":"https://x.example/","redirects":["login.example.com","https://x.example/path"]}`, `tools[1] "T": redirects[1]: url pattern "https://x.example/path": rules match hosts, not paths`},
		{"redirects not a list", `{"name":"T","description":"d","endpoint":"https://x.example/","redirects":"any"}`, `tools[1] "T": redirects: is a JSON string, want an array`},
		{"duplicate", `{"name":"Good","description":"again","endpoint":"https://y.example/"}`, `tools[1] "Good": name: duplicate: tools[0] has this name already`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools, errs, err := Parse([]byte(`{"tools":[` + good + `,` + tc.tool + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != 1 || tools[0].Name != "Good" || tools[0].Endpoint != "https://ok.example/" {
				t.Errorf("tools = %v, want only Good (the first)", tools)
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errs = %v, want one with %q", errs, tc.want)
			}
		})
	}
}

func TestHTTPToolsNotAToolsFile(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		``:                       "not a tools file",
		`{"tools": [`:            "not a tools file",
		`[]`:                     "not a tools file",
		`{"tool": []}`:           `unknown field "tool"`,
		`{}`:                     `no "tools" list`,
		`{"tools": []} {}`:       "more data after the JSON object",
		`{"tools": {"a": "b"}}`:  "not a tools file",
		"{\"tools\": [1]}\n\n  ": "",
	} {
		tools, errs, err := Parse([]byte(in))
		switch {
		case want == "":
			if err != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "tools[0]: is a JSON number, want an object") {
				t.Errorf("Parse(%q) = %v, %v", in, errs, err)
			}
		case err == nil || !strings.Contains(err.Error(), want):
			t.Errorf("Parse(%q) = %v, %v, %v; want error %q", in, tools, errs, err, want)
		}
	}
	if tools, errs, err := Parse([]byte(`{"tools": []}`)); err != nil || len(tools) != 0 || len(errs) != 0 {
		t.Errorf("an empty list: %v %v %v", tools, errs, err)
	}
}
