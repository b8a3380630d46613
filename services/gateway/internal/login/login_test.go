package login

import "testing"

// TestSignerOwner: the identities a caller remembers at the signer are
// keyed by an opaque digest of its full identity, one per caller.
func TestSignerOwner(t *testing.T) {
	a, b := signerOwner("token:t1"), signerOwner("token:t2")
	if a == b || a != signerOwner("token:t1") || len(a) != 32 {
		t.Errorf("signerOwner(token:t1) = %q, signerOwner(token:t2) = %q; want distinct, stable, 32 hex digits", a, b)
	}
}
