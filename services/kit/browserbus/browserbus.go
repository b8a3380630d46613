// Package browserbus is the browser workers' contract on the bus, declared
// here once for the workers that serve it and for the gateway, the e2e
// harness and the bench that call it:
//
//	sov.browser.open          open a session (a queue group of the workers with room)
//	sov.browser.restore       restore a lost session from its checkpoint (the same queue group)
//	sov.browser.load          every worker's load, published (not a request)
//	sov.browser.http          send one call of a custom HTTP tool (a queue group of every worker)
//	sov.browser.storage       import or export a saved storage (a queue group of the workers with the key)
//	sov.browser.w.<id>.call   run a tool in one of worker id's sessions
//	sov.browser.w.<id>.close  close a session
//	sov.browser.w.<id>.ping   liveness and load
//	sov.browser.w.<id>.open   open a session on this worker (placed by the gateway)
//	sov.browser.w.<id>.restore restore a session on this worker (placed by the gateway)
package browserbus

import (
	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// WorkerService is the micro service name every browser worker registers
// (its discovery subject is $SRV.PING.sovereign-browser); its metadata
// "worker_id" names the worker.
const WorkerService = "sovereign-browser"

var group = []string{"browser"}

// The endpoints any worker may answer.
var (
	Open    = bus.Endpoint[*browserv1.OpenSessionRequest, *browserv1.OpenSessionResponse]{Group: group, Name: "open"}
	Restore = bus.Endpoint[*browserv1.RestoreSessionRequest, *browserv1.OpenSessionResponse]{Group: group, Name: "restore"}
	HTTP    = bus.Endpoint[*browserv1.HTTPToolRequest, *browserv1.HTTPToolResponse]{Group: group, Name: "http"}
	Storage = bus.Endpoint[*browserv1.StorageTransferRequest, *browserv1.StorageTransferResponse]{Group: group, Name: "storage"}
)

// Load is the subject workers publish their load on (WorkerLoad).
func Load(c *bus.Conn) string { return c.Subject("browser", "load") }

// Worker is the endpoints of one worker.
type Worker struct {
	Call    bus.Endpoint[*browserv1.ToolRequest, *browserv1.ToolResult]
	Close   bus.Endpoint[*browserv1.CloseSessionRequest, *browserv1.CloseSessionResponse]
	Ping    bus.Endpoint[*browserv1.PingRequest, *browserv1.PingResponse]
	Open    bus.Endpoint[*browserv1.OpenSessionRequest, *browserv1.OpenSessionResponse]
	Restore bus.Endpoint[*browserv1.RestoreSessionRequest, *browserv1.OpenSessionResponse]
}

// Of returns the endpoints of the worker whose id is id.
func Of(id string) Worker {
	g := workerGroup(id)
	return Worker{
		Call:    bus.Endpoint[*browserv1.ToolRequest, *browserv1.ToolResult]{Group: g, Name: "call"},
		Close:   bus.Endpoint[*browserv1.CloseSessionRequest, *browserv1.CloseSessionResponse]{Group: g, Name: "close"},
		Ping:    bus.Endpoint[*browserv1.PingRequest, *browserv1.PingResponse]{Group: g, Name: "ping"},
		Open:    bus.Endpoint[*browserv1.OpenSessionRequest, *browserv1.OpenSessionResponse]{Group: g, Name: "open"},
		Restore: bus.Endpoint[*browserv1.RestoreSessionRequest, *browserv1.OpenSessionResponse]{Group: g, Name: "restore"},
	}
}

// WorkerGroup is the subject of worker id's micro group: sov.browser.w.<id>.
func WorkerGroup(c *bus.Conn, id string) string { return c.Subject(workerGroup(id)...) }

func workerGroup(id string) []string { return []string{"browser", "w", id} }
