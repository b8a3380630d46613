package browser

import (
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// TestEveryToolHasOneHandler: every request the worker serves (each tool
// of ToolRequest's oneof, whose descriptor says at which level it runs)
// has exactly one handler, at that level, and no handler lacks a catalog
// entry.
func TestEveryToolHasOneHandler(t *testing.T) {
	oneof := (&browserv1.ToolRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("tool")
	served := map[string]bool{}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		req := &browserv1.ToolRequest{}
		req.ProtoReflect().Set(fd, req.ProtoReflect().NewField(fd))
		tool, ok := catalog.ForRequest(req)
		if !ok {
			t.Errorf("ToolRequest field %s has no catalog descriptor", fd.Name())
			continue
		}
		served[tool.Name] = true
		_, onSession := sessionTools[tool.Name]
		_, onWorker := workerTools[tool.Name]
		// A session tool may run in a tab too (resize, emulate,
		// upload_file, drop go through page.Tab), so the tab's
		// handlers count only for the tab tools.
		onTab := tool.Level == catalog.OnTab && page.Handles(tool.Name)
		levels := map[catalog.Level]bool{catalog.OnTab: onTab, catalog.OnSession: onSession, catalog.OnWorker: onWorker}
		n := 0
		for _, has := range levels {
			if has {
				n++
			}
		}
		if n != 1 || !levels[tool.Level] {
			t.Errorf("%s (level %d) has handlers on tab %v, session %v, worker %v; want exactly one, at its level",
				tool.Name, tool.Level, page.Handles(tool.Name), onSession, onWorker)
		}
	}
	for _, tool := range catalog.Tools() {
		if tool.ForWorker() && !served[tool.Name] {
			t.Errorf("catalog tool %s has no ToolRequest field", tool.Name)
		}
	}
	for name := range sessionTools {
		if !served[name] {
			t.Errorf("session handler %s has no catalog entry", name)
		}
	}
	for name := range workerTools {
		if !served[name] {
			t.Errorf("worker handler %s has no catalog entry", name)
		}
	}
}
