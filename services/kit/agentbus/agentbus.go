// Package agentbus is the agent orchestrator's contract on the bus: its
// endpoints (sov.agent.run.<name>, sov.agent.settings.<name>) and the
// subject of run events, declared here once for the agent that serves and
// publishes them and for the gateway that calls and follows them.
package agentbus

import (
	"context"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var (
	run      = []string{"agent", "run"}
	settings = []string{"agent", "settings"}
)

// The run endpoints (sov.agent.run.*).
var (
	Start  = bus.Endpoint[*agentv1.StartRunRequest, *agentv1.Run]{Group: run, Name: "start"}
	Get    = bus.Endpoint[*agentv1.GetRunRequest, *agentv1.Run]{Group: run, Name: "get"}
	Cancel = bus.Endpoint[*agentv1.CancelRunRequest, *agentv1.Run]{Group: run, Name: "cancel"}
	List   = bus.Endpoint[*agentv1.ListRunsRequest, *agentv1.ListRunsResponse]{Group: run, Name: "list"}
)

// The settings endpoints (sov.agent.settings.*).
var (
	GetSettings = bus.Endpoint[*agentv1.GetSettingsRequest, *agentv1.Settings]{Group: settings, Name: "get"}
	PutSettings = bus.Endpoint[*agentv1.PutSettingsRequest, *agentv1.Settings]{Group: settings, Name: "put"}
)

// RunGroup is the subject of the run micro group: sov.agent.run.
func RunGroup(c *bus.Conn) string { return c.Subject(run...) }

// SettingsGroup is the subject of the settings micro group:
// sov.agent.settings.
func SettingsGroup(c *bus.Conn) string { return c.Subject(settings...) }

// RunEvents is where the agent publishes a run's record each time it
// changes: sov.agent.run.event.<id>.
func RunEvents(c *bus.Conn, id string) string { return c.Subject("agent", "run", "event", id) }

// Serving reports whether an agent runs: anything answers its get
// endpoint (see bus.Conn.Serving; give ctx a short deadline).
func Serving(ctx context.Context, c *bus.Conn) bool { return c.Serving(ctx, Get.Subject(c)) }
