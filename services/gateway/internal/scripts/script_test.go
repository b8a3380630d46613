package scripts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingHost stands in for the gateway's dispatcher in this package's
// unit tests: it records the calls and answers from a table. (The real
// dispatcher, with URL policy, approvals and audit, is wired in by the
// gateway; its tests run script tools against a real browser.)
type recordingHost struct {
	mu      sync.Mutex
	calls   []hostCall
	answers map[string]hostAnswer
}

type hostCall struct {
	Name string
	Args string
}

type hostAnswer struct {
	text    string
	isError bool
	err     error
}

func (h *recordingHost) CallTool(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
	h.mu.Lock()
	h.calls = append(h.calls, hostCall{name, string(args)})
	a, ok := h.answers[name]
	h.mu.Unlock()
	if !ok {
		return "unknown tool " + name, true, nil
	}
	return a.text, a.isError, a.err
}

func (h *recordingHost) recorded() []hostCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hostCall(nil), h.calls...)
}

// load loads src as stem or fails the test.
//
// This package's tests are not parallel: a script's memory budget
// watches the heap of the whole process (budget.go), so one test's
// allocations would count against the budget of a script another test
// runs meanwhile, and TestMemoryBudget reads the process's live heap.
func load(t *testing.T, o Options, stem, src string) *Script {
	t.Helper()
	s, err := o.Load(stem, []byte(src))
	if err != nil {
		t.Fatalf("Load(%s): %v", stem, err)
	}
	return s
}

// logBuffer is a logger that writes JSON lines to a buffer.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

func newLog() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

const jiraJS = `
function describe() {
  return [
    {name: "search", description: "Search the issue tracker",
     inputSchema: {type: "object", properties: {query: {type: "string"}}, required: ["query"]}},
    {name: "create", description: "Open an issue"},
    {name: "loose", inputSchema: {properties: {a: {type: "number"}}}},
  ];
}
function search(args) { return "searched " + args.query; }
function create(args) { return {created: true, title: args.title}; }
function call(name, args) { return "dispatched " + name; }
`

func TestLoadGood(t *testing.T) {
	s := load(t, Options{}, "jira", jiraJS)
	var names []string
	for _, tool := range s.Tools {
		names = append(names, tool.Name)
	}
	if got, want := strings.Join(names, ","), "jira__search,jira__create,jira__loose"; got != want {
		t.Fatalf("tools = %s, want %s", got, want)
	}
	if got := string(s.Tools[1].InputSchema); got != `{"type":"object"}` {
		t.Errorf("default schema = %s", got)
	}
	if got := string(s.Tools[2].InputSchema); got != `{"properties":{"a":{"type":"number"}},"type":"object"}` {
		t.Errorf("schema without type = %s, want type object added", got)
	}
	if s.Tools[0].Description != "Search the issue tracker" {
		t.Errorf("description = %q", s.Tools[0].Description)
	}

	// One declaration (not an array), served by a call() dispatcher.
	one := load(t, Options{}, "one", `function describe(){ return {name: "only"} } function call(n, a){ return n + ":" + a.x }`)
	if len(one.Tools) != 1 || one.Tools[0].Name != "one__only" {
		t.Fatalf("tools = %+v", one.Tools)
	}
	res, isErr, err := one.Call(context.Background(), "one__only", map[string]any{"x": 7}, &recordingHost{})
	if err != nil || isErr || res != "only:7" {
		t.Fatalf("Call = %q, %v, %v; want only:7", res, isErr, err)
	}
}

