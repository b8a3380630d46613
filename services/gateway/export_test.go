package gateway

import (
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
)

// StoreOf exposes a gateway's session store to the tests.
func StoreOf(g *Gateway) *state.Store { return g.store }

// OpenQueueLen is how many calls wait in a gateway's open queue.
func OpenQueueLen(g *Gateway) int { return g.capacity.Waiting() }

// RunningCalls is how many tool calls a gateway is running now.
func RunningCalls(g *Gateway) int { return g.tools.Running() }

// StorageMigrated is closed when a gateway's legacy saved storage
// migration has ended.
func StorageMigrated(g *Gateway) <-chan struct{} { return g.migrated }

// AddProbe registers tool name with handler h on a gateway's dispatcher,
// behind its middleware and hidden from MCP clients: sov.tools.call calls
// it, so a test sees the Call a transport builds.
func AddProbe(g *Gateway, name string, h dispatch.Handler) {
	g.tools.Add(dispatch.Entry{Kind: dispatch.Local, Tool: dispatch.Tool{Name: name}, Handler: h, Hidden: true})
}
