package signer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/approval"
)

// DefaultApprovalTimeout bounds how long a window.nostr request that the
// policy says "ask" for waits for a person: less than the two minutes a
// worker waits for the signer's answer, so the page gets a clear denial
// instead of a timeout.
const DefaultApprovalTimeout = 90 * time.Second

// consoleAsk is the AskFunc of a signer whose bus has JetStream: it puts
// the request in the fleet's approval queue (KV <prefix>_approvals), where
// the operator console shows it next to the gateway's approvals, and waits
// for the decision. "Approve for session" grants that operation (and kind)
// for that origin for the rest of the browser session.
func (s *Service) consoleAsk(q *approval.Queue, timeout time.Duration) AskFunc {
	return func(ctx context.Context, scope string, r Request) error {
		// The grant belongs to this browser session AND this identity:
		// after a switch_identity the new identity asks again.
		scopeKey := "signer:" + scopeDigest(scope+"\x00"+r.Pubkey)
		grant := nostrGrant(r)
		if ok, err := q.Granted(ctx, scopeKey, grant); err == nil && ok {
			return nil
		}
		args, _ := json.Marshal(struct {
			Origin    string `json:"origin"`
			TopOrigin string `json:"top_origin,omitempty"`
			Kind      *int   `json:"kind,omitempty"`
		}{r.Origin, r.TopOrigin, kindPtr(r)})
		_, rule := s.policy.Decide(r)
		req := approval.Request{
			Tool:      "window.nostr." + jsName(r.Op),
			Arguments: string(args),
			Reason:    fmt.Sprintf("a page asks: %s for %s (signer rule: %s)", describe(r), r.Origin, rule),
			Caller:    "page " + r.Origin,
			Scope:     scopeKey,
			Grant:     grant,
			Deadline:  time.Now().Add(timeout),
		}
		s.log.Info("window.nostr request waits for approval", "scope", scopeDigest(scope), "origin", r.Origin, "op", string(r.Op), "kind", r.Kind)
		final, err := q.Ask(ctx, req, nil)
		if err != nil {
			return fmt.Errorf("the approval could not be asked: %w", err)
		}
		switch final.State {
		case approval.Approved:
			return nil
		case approval.TimedOut:
			return fmt.Errorf("nobody decided within %s (approval %s on the console)", timeout, final.ID)
		}
		by := final.DecidedBy
		if by == "" {
			by = "a person"
		}
		return errors.New("denied by " + by)
	}
}

// nostrGrant is what "approve for session" grants: the operation, the kind
// for signing, and the origin.
func nostrGrant(r Request) string {
	g := "nostr:" + string(r.Op)
	if r.Op == OpSign {
		g += ":" + strconv.Itoa(r.Kind)
	}
	return g + "@" + normalizeOrigin(r.Origin)
}

func kindPtr(r Request) *int {
	if r.Op != OpSign {
		return nil
	}
	k := r.Kind
	return &k
}

// jsName is the window.nostr method of op.
func jsName(op Op) string {
	switch op {
	case OpSign:
		return "signEvent"
	case OpGetPublicKey:
		return "getPublicKey"
	case OpEncrypt:
		return "encrypt"
	case OpDecrypt:
		return "decrypt"
	}
	return string(op)
}
