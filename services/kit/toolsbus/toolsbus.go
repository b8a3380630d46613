// Package toolsbus is the gateway's tool dispatcher on the bus: its
// endpoints (sov.tools.list, sov.tools.call), declared here once for the
// gateway that serves them and for the agent that calls them.
package toolsbus

import (
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var group = []string{"tools"}

// The dispatcher's endpoints.
var (
	// List returns the tool catalog (the agent's tools with ForAgent).
	List = bus.Endpoint[*toolsv1.ListToolsRequest, *toolsv1.ListToolsResponse]{Group: group, Name: "list"}
	// Call runs one tool for a caller, through the same policy, approvals
	// and audit as an MCP call.
	Call = bus.Endpoint[*toolsv1.CallToolRequest, *toolsv1.CallToolResponse]{Group: group, Name: "call"}
)

// Group is the subject of the dispatcher's micro group: sov.tools.
func Group(c *bus.Conn) string { return c.Subject(group...) }
