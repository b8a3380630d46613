package gateway

import "github.com/sovereign-fleet/sovereign/services/gateway/internal/state"

// StoreOf exposes a gateway's session store to the tests.
func StoreOf(g *Gateway) *state.Store { return g.store }

// OpenQueueLen is how many calls wait in a gateway's open queue.
func OpenQueueLen(g *Gateway) int { return g.openq.Len() }

// RunningCalls is how many tool calls a gateway is running now.
func RunningCalls(g *Gateway) int { return g.tools.Running() }

// StorageMigrated is closed when a gateway's legacy saved storage
// migration has ended.
func StorageMigrated(g *Gateway) <-chan struct{} { return g.migrated }