func TestLoadBad(t *testing.T) {
	for _, tc := range []struct {
		name, stem, src string
		want            string // in the error
	}{
		{"bad stem", "Jira", `function describe(){return {name:"a"}} function a(){}`, "bad name"},
		{"stem with dash", "my-tool", `function describe(){return {name:"a"}} function a(){}`, "bad name"},
		{"stem too long", strings.Repeat("a", 33), `function describe(){return {name:"a"}} function a(){}`, "bad name"},
		{"syntax", "s", `function describe( {`, "syntax error"},
		{"no describe", "s", `function a(){}`, "no describe() function"},
		{"describe throws", "s", `function describe(){ throw new Error("boom") }`, "describe(): boom"},
		{"top-level throws", "s", `throw new TypeError("bad start")`, "top-level code: TypeError: bad start"},
		{"no tools", "s", `function describe(){ return [] }`, "declares no tools"},
		{"not an object", "s", `function describe(){ return "search" }`, `declaration 1: not an object {name, description, inputSchema} but a string ("search")`},
		{"no name", "s", `function describe(){ return {description: "x"} } function call(){}`, "no name"},
		{"bad tool name", "s", `function describe(){ return {name: "Search"} } function call(){}`, `name "Search": must match`},
		{"double underscore", "s", `function describe(){ return {name: "a__b"} } function call(){}`, `must not contain "__"`},
		{"reserved name", "s", `function describe(){ return {name: "describe"} }`, "reserved"},
		{"unknown key", "s", `function describe(){ return {name: "a", inputschema: {}} } function a(){}`, `unknown key "inputschema"`},
		{"schema not an object: string type", "s", `function describe(){ return {name: "a", inputSchema: {type: "string"}} } function a(){}`, `declaration "a": inputSchema: a schema that is not an object (type "string"`},
		{"schema not an object: array", "s", `function describe(){ return {name: "a", inputSchema: [1]} } function a(){}`, "a schema that is not an object"},
		{"schema not an object: no type, no properties", "s", `function describe(){ return {name: "a", inputSchema: {}} } function a(){}`, "a schema that is not an object"},
		{"schema not an object: number", "s", `function describe(){ return {name: "a", inputSchema: 3} } function a(){}`, "a schema that is not an object"},
		{"description not a string", "s", `function describe(){ return {name: "a", description: 1} } function a(){}`, `declaration "a": description is a number (1), not a string`},
		{"description too long", "s", `function describe(){ return {name: "a", description: "x".repeat(9000)} } function a(){}`, "over the 8 KiB limit"},
		{"schema too large", "s", `var p={}; for (var i=0;i<3000;i++) p["property_"+i]={type:"string"};
			function describe(){ return {name: "a", inputSchema: {type:"object", properties: p}} } function a(){}`, "over the 64 KiB limit"},
		{"duplicate", "s", `function describe(){ return [{name: "a"}, {name: "a"}] } function a(){}`, `"a": declared twice`},
		{"no function", "s", `function describe(){ return [{name: "a"}, {name: "b"}] } function a(){}`, `"b": no function b(args) and no call(name, args) dispatcher`},
		{"built-in is not the script's function", "s", `function describe(){ return {name: "escape"} }`, `"escape": no function`},
		{"too many tools", "s", `function describe(){ var d=[]; for (var i=0;i<65;i++) d.push({name:"t"+i}); return d } function call(){}`, "65 tools, over the limit of 64"},
		{"too large", "s", "function describe(){return {name:'a'}} function a(){}\n//" + strings.Repeat("x", MaxSource), "over the 256 KiB limit"},
		{"tools at load", "s", `tools.open({url: "https://example.com"}); function describe(){ return {name: "a"} } function a(){}`, "cannot be called while the script loads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(tc.stem, []byte(tc.src))
			if err == nil {
				t.Fatalf("Load = %v tools, want an error with %q", len(s.Tools), tc.want)
			}
			var le *LoadError
			if !errors.As(err, &le) || le.Stem != tc.stem {
				t.Fatalf("Load error %T %v: want a *LoadError for stem %q", err, err, tc.stem)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("script %q", tc.stem)) {
				t.Fatalf("Load error = %q, want it to name the stem and say %q", err, tc.want)
			}
		})
	}
}

