package catalog

import (
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// TestPerfParse: the performance and memory tools' arguments become their
// requests; a bad one is refused naming it.
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
	tool, _ := Lookup("performance_start")
	if _, err := tool.Parse(map[string]any{"reload": "yes"}); err == nil {
		t.Errorf(`Parse(reload "yes") = nil, want an error naming reload`)
	}
}
