package browser

import (
	"context"
	"log/slog"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/signerbus"
)

// window.nostr (NIP-07) in the pages of a session that has a Nostr
// identity.
//
// The gateway logs the identity in at the signer under the session's id
// (its scope) and then sends set_identity with its public key. From then
// on every frame of every page of the session — tabs, popups, iframes,
// out-of-process ones included — gets window.nostr before its own scripts
// run, and the documents already loaded get it at once. The session's
// bridge (nostr_bridge.go) hooks every page target of the browser context
// through the URL policy guard's auto-attach (guard.Hooks), with or
// without a URL policy. A call goes from the page through a CDP binding
// to the bridge, which asks the signer over the bus (nostr_signer.go) on
// behalf of the calling frame's origin as Chromium reports it, and
// settles the page's promise in that frame. set_identity "" removes
// window.nostr from new documents, and the loaded ones fail with "logged
// out". When the session closes, the signer is told to forget the key.

// identityTools are the session's requests about its Nostr identity.
var identityTools = map[string]sessionTool{
	"set_identity": {afterTabGone: true, run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.setIdentity(ctx, r.GetSetIdentity().GetPubkey())
	}},
}

// setIdentity records the session's Nostr identity (the gateway sends it
// after login, logout and switch_identity) and puts window.nostr in the
// session's pages, or takes it out.
func (s *session) setIdentity(ctx context.Context, pubkey string) (*browserv1.ToolResult, error) {
	if pubkey != "" && !isHexKey(pubkey) {
		// Not quoted: a mistaken caller may have passed a secret key.
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"set_identity: pubkey must be a Nostr public key of 64 lowercase hex characters (or empty to log out); got %d characters that are not one", len(pubkey))
	}
	// Recorded first: the signer holds the key from the gateway's login,
	// so the session must log it out when it closes even if window.nostr
	// could not be set up.
	s.pubkey = pubkey
	if s.nostr == nil {
		if pubkey == "" {
			return result("window.nostr removed", nil)
		}
		s.nostr = newNostrBridge(s.ctx, s.id, s.bus, s.logger())
		s.nostr.setIdentity(ctx, pubkey)
		if err := s.guard.Hook(ctx, s.bcid, s.nostr); err != nil {
			s.guard.Unhook(s.bcid)
			s.nostr.close()
			s.nostr = nil // a retry hooks again
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "set_identity: put window.nostr in the session's pages: %v", err)
		}
	} else {
		s.nostr.setIdentity(ctx, pubkey)
	}
	if pubkey == "" {
		return result("window.nostr removed", nil)
	}
	return result("window.nostr set for "+pubkey, nil)
}

// closeNostr ends window.nostr of a closing session: the hooks go, calls
// in flight end (the session's context has ended), and when the session
// had an identity the signer is told to forget its key (best effort).
// The caller holds the lock.
func (s *session) closeNostr() {
	if s.nostr != nil {
		if s.guard != nil && s.bcid != "" {
			s.guard.Unhook(s.bcid)
		}
		s.nostr.close()
	}
	if s.pubkey == "" || s.bus == nil {
		return
	}
	// 10 s: a loaded signer must not keep the login of a closed session.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := signerbus.Logout.Call(ctx, s.bus, &signerv1.Logout{Scope: s.id})
	if err != nil {
		s.logger().Warn("window.nostr: the signer did not confirm the logout of a closed session; it wipes that key when unused for its --identity-idle", "session", s.id, "err", err)
	} else {
		s.logger().Debug("window.nostr: signer logout on session close", "session", s.id, "was_logged_in", res.GetWasLoggedIn())
	}
	s.pubkey = ""
}

func (s *session) logger() *slog.Logger {
	if s.log == nil {
		return slog.Default()
	}
	return s.log
}

// isHexKey reports whether k is 64 lowercase hex characters.
func isHexKey(k string) bool {
	if len(k) != 64 {
		return false
	}
	for _, c := range []byte(k) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