func TestLoadTimeouts(t *testing.T) {
	t.Run("describe over the default 5 s", func(t *testing.T) {
		_, err := Load("slow", []byte(`function describe(){ for(;;){} }`))
		if err == nil || !strings.Contains(err.Error(), "describe(): stopped: over its time budget of 5s") {
			t.Fatalf("Load = %v, want describe stopped after 5s", err)
		}
	})
	t.Run("top-level endless loop", func(t *testing.T) {
		o := Options{Limits: Limits{Load: 300 * time.Millisecond}}
		_, err := o.Load("loop", []byte(`while (true) {} function describe(){ return {name:"a"} }`))
		if err == nil || !strings.Contains(err.Error(), "top-level code: stopped: over its time budget of 300ms") {
			t.Fatalf("Load = %v, want top-level code stopped", err)
		}
	})
	t.Run("memory budget over the ceiling", func(t *testing.T) {
		o := Options{Limits: Limits{Memory: 1 << 30}}
		_, err := o.Load("a", []byte(`function describe(){ return {name:"a"} } function a(){}`))
		if err == nil || !strings.Contains(err.Error(), "over the 256 MiB ceiling") {
			t.Fatalf("Load = %v, want the ceiling error", err)
		}
	})
}

func TestCallResults(t *testing.T) {
	log, logs := newLog()
	s := load(t, Options{Log: log}, "demo", `
function describe() {
  return ["text", "json", "nothing", "fails", "throws_string", "async_ok", "async_fail", "pending", "big", "cyclic", "args", "fn"]
    .map(function (n) { return {name: n} });
}
function text(a) { console.log("hello", {from: "text"}, 42); return "plain text"; }
function json(a) { return {n: 1, list: [1, "two"], nested: {ok: true}}; }
function nothing(a) {}
function fails(a) { throw new Error("the page had no table"); }
function throws_string(a) { throw "just a string"; }
async function async_ok(a) { var x = await Promise.resolve(5); return {x: x}; }
async function async_fail(a) { await null; throw new RangeError("late failure"); }
function pending(a) { return new Promise(function () {}); }
function big(a) { return "x".repeat(5 * 1024 * 1024); }
function cyclic(a) { var o = {}; o.self = o; return o; }
function args(a) { return a; }
function fn(a) { return function () {}; }
`)
	ctx := context.Background()
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"text", nil, "plain text", false},
		{"json", nil, `{"n":1,"list":[1,"two"],"nested":{"ok":true}}`, false},
		{"nothing", nil, "", false},
		{"fails", nil, "demo__fails: the page had no table", true},
		{"throws_string", nil, "demo__throws_string: just a string", true},
		{"async_ok", nil, `{"x":5}`, false},
		{"async_fail", nil, "demo__async_fail: RangeError: late failure", true},
		{"pending", nil, "demo__pending: the tool returned a promise that never settled", true},
		{"big", nil, "demo__big: the result is 5.0 MiB, over the 4.0 MiB limit", true},
		{"cyclic", nil, "demo__cyclic: TypeError", true},
		{"args", map[string]any{"q": "x", "n": 2.5, "deep": map[string]any{"__proto__": "kept"}}, `{"deep":{"__proto__":"kept"},"n":2.5,"q":"x"}`, false},
		{"fn", nil, "", false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, isErr, err := s.Call(ctx, "demo__"+tc.tool, tc.args, &recordingHost{})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if isErr != tc.isError || !strings.HasPrefix(res, tc.want) {
				t.Fatalf("Call = %q (isError %v), want %q (isError %v)", res, isErr, tc.want, tc.isError)
			}
		})
	}

	if _, _, err := s.Call(ctx, "demo__missing", nil, &recordingHost{}); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("Call(missing) err = %v, want ErrUnknownTool", err)
	}

	var found bool
	for _, l := range logs.lines() {
		if l["msg"] == "script console" && l["console"] == `hello {"from":"text"} 42` && l["script"] == "demo" && l["tool"] == "demo__text" && l["level"] == "INFO" {
			found = true
		}
	}
	if !found {
		t.Errorf("console.log line not in the log: %v", logs.lines())
	}
}

