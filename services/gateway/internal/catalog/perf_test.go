package catalog

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// TestPerfParse: the performance and memory tools' arguments (and
// emulate's media ones) become their requests; a bad one is refused naming
// it.
func TestPerfParse(t *testing.T) {
	settle := int32(0)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want *browserv1.ToolRequest
	}{
		{"performance_start", map[string]any{"reload": true, "settle_ms": float64(0)},
			&browserv1.ToolRequest{SettleMs: &settle, Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}}},
		{"performance_start", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{}}}},
		{"performance_stop", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStop{PerformanceStop: &browserv1.NoArgs{}}}},
		{"emulate", map[string]any{"media": "print", "forced_colors": "active", "contrast": "less"},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: &browserv1.Emulate{Media: "print", ForcedColors: "active", Contrast: "less"}}}},
		{"heap_snapshot", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HeapSnapshot{HeapSnapshot: &browserv1.NoArgs{}}}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			tool, _ := Lookup(tc.tool)
			c, err := tool.Parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(c.Request, tc.want) {
				t.Errorf("Parse(%v) = %v, want %v", tc.args, c.Request, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"performance_start", map[string]any{"reload": "yes"}, `"reload"`},
		{"emulate", map[string]any{"media": "tv"}, `"media"`},
		{"emulate", map[string]any{"contrast": "high"}, `"contrast"`},
		{"emulate", map[string]any{"forced_colors": "on"}, `"forced_colors"`},
	} {
		tool, _ := Lookup(tc.tool)
		if _, err := tool.Parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
