package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

func TestParseFormTools(t *testing.T) {
	tests := []struct {
		tool    string
		args    string
		want    *browserv1.ToolRequest
		wantErr string
	}{
		{tool: "fill", args: `{"ref":"e2","value":"kittens","submit":true}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: ref("e2"), Value: "kittens", Submit: true}}}},
		{tool: "type", args: `{"ref":"e2","value":"x","submit":true}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Element: ref("e2"), Value: "x", Submit: true}}}},
		{tool: "click", args: `{"ref":"e5","button":"right","click_count":2,"modifiers":["Shift","Alt"]}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Click{Element: ref("e5"), Button: "right", ClickCount: 2, Modifiers: []string{"Shift", "Alt"}}}}},
		{tool: "click", args: `{"ref":"e5","modifiers":["Hyper"]}`, wantErr: `argument "modifiers[0]" must be one of Alt, Control, Meta, Shift, got "Hyper"`},
		{tool: "click", args: `{"ref":"e5","modifiers":"Shift"}`, wantErr: `argument "modifiers" must be an array, got a string`},
		{tool: "click", args: `{"ref":"e5","click_count":4}`, wantErr: `argument "click_count" must be at most 3`},
		{tool: "press", args: `{"key":"Shift","action":"down"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Press{Press: &browserv1.Press{Key: "Shift", Action: "down"}}}},
		{tool: "press", args: `{"key":"a","action":"hold"}`, wantErr: `argument "action" must be one of press, down, up`},
		{tool: "select_option", args: `{"ref":"e3","values":["Medium"]}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SelectOption{SelectOption: &browserv1.SelectOption{Element: ref("e3"), Values: []string{"Medium"}}}}},
		{tool: "select_option", args: `{"ref":"e3","values":[]}`, wantErr: `argument "values" must name at least one option`},
		{tool: "select_option", args: `{"ref":"e3","values":[1]}`, wantErr: `argument "values[0]" must be a string, got a number`},
		{tool: "select_option", args: `{"values":["a"]}`, wantErr: `say which element`},
		{tool: "check", args: `{"selector":"#agree"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Check{Check: &browserv1.Check{Element: sel("#agree"), Checked: true}}}},
		{tool: "check", args: `{"ref":"e4","checked":false}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Check{Check: &browserv1.Check{Element: ref("e4")}}}},
		{tool: "fill_form", args: `{"fields":[{"ref":"e1","value":"Ada"},{"selector":"#agree","checked":true},{"ref":"e3","values":["a","b"]}]}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_FillForm{FillForm: &browserv1.FillForm{Fields: []*browserv1.FormField{
				{Element: ref("e1"), Value: proto.String("Ada")},
				{Element: sel("#agree"), Checked: proto.Bool(true)},
				{Element: ref("e3"), Values: []string{"a", "b"}},
			}}}}},
		{tool: "fill_form", args: `{"fields":[]}`, wantErr: `argument "fields" must hold at least one field`},
		{tool: "fill_form", args: `{"fields":[{"ref":"e1"}]}`, wantErr: `argument "fields[0]" needs exactly one of value`},
		{tool: "fill_form", args: `{"fields":[{"value":"x"}]}`, wantErr: `argument "fields[0]" say which element`},
		{tool: "fill_form", args: `{"fields":[{"ref":"e1","value":"x","colour":"red"}]}`, wantErr: `argument "fields[0]" unknown argument "colour"`},
		{tool: "fill_form", args: `{"fields":[{"ref":"e1","checked":"yes"}]}`, wantErr: `argument "fields[0].checked" must be true or false`},
		{tool: "fill_form", args: `{"fields":[` + strings.Repeat(`{"ref":"e1","value":"x"},`, maxFormFields) + `{"ref":"e1","value":"x"}]}`,
			wantErr: `argument "fields" may hold at most 100 items, got 101`},
		{tool: "drag", args: `{"from":"@e1","to":"#list li:last-child"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drag{Drag: &browserv1.Drag{From: ref("e1"), To: sel("#list li:last-child")}}}},
		{tool: "drag", args: `{"from":"e1"}`, wantErr: `argument "to" is required`},
		{tool: "mouse", args: `{"action":"wheel","x":10,"y":20.5,"dy":300}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Mouse{Mouse: &browserv1.Mouse{Action: "wheel", X: 10, Y: 20.5, Dy: 300, Button: "left"}}}},
		{tool: "mouse", args: `{"action":"click","x":1,"y":2,"dy":3}`, wantErr: `argument "dx" and dy are for action wheel only`},
		{tool: "mouse", args: `{"action":"click","x":"1","y":2}`, wantErr: `argument "x" must be a number`},
		{tool: "get_markdown", args: `{}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{}}}},
		{tool: "get_markdown", args: `{"selector":"article","max_chars":100}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{Element: sel("article")}}, MaxChars: 100}},
		{tool: "eval", args: `{"script":"(el) => el.id","ref":"e7"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: "(el) => el.id", Element: ref("e7")}}}},
		{tool: "wait_for", args: `{"text":"Done"}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: &browserv1.WaitFor{Text: "Done", TimeoutMs: 10000}}}},
		{tool: "wait_for", args: `{"url":"**/done","timeout":500}`,
			want: &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_WaitFor{WaitFor: &browserv1.WaitFor{Url: "**/done", TimeoutMs: 500}}}},
		{tool: "wait_for", args: `{}`, wantErr: `give exactly one condition`},
		{tool: "wait_for", args: `{"text":"a","selector":"#b"}`, wantErr: `give exactly one condition`},
		{tool: "wait_for", args: `{"text_gone":" "}`, wantErr: `argument "text_gone" must not be empty`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"/"+tt.args[:min(len(tt.args), 60)], func(t *testing.T) {
			checkParse(t, tt.tool, tt.args, tt.want, tt.wantErr)
		})
	}
}

// checkParse parses args for tool and checks the request it builds, or
// the error. ok says that it built one.
func checkParse(t *testing.T, name, args string, want *browserv1.ToolRequest, wantErr string) (call Call, ok bool) {
	t.Helper()
	tool, found := Lookup(name)
	if !found {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	var raw any
	if err := json.Unmarshal([]byte(args), &raw); err != nil {
		t.Fatal(err)
	}
	call, err := tool.Parse(raw)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Parse(%s) error = %v, want one containing %q", args, err, wantErr)
		}
		return call, false
	}
	if err != nil {
		t.Fatalf("Parse(%s) error = %v", args, err)
	}
	if !proto.Equal(call.Request, want) {
		t.Errorf("Parse(%s) = %s, want %s", args, prototext.Format(call.Request), prototext.Format(want))
	}
	return call, true
}

// TestFormSchemas checks that arrays and objects reach the JSON Schema.
func TestFormSchemas(t *testing.T) {
	tool, _ := Lookup("fill_form")
	var schema struct {
		Properties map[string]struct {
			Type     string `json:"type"`
			MaxItems int    `json:"maxItems"`
			Items    struct {
				Type                 string         `json:"type"`
				Properties           map[string]any `json:"properties"`
				AdditionalProperties bool           `json:"additionalProperties"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tool.InputSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	f := schema.Properties["fields"]
	if f.Type != "array" || f.MaxItems != maxFormFields || f.Items.Type != "object" || len(f.Items.Properties) != 5 {
		t.Errorf("fill_form fields schema = %+v", f)
	}
}