func TestConsoleLimits(t *testing.T) {
	log, logs := newLog()
	s := load(t, Options{Log: log}, "chatty", `
function describe(){ return {name: "talk"} }
function talk(){ for (var i = 0; i < 300; i++) console.error("line " + i + " " + "y".repeat(5000)); return "done" }`)
	res, isErr, err := s.Call(context.Background(), "chatty__talk", nil, &recordingHost{})
	if err != nil || isErr || res != "done" {
		t.Fatalf("Call = %q, %v, %v", res, isErr, err)
	}
	var lines, dropped int
	for _, l := range logs.lines() {
		switch l["msg"] {
		case "script console":
			lines++
			if c := l["console"].(string); len(c) > MaxLogLine+len("…(cut)") || !strings.HasSuffix(c, "…(cut)") {
				t.Errorf("console line of %d bytes, want cut at %d", len(c), MaxLogLine)
			}
			if l["level"] != "ERROR" {
				t.Errorf("console.error logged at %v", l["level"])
			}
		case "script console: further lines dropped":
			dropped++
		}
	}
	if lines != MaxLogLines || dropped != 1 {
		t.Fatalf("logged %d console lines and %d drop notices, want %d and 1", lines, dropped, MaxLogLines)
	}
}

func TestSandboxGlobals(t *testing.T) {
	s := load(t, Options{}, "probe", `
function describe(){ return {name: "probe"} }
function probe(){
  var names = ["require", "process", "setTimeout", "setInterval", "fetch", "XMLHttpRequest", "print", "load", "module", "exports", "Deno", "Bun"];
  return names.filter(function (n) { return typeof globalThis[n] !== "undefined" });
}`)
	res, isErr, err := s.Call(context.Background(), "probe__probe", nil, &recordingHost{})
	if err != nil || isErr || res != "[]" {
		t.Fatalf("globals present = %q (%v, %v), want none", res, isErr, err)
	}
}

func TestBrowserTools(t *testing.T) {
	host := &recordingHost{answers: map[string]hostAnswer{
		"open":     {text: "opened https://example.com/"},
		"get_text": {text: "Example Domain"},
		"click":    {text: "element e9 not found", isError: true},
		"snapshot": {err: errors.New("no browser session")},
	}}
	s := load(t, Options{}, "web", `
function describe(){ return [{name: "heading"}, {name: "careful"}, {name: "generic"}, {name: "bad_args"}] }
function heading(a) {
  tools.open({url: a.url});
  return tools.get_text({selector: "h1"});
}
function careful(a) {
  try { tools.click({ref: "e9"}); } catch (e) { var first = e.message + " (" + e.tool + ")"; }
  try { tools.snapshot(); } catch (e) { return first + " / " + e.message; }
  return "no error";
}
function generic(a) { return tools.call("get_text", {selector: "p"}); }
function bad_args(a) { return tools.open("https://example.com"); }
`)
	ctx := context.Background()
	res, isErr, err := s.Call(ctx, "web__heading", map[string]any{"url": "https://example.com/"}, host)
	if err != nil || isErr || res != "Example Domain" {
		t.Fatalf("heading = %q, %v, %v", res, isErr, err)
	}
	want := []hostCall{{"open", `{"url":"https://example.com/"}`}, {"get_text", `{"selector":"h1"}`}}
	if got := host.recorded(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("host calls = %v, want %v", got, want)
	}
	res, isErr, err = s.Call(ctx, "web__careful", nil, host)
	if err != nil || isErr || res != "element e9 not found (click) / no browser session" {
		t.Fatalf("careful = %q, %v, %v", res, isErr, err)
	}
	res, isErr, err = s.Call(ctx, "web__generic", nil, host)
	if err != nil || isErr || res != "Example Domain" {
		t.Fatalf("generic = %q, %v, %v", res, isErr, err)
	}
	res, isErr, err = s.Call(ctx, "web__bad_args", nil, host)
	if err != nil || !isErr || !strings.Contains(res, "tools.open(args): args must be an object") {
		t.Fatalf("bad_args = %q, %v, %v", res, isErr, err)
	}
}

