package store

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// CheckRole validates a chat message's role against Roles.
func CheckRole(role string) error {
	if !slices.Contains(Roles, role) {
		return fmt.Errorf("%w: chat message role %q is not one of %s", ErrInvalid, role, strings.Join(Roles, ", "))
	}
	return nil
}

// NewChatSessionID returns id, cleaned, or a new UUID when it is empty.
func NewChatSessionID(id string) string {
	if id == "" {
		return uuid.NewString()
	}
	return Clean(id)
}

// SessionID cleans a chat session id given to a lookup; empty is
// ErrInvalid.
func SessionID(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty chat session id", ErrInvalid)
	}
	return Clean(id), nil
}

// NowMilli is the store's clock for chat times.
func NowMilli() int64 { return time.Now().UnixMilli() }

// NewChatMessages validates msgs (every role) and returns the copies to
// store: text cleaned, session id set, created time set to now when 0. Ids
// are left for the backend.
func NewChatMessages(sessionID string, msgs []*historyv1.ChatMessage, now int64) ([]*historyv1.ChatMessage, error) {
	out := make([]*historyv1.ChatMessage, len(msgs))
	for i, m := range msgs {
		if err := CheckRole(m.GetRole()); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		c := &historyv1.ChatMessage{
			SessionId:        sessionID,
			Role:             m.GetRole(),
			Content:          Clean(m.GetContent()),
			ToolCallsJson:    Clean(m.GetToolCallsJson()),
			ToolCallId:       Clean(m.GetToolCallId()),
			CreatedUnixMilli: m.GetCreatedUnixMilli(),
		}
		if c.CreatedUnixMilli == 0 {
			c.CreatedUnixMilli = now
		}
		out[i] = c
	}
	return out, nil
}

// ChatMessageLimit is how many messages GetChatSession returns for lastN.
func ChatMessageLimit(lastN int) int {
	if lastN <= 0 || lastN > MaxChatMessages {
		return MaxChatMessages
	}
	return lastN
}

// ChatPage trims sessions (fetched with limit+1) to limit and returns the
// cursor of the next page, if any.
func ChatPage(sessions []*historyv1.ChatSession, limit int) ([]*historyv1.ChatSession, string) {
	if len(sessions) <= limit {
		return sessions, ""
	}
	sessions = sessions[:limit]
	last := sessions[limit-1]
	return sessions, ChatCursor(last.GetUpdatedUnixMilli(), last.GetId())
}
