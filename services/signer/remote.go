package signer

import (
	"context"
	"errors"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

// remote is an identity whose key lives elsewhere: an nsigner device or a
// NIP-46 bunker. Its errors are bus errors already.
type remote interface {
	sign(ctx context.Context, ev *nostr.Event) (*nostr.Event, error)
	// crypt runs op ("encrypt" or "decrypt") with NIP-44 or NIP-04.
	crypt(ctx context.Context, op string, nip44 bool, peer, text string) (string, error)
	// link is the connection's state, its last error and a pending
	// NIP-46 auth_url.
	link() (state, lastErr, authURL string)
	close()
}

// nsignerRemote is key index of an nsigner device.
type nsignerRemote struct {
	c     *nsigner.Client
	index uint32
}

func (r nsignerRemote) sign(ctx context.Context, ev *nostr.Event) (*nostr.Event, error) {
	out, err := r.c.SignEvent(ctx, r.index, ev)
	if err != nil {
		return nil, nsignerError("sign_event", err)
	}
	return out, nil
}

func (r nsignerRemote) crypt(ctx context.Context, op string, nip44 bool, peer, text string) (string, error) {
	var out string
	var err error
	switch {
	case nip44 && op == "decrypt":
		out, err = r.c.Nip44Decrypt(ctx, r.index, peer, text)
	case nip44:
		out, err = r.c.Nip44Encrypt(ctx, r.index, peer, text)
	case op == "decrypt":
		out, err = r.c.Nip04Decrypt(ctx, r.index, peer, text)
	default:
		out, err = r.c.Nip04Encrypt(ctx, r.index, peer, text)
	}
	if err != nil {
		return "", nsignerError(op, err)
	}
	return out, nil
}

func (r nsignerRemote) link() (string, string, string) {
	st := r.c.State()
	return string(st.State), st.LastError, ""
}

func (r nsignerRemote) close() { _ = r.c.Close() }

// bunkerRemote is a NIP-46 remote signer.
type bunkerRemote struct{ c *nip46.Client }

func (r bunkerRemote) sign(ctx context.Context, ev *nostr.Event) (*nostr.Event, error) {
	out, err := r.c.SignEvent(ctx, ev)
	if err != nil {
		return nil, nip46Error("sign_event", err)
	}
	return out, nil
}

func (r bunkerRemote) crypt(ctx context.Context, op string, nip44 bool, peer, text string) (string, error) {
	var out string
	var err error
	switch {
	case nip44 && op == "decrypt":
		out, err = r.c.Nip44Decrypt(ctx, peer, text)
	case nip44:
		out, err = r.c.Nip44Encrypt(ctx, peer, text)
	case op == "decrypt":
		out, err = r.c.Nip04Decrypt(ctx, peer, text)
	default:
		out, err = r.c.Nip04Encrypt(ctx, peer, text)
	}
	if err != nil {
		return "", nip46Error(op, err)
	}
	return out, nil
}

func (r bunkerRemote) link() (string, string, string) {
	st := r.c.State()
	return st.State, st.LastError, st.PendingAuthURL
}

func (r bunkerRemote) close() { _ = r.c.Close() }

// nsignerError maps an nsigner client error to a bus error.
func nsignerError(what string, err error) error {
	switch {
	case errors.Is(err, nsigner.ErrClosed):
		return errLoggedOut
	case errors.Is(err, nsigner.ErrLinkDown):
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: the nsigner device is unreachable: %v", what, err)
	case errors.Is(err, nsigner.ErrBadSignature):
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: %v", what, err)
	case errors.Is(err, nsigner.ErrRejected):
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s: the request was rejected on the nsigner device: %v", what, err)
	case errors.Is(err, nsigner.ErrKeyNotFound):
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: the nsigner device has no such key index: %v", what, err)
	case errors.Is(err, nsigner.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s: %v", what, err)
	case errors.Is(err, nsigner.ErrBusy):
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: the nsigner device is busy; try again: %v", what, err)
	case errors.Is(err, nsigner.ErrBadRequest), errors.Is(err, nsigner.ErrTooLarge):
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %v", what, err)
	}
	return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: %v", what, err)
}

// nip46Error maps a NIP-46 client error to a bus error (its text never
// holds a secret or a payload).
func nip46Error(what string, err error) error {
	switch {
	case errors.Is(err, nip46.ErrClosed):
		return errLoggedOut
	case errors.Is(err, nip46.ErrBadURL):
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %v", what, err)
	case errors.Is(err, nip46.ErrRejected):
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s: %v", what, err)
	case errors.Is(err, nip46.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s: %v", what, err)
	case errors.Is(err, nip46.ErrLinkDown):
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: the bunker's relays are unreachable: %v", what, err)
	}
	return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: %v", what, err)
}