func TestNesting(t *testing.T) {
	s := load(t, Options{}, "rec", `function describe(){ return {name: "self"} } function self(){ return "<" + tools.rec__self({}) + ">" }`)
	// A host that dispatches script tools to the script, as the gateway's
	// dispatcher does.
	calls := 0
	var host HostFunc
	host = func(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
		calls++
		res, isErr, err := s.Call(ctx, name, nil, host)
		if err != nil {
			return err.Error(), true, nil
		}
		return res, isErr, nil
	}
	res, isErr, err := s.Call(context.Background(), "rec__self", nil, host)
	if err != nil || !isErr || !strings.Contains(res, "nested 5 deep (the limit is 4)") {
		t.Fatalf("Call = %q, %v, %v; want the nesting limit", res, isErr, err)
	}
	if calls != MaxDepth {
		t.Errorf("host called %d times, want %d", calls, MaxDepth)
	}
}

func TestEndlessLoop(t *testing.T) {
	s := load(t, Options{Limits: Limits{Call: 500 * time.Millisecond}}, "spin", `
function describe(){ return [{name: "forever"}, {name: "caught"}] }
function forever(){ for (;;) {} }
function caught(){ for (;;) { try { while (true) {} } catch (e) {} } }`)
	for _, tool := range []string{"spin__forever", "spin__caught"} {
		res, isErr, err := s.Call(context.Background(), tool, nil, &recordingHost{})
		if err != nil || !isErr || !strings.Contains(res, "stopped: over its time budget of 500ms (an endless loop?)") {
			t.Fatalf("%s = %q, %v, %v; want the time budget error", tool, res, isErr, err)
		}
	}
	// The process is unharmed: the same script answers again.
	ok := load(t, Options{}, "fine", `function describe(){ return {name: "ok"} } function ok(){ return "still here" }`)
	if res, _, _ := ok.Call(context.Background(), "fine__ok", nil, nil); res != "still here" {
		t.Fatalf("after the loop: %q", res)
	}

	// The caller's context ends the call too (under a budget it cannot
	// reach first on a loaded machine).
	patient := load(t, Options{Limits: Limits{Call: 30 * time.Second}}, "spin", `
function describe(){ return {name: "forever"} }
function forever(){ for (;;) {} }`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res, isErr, err := patient.Call(ctx, "spin__forever", nil, nil)
	if err != nil || !isErr || !strings.Contains(res, "stopped: the caller gave up (context canceled)") {
		t.Fatalf("cancelled = %q, %v, %v", res, isErr, err)
	}
}

func TestHangingHostAbandoned(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	host := HostFunc(func(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
		<-block // ignores its context
		return "late", false, nil
	})
	// The budget leaves the call time to reach the host on a loaded
	// machine (stopped before it, the interpreter would stop in time).
	s := load(t, Options{Limits: Limits{Call: 2 * time.Second, Grace: 200 * time.Millisecond}}, "hang",
		`function describe(){ return {name: "wait"} } function wait(){ return tools.snapshot() }`)
	before := Abandoned()
	res, isErr, err := s.Call(context.Background(), "hang__wait", nil, host)
	if err != nil || !isErr || !strings.Contains(res, "did not stop within 200ms and was abandoned") {
		t.Fatalf("Call = %q, %v, %v; want abandoned", res, isErr, err)
	}
	if Abandoned() != before+1 {
		t.Errorf("Abandoned() = %d, want %d", Abandoned(), before+1)
	}
}

func TestStackOverflow(t *testing.T) {
	s := load(t, Options{}, "deep", `function describe(){ return {name: "recurse"} } function recurse(a){ function f(n){ return f(n+1) + 1 } return f(0) }`)
	res, isErr, err := s.Call(context.Background(), "deep__recurse", nil, nil)
	if err != nil || !isErr || !strings.Contains(res, "stack overflow") {
		t.Fatalf("Call = %q, %v, %v", res, isErr, err)
	}
}

// liveHeapMiB is the live heap after a collection.
func liveHeapMiB() float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: metricLive}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()) / (1 << 20)
}

