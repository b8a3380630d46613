package browser

import (
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// TestNavigatesFormTools: a form tool's change handler, drop or click may
// navigate, and fill or type with submit sends a form, so a navigation
// the policy blocks is their error; plain fill and read-only tools not.
func TestNavigatesFormTools(t *testing.T) {
	t.Parallel()
	el := &browserv1.Element{By: &browserv1.Element_Selector{Selector: "#x"}}
	for _, tc := range []struct {
		req  *browserv1.ToolRequest
		want bool
	}{
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_SelectOption{SelectOption: &browserv1.SelectOption{Element: el}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Check{Check: &browserv1.Check{Element: el}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_FillForm{FillForm: &browserv1.FillForm{}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Drag{Drag: &browserv1.Drag{From: el, To: el}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Mouse{Mouse: &browserv1.Mouse{Action: "click"}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: el, Submit: true}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Type{Type: &browserv1.Fill{Element: el, Submit: true}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Fill{Fill: &browserv1.Fill{Element: el}}}, false},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetMarkdown{GetMarkdown: &browserv1.GetMarkdown{}}}, false},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}}, true},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{}}}, false},
		{&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HeapSnapshot{HeapSnapshot: &browserv1.NoArgs{}}}, false},
	} {
		tool, _ := catalog.ForRequest(tc.req)
		if got := tool.CanNavigate(tc.req); got != tc.want {
			t.Errorf("CanNavigate(%v) = %v, want %v", tc.req, got, tc.want)
		}
	}
}
