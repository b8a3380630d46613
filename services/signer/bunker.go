package signer

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46"
)

// MaxBunkerLogin bounds a NIP-46 login, which can wait for a person to
// approve it in the bunker (auth_url), when the request's own deadline is
// longer.
const MaxBunkerLogin = 5 * time.Minute

// dialBunker connects to the bunker r names. While it waits, progress
// (steps and an auth_url challenge) goes to r.progress_subject.
func (s *Service) dialBunker(ctx context.Context, r *signerv1.Login) (*nip46.Client, error) {
	if _, err := nip46.ParseBunkerURL(r.GetBunkerUrl()); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "login (nip46): %v", err)
	}
	subj := r.GetProgressSubject()
	if subj != "" && (strings.ContainsAny(subj, "*> \t\r\n") || strings.HasPrefix(subj, ".") || strings.HasSuffix(subj, ".")) {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "login: progress_subject %q is not a plain NATS subject", subj)
	}
	publish := func(p *signerv1.LoginProgress) {
		if subj == "" {
			return
		}
		if b, err := proto.Marshal(p); err == nil {
			_ = s.bus.NATS().Publish(subj, b)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, MaxBunkerLogin)
	defer cancel()
	log := s.log.With("scope", scopeDigest(r.GetScope()))
	c, err := nip46.Dial(dctx, nip46.Config{
		BunkerURL: r.GetBunkerUrl(),
		Logger:    log,
		OnAuthURL: func(u string) {
			// An auth_url is not a secret: the person must open it.
			log.Info("the bunker asks a person to approve", "auth_url", u)
			publish(&signerv1.LoginProgress{AuthUrl: u,
				Message: "Open " + u + " to approve this login in your bunker; waiting for it…"})
		},
		OnProgress: func(m string) { publish(&signerv1.LoginProgress{Message: m}) },
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "login (nip46): the bunker did not complete the login within %s", MaxBunkerLogin)
		}
		return nil, nip46Error("login (nip46)", err)
	}
	return c, nil
}