func TestMemoryBudget(t *testing.T) {
	s := load(t, Options{Limits: Limits{Memory: 32 << 20, Call: time.Minute, Grace: time.Minute}}, "bomb", `
function describe(){ return [{name: "arrays"}, {name: "doubling"}, {name: "objects"}, {name: "garbage"}] }
function arrays(){ var keep = []; for (var i = 0; ; i++) keep.push([i, "item " + i, {i: i}]); }
function doubling(){ var s = "x"; for (;;) s += s; }
function objects(){ var m = {}; for (var i = 0; ; i++) m["k" + i] = {v: "value " + i}; }
function garbage(){ var n = 0; for (var i = 0; i < 3e6; i++) { var t = {i: i, s: "tmp" + i}; n += t.i % 2 } return n }
`)
	before := liveHeapMiB()
	for _, tool := range []string{"arrays", "doubling", "objects"} {
		res, isErr, err := s.Call(context.Background(), "bomb__"+tool, nil, nil)
		if err != nil || !isErr || !strings.Contains(res, "stopped: over its memory budget of 32.0 MiB") {
			t.Fatalf("%s = %q, %v, %v; want the memory budget error", tool, res, isErr, err)
		}
		t.Logf("%s: %s", tool, res)
	}
	// The memory is given back: the process survives and its heap is back
	// near where it was.
	if after := liveHeapMiB(); after > before+32 {
		t.Errorf("live heap %.1f MiB after the bombs, %.1f before", after, before)
	}
	// Garbage is not counted: a call that allocates much more than the
	// budget in short-lived objects runs to its end.
	res, isErr, err := s.Call(context.Background(), "bomb__garbage", nil, nil)
	if err != nil || isErr || res != "1500000" {
		t.Fatalf("garbage = %q, %v, %v; want it to finish", res, isErr, err)
	}
}

