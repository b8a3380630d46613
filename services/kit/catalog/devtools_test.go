package catalog

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// TestDevtoolsParse: the developer, performance and memory tools'
// arguments become their requests, and bad ones are refused naming the
// argument.
func TestDevtoolsParse(t *testing.T) {
	off := false
	noSettle := int32(0)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want *browserv1.ToolRequest
	}{
		{"console_messages", map[string]any{"level": "error", "since": float64(4), "limit": float64(10), "max_chars": float64(500)},
			&browserv1.ToolRequest{MaxChars: 500, Tool: &browserv1.ToolRequest_ConsoleMessages{ConsoleMessages: &browserv1.ConsoleMessages{Level: "error", Since: 4, Limit: 10}}}},
		{"network_requests", map[string]any{"filter": "/api/", "status": "4xx", "resource_type": "Fetch"},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequests{NetworkRequests: &browserv1.NetworkRequests{Filter: "/api/", Status: "4xx", ResourceType: "Fetch"}}}},
		{"network_request", map[string]any{"id": " r3 ", "part": "request", "max_bytes": float64(100)},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_NetworkRequest{NetworkRequest: &browserv1.NetworkRequestBody{Id: "r3", Part: "request", MaxBytes: 100}}}},
		{"resize", map[string]any{"width": float64(800), "height": float64(600)},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Resize{Resize: &browserv1.Resize{Width: 800, Height: 600}}}},
		{"emulate", map[string]any{"device": "iPhone 13", "geolocation": "52.5, 13.4", "offline": false},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: &browserv1.Emulate{Device: "iPhone 13",
				Geolocation: &browserv1.Geolocation{Latitude: 52.5, Longitude: 13.4}, Offline: &off}}}},
		{"pdf", map[string]any{"format": "A4", "landscape": true},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Pdf{Pdf: &browserv1.Pdf{Format: "A4", Landscape: true}}}},
		{"emulate", map[string]any{"media": "print", "forced_colors": "active", "contrast": "less"},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Emulate{Emulate: &browserv1.Emulate{Media: "print", ForcedColors: "active", Contrast: "less"}}}},
		{"performance_start", map[string]any{"reload": true, "settle_ms": float64(0)},
			&browserv1.ToolRequest{SettleMs: &noSettle, Tool: &browserv1.ToolRequest_PerformanceStart{PerformanceStart: &browserv1.PerformanceStart{Reload: true}}}},
		{"performance_stop", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceStop{PerformanceStop: &browserv1.NoArgs{}}}},
		{"performance_metrics", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_PerformanceMetrics{PerformanceMetrics: &browserv1.NoArgs{}}}},
		{"screencast_start", map[string]any{"max_frames": float64(50), "quality": float64(80)},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ScreencastStart{ScreencastStart: &browserv1.ScreencastStart{MaxFrames: 50, Quality: 80}}}},
		{"screencast_stop", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_ScreencastStop{ScreencastStop: &browserv1.NoArgs{}}}},
		{"heap_snapshot", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_HeapSnapshot{HeapSnapshot: &browserv1.NoArgs{}}}},
		{"lighthouse_audit", map[string]any{},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_LighthouseAudit{LighthouseAudit: &browserv1.LighthouseAudit{Mode: "navigation", Device: "desktop"}}}},
		{"lighthouse_audit", map[string]any{"mode": "snapshot", "device": "mobile", "report": "html"},
			&browserv1.ToolRequest{Tool: &browserv1.ToolRequest_LighthouseAudit{LighthouseAudit: &browserv1.LighthouseAudit{Mode: "snapshot", Device: "mobile", Report: "html"}}}},
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
		{"console_messages", map[string]any{"level": "loud"}, `"level"`},
		{"console_messages", map[string]any{"limit": float64(501)}, `"limit"`},
		{"network_request", map[string]any{"id": " "}, `"id" must not be empty`},
		{"resize", map[string]any{"width": float64(50), "height": float64(600)}, `"width"`},
		{"emulate", map[string]any{}, "say what to emulate"},
		{"emulate", map[string]any{"geolocation": "here,there"}, "must be numbers"},
		{"emulate", map[string]any{"geolocation": "95,10"}, "latitude must be -90 to 90"},
		{"pdf", map[string]any{"format": "B7"}, `"format"`},
		{"emulate", map[string]any{"media": "tv"}, `"media"`},
		{"emulate", map[string]any{"contrast": "high"}, `"contrast"`},
		{"emulate", map[string]any{"forced_colors": "on"}, `"forced_colors"`},
		{"performance_start", map[string]any{"reload": "yes"}, `"reload"`},
		{"screencast_start", map[string]any{"max_frames": float64(1001)}, `"max_frames"`},
		{"screencast_start", map[string]any{"quality": float64(0)}, `"quality"`},
	} {
		t.Run(tc.tool+" bad", func(t *testing.T) {
			tool, _ := Lookup(tc.tool)
			_, err := tool.Parse(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%v) = %v, want an error with %s", tc.args, err, tc.want)
			}
		})
	}
}
