package page

import (
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// toolName is the catalog name of req's tool, for test names and
// messages.
func toolName(req *browserv1.ToolRequest) string {
	t, _ := catalog.ForRequest(req)
	return t.Name
}

// TestHandlersMatchCatalog: every tab tool of the catalog has a handler
// here, and every handler is a catalog tool's. The session tools that
// act in a tab (resize, emulate, upload_file, drop) have one too; the
// browser package's TestEveryToolHasOneHandler holds the session's side.
func TestHandlersMatchCatalog(t *testing.T) {
	for _, tool := range catalog.Tools() {
		if tool.ForWorker() && tool.Level == catalog.OnTab && !Handles(tool.Name) {
			t.Errorf("tab tool %s has no handler in internal/page", tool.Name)
		}
	}
	for name := range handlers {
		if tool, ok := catalog.Lookup(name); !ok || !tool.ForWorker() {
			t.Errorf("handler %s is not a worker tool of the catalog", name)
		}
	}
}
