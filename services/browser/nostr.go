package browser

import (
	"context"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// setIdentity records the session's Nostr identity (the gateway sends it
// after login, logout and switch_identity).
func (s *session) setIdentity(_ context.Context, pubkey string) (*browserv1.ToolResult, error) {
	s.pubkey = pubkey
	if pubkey == "" {
		return result("window.nostr removed", nil)
	}
	return result("window.nostr set for "+pubkey, nil)
}
