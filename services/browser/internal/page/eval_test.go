package page

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

func TestEval(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<title>Eval</title><h1 id=h class="big top">Hi</h1><script>window.answer = 42;</script>`})
	must(t, tab, openReq(srv.URL))
	tests := []struct {
		name, script, text, value string
	}{
		{"expression", `document.title`, `"Eval"`, `"Eval"`},
		{"page_global", `answer + 1`, `43`, `43`},
		{"statements", `let n = 2; n * 21`, `42`, `42`},
		{"statements_again", `let n = 3; n * 2`, `6`, `6`},
		{"return", `const x = [1, 2]; return x.map(v => v * 2);`, `[2,4]`, `[2,4]`},
		{"await", `await new Promise(r => setTimeout(() => r('late'), 20))`, `"late"`, `"late"`},
		{"promise", `fetch(location.href).then(r => r.status)`, `200`, `200`},
		{"return_await", `const r = await fetch(location.href); return r.ok;`, `true`, `true`},
		{"object", `({a: 1, b: [true, null], c: 'x'})`, `{"a":1,"b":[true,null],"c":"x"}`, `{"a":1,"b":[true,null],"c":"x"}`},
		{"undefined", `undefined`, `undefined`, `null`},
		{"no_return", `const y = 1; return;`, `undefined`, `null`},
		{"null", `null`, `null`, `null`},
		{"nan", `NaN`, `NaN`, `"NaN"`},
		{"bigint", `10n ** 20n`, `100000000000000000000n`, `"100000000000000000000n"`},
		{"dom_node", `document.getElementById('h')`, `"<h1 id=\"h\" class=\"big top\">"`, `"<h1 id=\"h\" class=\"big top\">"`},
		{"node_list", `[...document.querySelectorAll('h1')]`, `["<h1 id=\"h\" class=\"big top\">"]`, `["<h1 id=\"h\" class=\"big top\">"]`},
		{"cycle", `const o = {name: 'o'}; o.self = o; o`, `{"name":"o","self":"[Circular]"}`, `{"name":"o","self":"[Circular]"}`},
		{"map", `new Map([['k', 1]])`, `{"k":1}`, `{"k":1}`},
		{"function", `function hello() {}; hello`, `"[function hello]"`, `"[function hello]"`},
		{"json_parse_ok", `JSON.parse('{"a":1}').a`, `1`, `1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := must(t, tab, evalReq(tt.script))
			if got := text(res); got != tt.text {
				t.Errorf("eval(%q) text = %s, want %s", tt.script, got, tt.text)
			}
			var sj struct {
				Type  string          `json:"type"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(structured.JSON(res.GetStructured()), &sj); err != nil {
				t.Fatalf("structured content %q: %v", string(structured.JSON(res.GetStructured())), err)
			}
			if string(sj.Value) != tt.value {
				t.Errorf("eval(%q) structured value = %s, want %s", tt.script, sj.Value, tt.value)
			}
		})
	}
	errs := []struct {
		name, script string
		code         commonv1.ErrorCode
		parts        []string
	}{
		{"throw", `throw new Error('boom')`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"Error: boom"}},
		{"throw_in_function", `return (() => { throw new TypeError('bad type'); })()`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"TypeError: bad type"}},
		{"reject", `Promise.reject(new Error('nope'))`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"Error: nope"}},
		{"await_reject", `await Promise.reject(new RangeError('far'))`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"RangeError: far"}},
		{"throw_string", `throw 'plain'`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"plain"}},
		{"runtime_syntax_error", `JSON.parse('{')`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"SyntaxError", "JSON"}},
		{"syntax_error", `this is not js (`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"SyntaxError"}},
		{"reference_error", `missingVariable + 1`, commonv1.ErrorCode_SCRIPT_ERROR, []string{"ReferenceError: missingVariable is not defined"}},
		{"empty", `  `, commonv1.ErrorCode_INVALID_ARGUMENT, []string{"eval needs script"}},
	}
	for _, tt := range errs {
		t.Run("error_"+tt.name, func(t *testing.T) {
			_, err := call(t, tab, evalReq(tt.script))
			wantErr(t, err, tt.code, tt.parts...)
		})
	}
}

func TestEvalEndlessLoop(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{"/": `<title>Loop</title>`})
	must(t, tab, openReq(srv.URL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := tab.Do(ctx, evalReq(`while (true) {}`))
	// V8 stops the script at the soft deadline; on a busy machine the
	// request deadline can come first, which is a TIMEOUT too.
	wantErr(t, err, commonv1.ErrorCode_TIMEOUT, "eval", "deadline")
	// The loop never ends by itself; 5 s leaves a loaded machine time
	// past the 1 s deadline.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("eval of an endless loop returned after %v with a 1 s deadline", d)
	}
	// The tab is not wedged.
	if got := text(must(t, tab, getTitleReq)); got != "Loop" {
		t.Errorf("title after the loop = %q", got)
	}
}

func TestEvalHugeThrow(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	must(t, tab, openReq("about:blank"))
	for _, tt := range []struct{ name, script, part string }{
		{"string", `throw "x".repeat(2e6)`, `Uncaught "xxx`},
		{"error", `throw new Error("y".repeat(2e6))`, "Error: yyy"},
		{"rejection", `Promise.reject("z".repeat(2e6))`, `"zzz`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := call(t, tab, evalReq(tt.script))
			wantErr(t, err, commonv1.ErrorCode_SCRIPT_ERROR, "the script threw", tt.part, " more characters)")
			if n := len(err.Error()); n > 2500 {
				t.Errorf("the error has %d bytes, want at most 2500", n)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("eval of a huge throw took %v", d)
			}
		})
	}
}

func TestClipText(t *testing.T) {
	t.Parallel()
	if got := clipText("short"); got != "short" {
		t.Errorf("clipText(short) = %q", got)
	}
	exact := strings.Repeat("é", maxPageText)
	if got := clipText(exact); got != exact {
		t.Errorf("clipText of exactly %d characters changed it", maxPageText)
	}
	got := clipText(strings.Repeat("é", maxPageText+5))
	if want := strings.Repeat("é", maxPageText) + "… (5 more characters)"; got != want {
		t.Errorf("clipText(%d×é) = …%q", maxPageText+5, got[len(got)-40:])
	}
}
