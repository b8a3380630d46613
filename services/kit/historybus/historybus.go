// Package historybus is the history service's contract on the bus: its
// endpoints (sov.history.audit.<name>, sov.history.chat.<name>), declared
// here once for history that serves them and for the gateway, the agent
// and the CLI that call them.
package historybus

import (
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var (
	audit = []string{"history", "audit"}
	chat  = []string{"history", "chat"}
)

// The audit trail's endpoint (operators only).
var AuditQuery = bus.Endpoint[*historyv1.AuditQuery, *historyv1.AuditPage]{Group: audit, Name: "query"}

// The chat store's endpoints.
var (
	ChatCreate = bus.Endpoint[*historyv1.CreateChatSessionRequest, *historyv1.ChatSession]{Group: chat, Name: "create"}
	ChatList   = bus.Endpoint[*historyv1.ListChatSessionsRequest, *historyv1.ListChatSessionsResponse]{Group: chat, Name: "list"}
	ChatGet    = bus.Endpoint[*historyv1.GetChatSessionRequest, *historyv1.GetChatSessionResponse]{Group: chat, Name: "get"}
	ChatAppend = bus.Endpoint[*historyv1.AppendChatMessagesRequest, *historyv1.AppendChatMessagesResponse]{Group: chat, Name: "append"}
	ChatDelete = bus.Endpoint[*historyv1.DeleteChatSessionRequest, *historyv1.DeleteChatSessionResponse]{Group: chat, Name: "delete"}
)

// AuditGroup is the subject of the audit micro group: sov.history.audit.
func AuditGroup(c *bus.Conn) string { return c.Subject(audit...) }

// ChatGroup is the subject of the chat micro group: sov.history.chat.
func ChatGroup(c *bus.Conn) string { return c.Subject(chat...) }
