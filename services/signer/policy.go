package signer

import (
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// kindDecrypt is the pseudo event kind allow receives for a decrypt (NIP-44
// or NIP-04).
const kindDecrypt = -1

// approvalKinds are the event kinds whose signing needs a person's approval
// by default (issue 3): profile metadata (0), follow list (3), deletion (5)
// and relay list (10002).
var approvalKinds = map[int]bool{0: true, 3: true, 5: true, 10002: true}

// allow is the origin policy hook for sign_event (kind = the event's kind)
// and decrypt (kind = kindDecrypt). It returns nil to allow, or a FORBIDDEN
// bus error.
//
// For now it is the default policy without approvals: signing kinds
// 0, 3, 5 and 10002 and every decrypt "need approval", and as approvals do
// not exist yet, they are denied with an error saying so; every other kind
// is allowed. origin "" means the request did not come from a page (the
// agent or gateway itself) and is allowed. What is not done here yet: a
// per-origin allow/deny/ask table, "allowed only for the origin the session
// navigated to", and an approval flow that turns "ask" into a decision.
func allow(origin string, kind int) error {
	if origin == "" {
		return nil
	}
	if kind == kindDecrypt {
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"decrypting for %s needs approval, and approvals are not available yet: the request is denied", origin)
	}
	if approvalKinds[kind] {
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
			"signing a kind %d event for %s needs approval, and approvals are not available yet: the request is denied", kind, origin)
	}
	return nil
}
