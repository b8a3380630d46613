package catalog

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// requestFor returns a request whose tool oneof has fd set to an empty
// message.
func requestFor(fd protoreflect.FieldDescriptor) *browserv1.ToolRequest {
	req := &browserv1.ToolRequest{}
	m := req.ProtoReflect()
	m.Set(fd, m.NewField(fd))
	return req
}

// TestForRequest pins the mapping between the ToolRequest oneof and the
// catalog both ways: every oneof field finds the descriptor of its name,
// and every tool that builds a worker request has its oneof field.
func TestForRequest(t *testing.T) {
	fields := toolOneof.Fields()
	names := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		names = append(names, string(fd.Name()))
		got, ok := ForRequest(requestFor(fd))
		if !ok || got.Name != string(fd.Name()) {
			t.Errorf("ForRequest(%s) = %q, %v; want %q, true", fd.Name(), got.Name, ok, fd.Name())
		}
	}
	for _, tool := range Tools() {
		if !tool.ForWorker() {
			continue
		}
		if !slices.Contains(names, tool.Name) {
			t.Errorf("tool %s has no field in ToolRequest's oneof tool", tool.Name)
		}
	}
	if _, ok := ForRequest(&browserv1.ToolRequest{}); ok {
		t.Error("ForRequest(no tool) = true, want false")
	}
	if _, ok := Lookup("set_identity"); ok {
		t.Error("set_identity is listed as a tool; it is a request only the gateway sends")
	}
}

// TestTraits pins the tools each trait holds for (a call with empty
// arguments), and the calls whose arguments decide.
func TestTraits(t *testing.T) {
	holds := func(trait func(Tool, *browserv1.ToolRequest) bool) []string {
		var out []string
		for i := range toolOneof.Fields().Len() {
			req := requestFor(toolOneof.Fields().Get(i))
			if tool, _ := ForRequest(req); trait(tool, req) {
				out = append(out, tool.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		trait string
		of    func(Tool, *browserv1.ToolRequest) bool
		want  []string
	}{
		{"Acts", func(t Tool, r *browserv1.ToolRequest) bool { return t.Acts.Of(r) }, []string{"back", "check", "click", "drag", "drop",
			"emulate", "fill", "fill_form", "forward", "handle_dialog", "mouse", "open", "press", "reload", "resize", "select_option",
			"tab_new", "type", "upload_file"}},
		{"Navigates", func(t Tool, r *browserv1.ToolRequest) bool { return t.Navigates.Of(r) }, []string{"back", "forward", "open", "reload"}},
		{"CanNavigate", Tool.CanNavigate, []string{"back", "check", "click", "drag", "drop", "fill_form", "forward", "handle_dialog",
			"lighthouse_audit", "mouse", "open", "press", "reload", "select_option"}},
		{"WithDialog", func(t Tool, _ *browserv1.ToolRequest) bool { return t.WithDialog }, []string{"back", "forward", "get_title",
			"get_url", "handle_dialog", "open", "reload", "wait"}},
		{"Storage", func(t Tool, r *browserv1.ToolRequest) bool { return t.Storage.Of(r) }, []string{"storage_delete", "storage_list", "storage_save"}},
		{"Secrets", func(t Tool, _ *browserv1.ToolRequest) bool { return t.Secrets.In != nil }, []string{"fill", "fill_form",
			"handle_dialog", "open", "tab_new", "type"}},
	} {
		if got := holds(tc.of); !slices.Equal(got, tc.want) {
			t.Errorf("%s holds for %v, want %v", tc.trait, got, tc.want)
		}
	}

	// The traits that the arguments decide.
	for _, tc := range []struct {
		name string
		req  *browserv1.ToolRequest
		of   func(Tool, *browserv1.ToolRequest) bool
		want bool
	}{
		{"fill submit navigates", &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Submit: true}}}, Tool.CanNavigate, true},
		{"type submit navigates", &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Submit: true}}}, Tool.CanNavigate, true},
		{"performance_start reload navigates",
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}},
			func(t Tool, r *browserv1.ToolRequest) bool { return t.Navigates.Of(r) && t.Acts.Of(r) }, true},
		{"lighthouse snapshot stays",
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_LighthouseAudit{LighthouseAudit: &browserv1.LighthouseAudit{Mode: " Snapshot"}}},
			Tool.CanNavigate, false},
		{"open with storage", &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Storage: "s"}}},
			func(t Tool, r *browserv1.ToolRequest) bool { return t.Storage.Of(r) }, true},
		{"tab_new with storage", &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Storage: "s"}}},
			func(t Tool, r *browserv1.ToolRequest) bool { return t.Storage.Of(r) }, true},
	} {
		tool, _ := ForRequest(tc.req)
		if got := tc.of(tool, tc.req); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestActingToolsTakeSettle holds the schema to Acts and MaxChars: a tool
// that may act takes settle_ms and snapshot, a capped one max_chars.
func TestActingToolsTakeSettle(t *testing.T) {
	for _, tool := range Tools() {
		var names []string
		for _, p := range tool.Params() {
			names = append(names, p.Name)
		}
		if got := slices.Contains(names, "settle_ms") && slices.Contains(names, "snapshot"); got != (tool.Acts != nil) {
			t.Errorf("%s takes settle_ms and snapshot = %v, want %v", tool.Name, got, tool.Acts != nil)
		}
		if got := slices.Contains(names, "max_chars"); got != (tool.MaxChars > 0) {
			t.Errorf("%s takes max_chars = %v, want %v", tool.Name, got, tool.MaxChars > 0)
		}
	}
}
