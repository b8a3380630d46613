package extend

import (
	"encoding/json"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/scripts"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// TestScriptToolSession: a script tool is listed with the session argument
// (a 2026 client names the browser session of its inner calls), and an
// agent run sees it without (a run's session is its request's).
func TestScriptToolSession(t *testing.T) {
	tool := scriptTool(scripts.Tool{Name: "shop__find", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)})
	props := func(raw json.RawMessage) map[string]any {
		var m struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m.Properties
	}
	if p := props(tool.InputSchema); p["q"] == nil || p[catalog.SessionParam] == nil {
		t.Errorf("scriptTool schema properties = %v, want q and %s", p, catalog.SessionParam)
	}
	if p := props(withoutSession(tool.InputSchema)); p["q"] == nil || p[catalog.SessionParam] != nil {
		t.Errorf("withoutSession properties = %v, want q only", p)
	}
	if tool.Description != "Script tool shop__find." || tool.Annotations.Title != "shop__find" {
		t.Errorf("scriptTool = %+v, want the default description and the name as title", tool)
	}
}
