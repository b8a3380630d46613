package catalog

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

var update = flag.Bool("update", false, "rewrite docs/tools.md from the catalog")

// docsPath is docs/tools.md at the repository root.
var docsPath = filepath.Join("..", "..", "..", "docs", "tools.md")

func TestDocsUpToDate(t *testing.T) {
	want := Markdown()
	if *update {
		if err := os.WriteFile(docsPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("read %s: %v (generate it: cd services/gateway && go run ./cmd/gendocs > ../../docs/tools.md)", docsPath, err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: regenerate it with `cd services/gateway && go run ./cmd/gendocs > ../../docs/tools.md` "+
			"(or go test ./services/kit/catalog -update)", docsPath)
	}
}

func TestToolNames(t *testing.T) {
	want := []string{
		"login_status", "login", "logout", "switch_identity",
		"open", "back", "forward", "reload", "get_url", "get_title",
		"snapshot", "get_text", "get_html", "get_attr", "get_styles", "eval",
		"click", "fill", "type", "press", "scroll", "hover", "focus", "close",
		"tab_list", "tab_new", "tab_switch", "tab_close", "wait", "wait_for", "screenshot", "blocked_requests",
		"secrets_list", "sovereign__list_scripts", "sovereign__reload",
		"select_option", "check", "fill_form", "drag", "mouse", "get_markdown",
		"console_messages", "network_requests", "network_request", "resize", "emulate", "pdf",
		"performance_start", "performance_stop", "performance_insight", "performance_metrics", "heap_snapshot", "screencast_start", "screencast_stop", "lighthouse_audit",
		"storage_save", "storage_list", "storage_delete",
		"handle_dialog", "upload_file", "drop", "download_list", "download_get",
		"run_browser_task",
		"fs_read", "fs_write", "fs_list", "fs_mkdir", "fs_delete", "shell_exec",
	}
	var got []string
	for _, tool := range Tools() {
		got = append(got, tool.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Tools() = %v, want %v", got, want)
	}
}

func TestInputSchemas(t *testing.T) {
	for _, tool := range Tools() {
		t.Run(tool.Name, func(t *testing.T) {
			raw := tool.InputSchema()
			var s struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
				OneOf                any                        `json:"oneOf"`
				AnyOf                any                        `json:"anyOf"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("InputSchema() = %s: %v", raw, err)
			}
			if s.Type != "object" {
				t.Errorf("type = %q, want object", s.Type)
			}
			if s.OneOf != nil || s.AnyOf != nil {
				t.Errorf("schema has a top-level oneOf/anyOf, which several clients refuse")
			}
			if s.AdditionalProperties == nil || *s.AdditionalProperties {
				t.Errorf("additionalProperties = %v, want false", s.AdditionalProperties)
			}
			if _, ok := s.Properties[SessionParam]; ok == tool.Local {
				t.Errorf("%q property: %v; want it on every browser tool and on no local tool", SessionParam, ok)
			}
			for _, r := range s.Required {
				if _, ok := s.Properties[r]; !ok {
					t.Errorf("required %q is not a property", r)
				}
			}
			for name, p := range s.Properties {
				var prop struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				}
				if err := json.Unmarshal(p, &prop); err != nil || prop.Type == "" || prop.Description == "" {
					t.Errorf("property %s = %s: want a type and a description", name, p)
				}
			}
			if tool.Description == "" || tool.Title == "" {
				t.Errorf("tool needs a title and a description")
			}
		})
	}
}

func TestElementToolsTakeRefTargetSelector(t *testing.T) {
	for _, name := range []string{"get_text", "get_html", "get_attr", "click", "fill", "type", "hover", "focus", "screenshot"} {
		tool, _ := Lookup(name)
		var names []string
		for _, p := range tool.Params() {
			names = append(names, p.Name)
		}
		for _, want := range []string{"ref", "target", "selector"} {
			if !slices.Contains(names, want) {
				t.Errorf("%s params = %v, want %q among them", name, names, want)
			}
		}
	}
}

func ref(r string) *browserv1.Element { return &browserv1.Element{By: &browserv1.Element_Ref{Ref: r}} }
func sel(s string) *browserv1.Element {
	return &browserv1.Element{By: &browserv1.Element_Selector{Selector: s}}
}

func TestParse(t *testing.T) {
	tests := []struct {
		tool    string
		args    string
		want    *browserv1.ToolRequest
		session string
		wantErr string
	}{
		{tool: "open", args: `{"url":"https://example.com"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: "https://example.com"}}}},
		{tool: "open", args: `{"url":"https://example.com","session":"sov_abcdefgh"}`, session: "sov_abcdefgh",
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: "https://example.com"}}}},
		{tool: "open", args: `{}`, wantErr: `argument "url" is required`},
		{tool: "open", args: `{"url":42}`, wantErr: `argument "url" must be a string, got a number`},
		{tool: "open", args: `{"url":"  "}`, wantErr: `argument "url" must not be empty`},
		{tool: "open", args: `{"url":"x","urls":"y"}`, wantErr: `unknown argument "urls"; this tool takes url, profile, storage, dialogs, settle_ms, snapshot, session`},
		{tool: "open", args: `{"url":"x","session":7}`, wantErr: `argument "session" must be a string`},
		{tool: "back", args: `null`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Back{Back: &browserv1.NoArgs{}}}},
		{tool: "get_url", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetUrl{GetUrl: &browserv1.NoArgs{}}}},
		{tool: "snapshot", args: `{}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Interactive: true, Compact: true}}}},
		{tool: "snapshot", args: `{"interactive":false}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Interactive: false, Compact: true}}}},
		{tool: "snapshot", args: `{"compact":"yes"}`, wantErr: `argument "compact" must be true or false, got a string`},
		{tool: "click", args: `{"ref":"e5"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("e5")}}}},
		{tool: "click", args: `{"ref":"@e5"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("e5")}}}},
		{tool: "click", args: `{"target":"@f1e2"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("f1e2")}}}},
		{tool: "click", args: `{"ref":"e5","target":"@e5"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("e5")}}}},
		{tool: "click", args: `{"ref":"e5","target":"e6"}`, wantErr: `argument "target" is an alias of ref`},
		{tool: "click", args: `{"selector":"#go"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: sel("#go")}}}},
		{tool: "click", args: `{"ref":"e5","selector":"#go"}`, wantErr: "give either ref (or target) or selector, not both"},
		{tool: "click", args: `{}`, wantErr: "say which element: give ref"},
		{tool: "click", args: `{"ref":"#go"}`, wantErr: `argument "ref" "#go" is not a snapshot ref`},
		{tool: "hover", args: `{"ref":"e1"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Hover{Hover: ref("e1")}}},
		{tool: "focus", args: `{"selector":"input"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Focus{Focus: sel("input")}}},
		{tool: "get_text", args: `{"ref":"e3"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetText{GetText: ref("e3")}}},
		{tool: "get_html", args: `{"selector":"main"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetHtml{GetHtml: sel("main")}}},
		{tool: "get_attr", args: `{"ref":"e3","attr":"href"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetAttr{GetAttr: &browserv1.GetAttr{Element: ref("e3"), Attr: "href"}}}},
		{tool: "get_attr", args: `{"ref":"e3"}`, wantErr: `argument "attr" is required`},
		{tool: "eval", args: `{"script":"1+1"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: "1+1"}}}},
		{tool: "fill", args: `{"ref":"e2","value":""}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: ref("e2"), Value: ""}}}},
		{tool: "fill", args: `{"ref":"e2"}`, wantErr: `argument "value" is required`},
		{tool: "type", args: `{"selector":"#q","value":"hi"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Element: sel("#q"), Value: "hi"}}}},
		{tool: "press", args: `{"key":"Enter"}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: "Enter"}}}},
		{tool: "scroll", args: `{"direction":"down"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Scroll{Scroll: &browserv1.Scroll{Direction: "down", Amount: 500}}}},
		{tool: "scroll", args: `{"direction":"down","amount":120}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Scroll{Scroll: &browserv1.Scroll{Direction: "down", Amount: 120}}}},
		{tool: "scroll", args: `{"direction":"sideways"}`, wantErr: `argument "direction" must be one of up, down, left, right, got "sideways"`},
		{tool: "scroll", args: `{"direction":"up","amount":1.5}`, wantErr: `argument "amount" must be a whole number, got 1.5`},
		{tool: "scroll", args: `{"direction":"up","amount":0}`, wantErr: `argument "amount" must be at least 1, got 0`},
		{tool: "close", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Close{Close: &browserv1.NoArgs{}}}},
		{tool: "tab_list", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}}},
		{tool: "tab_new", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{}}}},
		{tool: "tab_new", args: `{"url":"about:blank"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Url: "about:blank"}}}},
		{tool: "tab_switch", args: `{"index":0}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: 0, HasIndex: true}}}},
		{tool: "tab_switch", args: `{}`, wantErr: `argument "index" is required`},
		{tool: "tab_switch", args: `{"index":"1"}`, wantErr: `argument "index" must be a whole number, got a string ("1")`},
		{tool: "tab_switch", args: `{"index":-1}`, wantErr: `argument "index" must be at least 0`},
		{tool: "tab_close", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabClose{TabClose: &browserv1.TabIndex{}}}},
		{tool: "tab_close", args: `{"index":2}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabClose{TabClose: &browserv1.TabIndex{Index: 2, HasIndex: true}}}},
		{tool: "wait", args: `{}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Wait{Wait: &browserv1.Wait{Ms: 1000}}}},
		{tool: "wait", args: `{"ms":70000}`, wantErr: `argument "ms" must be at most 60000`},
		{tool: "wait_for", args: `{"selector":".done"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: &browserv1.WaitFor{Selector: ".done", TimeoutMs: 10000}}}},
		{tool: "screenshot", args: `{}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: &browserv1.Screenshot{Format: "png", Quality: 80}}}},
		{tool: "screenshot", args: `{"format":"jpeg","quality":50,"full_page":true}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: &browserv1.Screenshot{Format: "jpeg", Quality: 50, FullPage: true}}}},
		{tool: "screenshot", args: `{"target":"@e9"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Screenshot{Screenshot: &browserv1.Screenshot{Format: "png", Quality: 80, Element: ref("e9")}}}},
		{tool: "screenshot", args: `{"format":"gif"}`, wantErr: `argument "format" must be one of png, jpeg`},
		{tool: "screenshot", args: `{"ref":"e1","full_page":true}`, wantErr: `argument "full_page" cannot be combined with an element`},
		// Settling, snapshot after an action, caps.
		{tool: "click", args: `{"ref":"e5","settle_ms":0}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("e5")}}, SettleMs: proto.Int32(0)}},
		{tool: "open", args: `{"url":"https://example.com","settle_ms":1500,"snapshot":true}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: "https://example.com"}},
				SettleMs: proto.Int32(1500), SnapshotAfter: browserv1.SnapshotAfter_SNAPSHOT_AFTER_FULL}},
		{tool: "fill", args: `{"ref":"e2","value":"x","snapshot":"diff"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: ref("e2"), Value: "x"}},
				SnapshotAfter: browserv1.SnapshotAfter_SNAPSHOT_AFTER_DIFF}},
		{tool: "press", args: `{"key":"Enter","snapshot":false}`, want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: "Enter"}}}},
		{tool: "tab_new", args: `{"snapshot":"true"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{}}, SnapshotAfter: browserv1.SnapshotAfter_SNAPSHOT_AFTER_FULL}},
		{tool: "click", args: `{"ref":"e5","snapshot":"yes"}`, wantErr: `argument "snapshot" must be one of false, true, diff, got "yes"`},
		{tool: "click", args: `{"ref":"e5","settle_ms":-1}`, wantErr: `argument "settle_ms" must be at least 0`},
		{tool: "click", args: `{"ref":"e5","settle_ms":60001}`, wantErr: `argument "settle_ms" must be at most 60000`},
		{tool: "get_text", args: `{"ref":"e5","settle_ms":10}`, wantErr: `unknown argument "settle_ms"`},
		{tool: "snapshot", args: `{"ref":"@e7","max_chars":500}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Snapshot{Snapshot: &browserv1.Snapshot{Interactive: true, Compact: true, Ref: "e7"}}, MaxChars: 500}},
		{tool: "snapshot", args: `{"ref":"#main"}`, wantErr: `argument "ref" "#main" is not a snapshot ref`},
		{tool: "snapshot", args: `{"max_chars":0}`, wantErr: `argument "max_chars" must be at least 1`},
		{tool: "get_html", args: `{"selector":"body","max_chars":5000001}`, wantErr: `argument "max_chars" must be at most 5000000`},
		{tool: "eval", args: `{"script":"1","max_chars":10}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: "1"}}, MaxChars: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"/"+tt.args, func(t *testing.T) {
			call, ok := checkParse(t, tt.tool, tt.args, tt.want, tt.wantErr)
			if ok && call.Session != tt.session {
				t.Errorf("Parse(%s).Session = %q, want %q", tt.args, call.Session, tt.session)
			}
		})
	}
}

func TestParseRejectsNonObjects(t *testing.T) {
	tool, _ := Lookup("get_url")
	for _, raw := range []any{"x", []any{1}, 3.0} {
		if _, err := tool.Parse(raw); err == nil || !strings.Contains(err.Error(), "arguments must be a JSON object") {
			t.Errorf("Parse(%v) error = %v, want arguments must be a JSON object", raw, err)
		}
	}
}

func TestWait(t *testing.T) {
	tests := []struct {
		tool, args string
		want       int64
	}{
		{"wait", `{"ms":2500}`, 2500},
		{"wait_for", `{"selector":"x","timeout":3000}`, 3000},
		{"click", `{"ref":"e1"}`, 0},
	}
	for _, tt := range tests {
		tool, _ := Lookup(tt.tool)
		var raw any
		_ = json.Unmarshal([]byte(tt.args), &raw)
		call, err := tool.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Wait(call.Request); got != tt.want {
			t.Errorf("Wait(%s %s) = %d, want %d", tt.tool, tt.args, got, tt.want)
		}
	}
}