func TestNativeCaps(t *testing.T) {
	s := load(t, Options{Limits: Limits{MaxString: 1 << 20, MaxArray: 1 << 16}}, "caps", `
function describe(){ return {name: "try"} }
function attempt(f) { try { f(); return "ok" } catch (e) { return e.name + ": " + e.message } }
function call(name, a) {
  var big = "y".repeat(1 << 19), arr = [big, big, big];
  var cases = {
    repeat: function () { "ab".repeat(1 << 20) },
    repeat_ok: function () { "ab".repeat(1 << 10) },
    padStart: function () { "a".padStart(2e6, "-") },
    padEnd: function () { "a".padEnd(2e6) },
    concat: function () { big.concat(big, big) },
    join: function () { arr.join("") },
    join_ok: function () { [1, [2, 3], null, undefined, "x"].join("-") },
    join_cyclic: function () { var c = [1]; c.push(c); if (c.join() !== "1,") throw new Error(c.join()) },
    join_sparse: function () { var s = []; s.length = 1e9; s.join() },
    toString: function () { String(arr) },
    fill: function () { new Array(1e9).fill(0) },
    fill_ok: function () { new Array(100).fill(0) },
    from: function () { Array.from({length: 1e9}) },
    from_array: function () { var s = []; s.length = 1e8; Array.from(s) },
    concat_arrays: function () { var a = new Array(40000).fill(1); a.concat(a, a) },
    split: function () { "x".repeat(1e5).split("") },
    split_ok: function () { if ("a,b,c".split(",").length !== 3) throw new Error("split") },
    buffer: function () { new ArrayBuffer(2e9) },
    typed: function () { new Float64Array(1e6) },
    typed_ctor: function () { var C = new Uint8Array(1).constructor; new C(2e9) },
    typed_ok: function () {
      if (!(new Uint8Array(16) instanceof Uint8Array)) throw new Error("instanceof");
      if ({} instanceof Uint8Array || new Int8Array(1) instanceof Uint8Array) throw new Error("instanceof too wide");
      class Bytes extends Uint8Array {}
      var b = new Bytes(4);
      if (!(b instanceof Bytes) || !(b instanceof Uint8Array) || new Uint8Array(1) instanceof Bytes) throw new Error("subclass");
      if (new Uint8Array([1, 2, 3]).map(function (x) { return x * 2 }).join() !== "2,4,6") throw new Error("map");
      if (new ArrayBuffer(8).slice(2).byteLength !== 6) throw new Error("slice");
    },
    json_deep: function () { JSON.parse("[".repeat(5000) + "]".repeat(5000)) },
    json_deep_value: function () { var a = []; for (var i = 0; i < 5000; i++) a = [a]; JSON.stringify(a) },
    join_deep: function () { var a = []; for (var i = 0; i < 5000; i++) a = [a]; String(a) },
    flat_deep: function () { var a = []; for (var i = 0; i < 5000; i++) a = [a]; a.flat(Infinity) },
    flat_ok: function () { if ([1, [2, [3, [4]]]].flat(Infinity).join() !== "1,2,3,4" || [1, [2, [3]]].flat().length !== 3) throw new Error("flat") },
    json_deep_shared: function () { var a = [1]; for (var i = 0; i < 1200; i++) a = [a, {k: a}]; JSON.stringify(a) }, // 2^1200 paths: the walk must visit each object once
    json_deep_object: function () { var o = {}; for (var i = 0; i < 5000; i++) o = {x: 1, o: o}; JSON.stringify({wrap: o}) },
    json_shared_ok: function () {
      if (JSON.stringify([[[{a: 1, b: [2, {c: 3}]}]]]) !== '[[[{"a":1,"b":[2,{"c":3}]}]]]') throw new Error("stringify");
      var shallow = [1]; for (var i = 0; i < 15; i++) shallow = [shallow, shallow];
      if (JSON.stringify(shallow).length !== 196605) throw new Error("shared: " + JSON.stringify(shallow).length);
    },
    json_cyclic_ok: function () { var c = {}; c.c = c; try { JSON.stringify(c) } catch (e) { if (e instanceof TypeError) return; } throw new Error("no TypeError") },
    json_ok: function () { JSON.parse('{"a": "[[[[", "b": [1, {"c": null}]}') },
  };
  var out = {};
  for (var k in cases) out[k] = attempt(cases[k]);
  return out;
}`)
	res, isErr, err := s.Call(context.Background(), "caps__try", nil, nil)
	if err != nil || isErr {
		t.Fatalf("Call = %q, %v, %v", res, isErr, err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(res), &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range got {
		if strings.HasSuffix(k, "_ok") || k == "join_cyclic" {
			if v != "ok" {
				t.Errorf("%s = %q, want ok", k, v)
			}
			continue
		}
		if !strings.HasPrefix(v, "RangeError: ") || !strings.Contains(v, "(the script limit)") {
			t.Errorf("%s = %q, want a RangeError naming the script limit", k, v)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	s := load(t, Options{}, "par", `function describe(){ return {name: "echo"} } var counter = 0;
function echo(a){ counter++; return a.i + ":" + counter }`)
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, isErr, err := s.Call(context.Background(), "par__echo", map[string]any{"i": i}, nil)
			// Every call has a fresh interpreter: the counter is always 1.
			if want := fmt.Sprintf("%d:1", i); err != nil || isErr || res != want {
				errs <- fmt.Sprintf("call %d = %q, %v, %v; want %s", i, res, isErr, err, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkCall measures a call: a fresh interpreter with the sandbox,
// the script's top-level code, the tool function and its JSON result.
func BenchmarkCall(b *testing.B) {
	s, err := Load("bench", []byte(jiraJS))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, isErr, err := s.Call(ctx, "bench__create", map[string]any{"title": "t"}, nil); err != nil || isErr {
			b.Fatal(err)
		}
	}
}

// Script values that run code when the loader or the caller reads them
// (getters, proxies, toJSON) are read under the budgets: an error or a
// stop, never a hang or a crash of the gateway.
func TestHostileValues(t *testing.T) {
	// The values that loop meet a short budget; the others get a long one,
	// so that a loaded machine cannot stop them before their error.
	o := Options{Limits: Limits{Load: 300 * time.Millisecond, Call: 300 * time.Millisecond}}
	roomy := Options{Limits: Limits{Load: 30 * time.Second, Call: 30 * time.Second}}
	for _, tc := range []struct{ name, src, want string }{
		{"getter loops", `function describe(){ return {get name(){ for(;;){} }} }`, "describe(): stopped: over its time budget of 300ms"},
		{"getter throws", `function describe(){ return {get name(){ throw new Error("no name for you") }} }`, "describe(): no name for you"},
		{"proxy keys throw", `function describe(){ return new Proxy({name: "a"}, {ownKeys(){ throw new TypeError("keys") }}) } function a(){}`, "describe(): TypeError: keys"},
		{"schema toJSON loops", `function describe(){ return {name: "a", inputSchema: {type: "object", toJSON(){ for(;;){} }}} } function a(){}`, "describe(): stopped: over its time budget of 300ms"},
		{"thrown message loops", `throw {get message(){ for(;;){} }}`, "top-level code: stopped: over its time budget of 300ms"},
		{"thrown message throws", `function describe(){ throw {get message(){ throw new Error("inner") }} }`, "describe(): inner"},
		{"thrown toString throws", `throw {toString(){ throw {toString(){ throw 1 }} }}`, "top-level code: the script threw a value whose message cannot be read"},
		{"global getter throws", `Object.defineProperty(globalThis, "describe", {get(){ throw new Error("gotcha") }})`, "describe(): gotcha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := roomy
			if strings.Contains(tc.want, "time budget") {
				opts = o
			}
			_, err := opts.Load("evil", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want %q", err, tc.want)
			}
		})
	}

	src := `
function describe(){ return [{name: "json_loops"}, {name: "json_throws"}, {name: "lost"}, {name: "bad_throw"}] }
function bad_throw(){ throw {get message(){ for(;;){} }} }
function json_loops(){ return {toJSON(){ for(;;){} }} }
function json_throws(){ return {toJSON(){ throw new Error("not today") }} }
Object.defineProperty(globalThis, "lost", {configurable: true, get(){
  // A function at load (tools cannot be called then), a throw in a call.
  try { tools.call("probe", {}) } catch (e) { if (/while the script loads/.test(e.message)) return function () {} }
  throw new Error("where did it go");
}});
`
	short := load(t, Options{Limits: Limits{Load: roomy.Limits.Load, Call: o.Limits.Call}}, "evil", src)
	long := load(t, roomy, "evil", src)
	for tool, tc := range map[string]struct {
		s    *Script
		want string
	}{
		"evil__json_loops":  {short, "evil__json_loops: stopped: over its time budget of 300ms"},
		"evil__json_throws": {long, "evil__json_throws: not today"},
		"evil__lost":        {long, "evil__lost: where did it go"},
		"evil__bad_throw":   {short, "evil__bad_throw: stopped: over its time budget of 300ms"},
	} {
		want := tc.want
		res, isErr, err := tc.s.Call(context.Background(), tool, nil, &recordingHost{})
		if err != nil || !isErr || !strings.HasPrefix(res, want) {
			t.Errorf("%s = %q, %v, %v; want %q", tool, res, isErr, err, want)
		}
	}
}
