package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Saved storage (storage_save) in the admin API: the gateway holds no key
// to seal or open it, so it asks a browser worker that does
// (sov.browser.storage); the console guards the routes (admin token, and
// export only with --storage-export).
//
// A saved storage belongs to the digest of its caller's full identity
// (dispatch.OwnerDigest, what OpenSessionRequest.owner carries). Gateways
// before that keyed it by the caller's 12-character label, which two API
// tokens share when their ids start alike; migrateStorage moves what they
// saved to its owner.

// registerStorageFlags adds the saved storage settings.
func registerStorageFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.BoolVar(&cfg.StorageExport, "storage-export", config.MustBool(errs, "SOVEREIGN_STORAGE_EXPORT", false),
		"allow GET /admin/storage/{owner}/{name}/export: an exported storage holds the session cookies of every site it is "+
			"logged in to; turn it on only for the export, and off again [SOVEREIGN_STORAGE_EXPORT]")
}

// consoleStorage is the admin API's saved storage source.
type consoleStorage struct{ g *Gateway }

func (s consoleStorage) Import(ctx context.Context, owner, name string, state []byte) (json.RawMessage, error) {
	id, err := s.g.ownerIdentity(ctx, owner)
	if err != nil {
		return nil, err
	}
	res, err := s.transfer(ctx, &browserv1.StorageTransferRequest{Op: "import", Owner: dispatch.OwnerDigest(id), Name: name, StateJson: state})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(res.GetSummaryJson()), nil
}

func (s consoleStorage) Export(ctx context.Context, owner, name string) ([]byte, error) {
	id, err := s.g.ownerIdentity(ctx, owner)
	if err != nil {
		return nil, err
	}
	res, err := s.transfer(ctx, &browserv1.StorageTransferRequest{Op: "export", Owner: dispatch.OwnerDigest(id), Name: name})
	if err != nil {
		return nil, err
	}
	return res.GetStateJson(), nil
}

func (s consoleStorage) Move(ctx context.Context, fromScope, owner, name string) (json.RawMessage, error) {
	id, err := s.g.ownerIdentity(ctx, owner)
	if err != nil {
		return nil, err
	}
	res, err := s.transfer(ctx, &browserv1.StorageTransferRequest{Op: "move", FromScope: fromScope, Owner: dispatch.OwnerDigest(id), Name: name})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(res.GetSummaryJson()), nil
}

// transfer asks a worker with the key, and maps its error to the admin
// API's kinds.
func (s consoleStorage) transfer(ctx context.Context, req *browserv1.StorageTransferRequest) (*browserv1.StorageTransferResponse, error) {
	res, err := browserbus.Storage.Call(ctx, s.g.bus, req)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, bus.ErrNoResponders):
		return nil, fmt.Errorf("no browser worker keeps saved storage: the workers need the operator secret key (SOVEREIGN_SECRET_KEY)")
	}
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_INVALID_ARGUMENT, commonv1.ErrorCode_FAILED_PRECONDITION:
		return nil, fmt.Errorf("%w: %w", console.ErrInvalid, err)
	case commonv1.ErrorCode_NOT_FOUND:
		return nil, fmt.Errorf("%w: %w", console.ErrNotFound, err)
	case commonv1.ErrorCode_TOO_LARGE:
		return nil, fmt.Errorf("%w: %w", console.ErrTooLarge, err)
	}
	return nil, err
}

// ownerIdentity is the caller identity (Caller.ID) an admin route's
// {owner} names: "anonymous", "token:<id>" or an active API token's name,
// or "oauth:<digest>" as the console's session list shows an OAuth
// subject.
func (g *Gateway) ownerIdentity(ctx context.Context, owner string) (string, error) {
	switch {
	case owner == Anonymous:
		return owner, nil
	case strings.HasPrefix(owner, "oauth:") && len(owner) > len("oauth:"):
		return owner, nil
	}
	if id, ok := strings.CutPrefix(owner, "token:"); ok {
		if _, known := g.auth.Tokens().Lookup(id); !known {
			return "", fmt.Errorf("%w: owner %q: no API token has the id %s (sovereign token list shows them)", console.ErrInvalid, owner, id)
		}
		return owner, nil
	}
	if tokens.ValidName(owner) {
		list, err := g.auth.Tokens().List(ctx)
		if err != nil {
			return "", fmt.Errorf("owner %q: list API tokens: %w", owner, err)
		}
		for _, t := range list {
			if t.Name == owner && !t.Revoked() {
				return "token:" + t.ID, nil
			}
		}
	}
	return "", fmt.Errorf("%w: owner %q is none of: an active API token's name, token:<token id>, oauth:<digest> (as the console's session list shows it), %s",
		console.ErrInvalid, owner, Anonymous)
}

// legacyScope is the saved storage scope a worker derived from a caller's
// identity before owners were digests: the first 12 bytes of the SHA-256
// of its 12-character label (CallerLabel as it was then).
func legacyScope(id string) string {
	label := strings.TrimPrefix(id, "sha256:")
	label = label[:min(len(label), 12)]
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:12])
}

// Pacing of the migration: it waits for a worker with the key.
const (
	migrateFirstRetry = 2 * time.Second
	migrateMaxRetry   = time.Minute
)

// startStorageMigration runs migrateStorage until it is done, retrying
// while no worker with the key answers, or until Close.
func (g *Gateway) startStorageMigration() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.migrated = done
	go func() {
		defer close(done)
		wait := migrateFirstRetry
		for {
			err := g.migrateStorage(ctx)
			if err == nil || ctx.Err() != nil {
				return
			}
			if !errors.Is(err, bus.ErrNoResponders) {
				g.log.Warn("move legacy saved storage to its owners; retrying", "err", err, "in", wait)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, migrateMaxRetry)
		}
	}()
	g.onClose(func(context.Context) error { cancel(); <-done; return nil })
}

// migrateStorage moves each saved storage under a legacy scope to the one
// caller whose label maps to that scope: among the API tokens (active and
// revoked), anonymous and the console. A scope no such caller maps to (an
// OAuth subject's), only a revoked token does, or more than one does
// (tokens whose ids start alike) is left where it is, reachable by no
// caller, with a warning naming what the operator can do: move it to its
// owner with POST /admin/storage/{owner}/{name}/move. An error means "try
// again".
func (g *Gateway) migrateStorage(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := browserbus.Storage.Call(cctx, g.bus, &browserv1.StorageTransferRequest{Op: "legacy"})
	if err != nil {
		return fmt.Errorf("list legacy saved storage: %w", err)
	}
	var legacy []struct{ Scope, Name string }
	if err := json.Unmarshal([]byte(res.GetSummaryJson()), &legacy); err != nil {
		return fmt.Errorf("decode the list of legacy saved storage: %w", err)
	}
	if len(legacy) == 0 {
		return nil
	}
	owners, err := g.legacyOwners(cctx)
	if err != nil {
		return err
	}
	s := consoleStorage{g}
	for _, l := range legacy {
		cands := owners[l.Scope]
		if len(cands) != 1 || cands[0].revoked {
			why := "no API token, anonymous or the console maps to it (an OAuth subject's: their labels cannot be listed)"
			switch {
			case len(cands) > 1:
				why = "its scope is shared by callers whose labels are alike: " + strings.Join(cands.names(), ", ")
			case len(cands) == 1:
				why = "it is the " + cands[0].name + "'s, which is revoked"
			}
			g.log.Warn("legacy saved storage left unreachable: "+why+"; move it to its owner with POST /admin/storage/{owner}/{name}/move "+
				`and the body {"from_scope": "<scope>"}`, "scope", l.Scope, "storage", l.Name)
			continue
		}
		_, err := s.transfer(cctx, &browserv1.StorageTransferRequest{Op: "move", FromScope: l.Scope, Owner: dispatch.OwnerDigest(cands[0].id), Name: l.Name})
		switch {
		case err == nil:
			g.log.Info("legacy saved storage moved to its owner", "owner", cands[0].name, "storage", l.Name)
		case errors.Is(err, console.ErrNotFound):
			// Another gateway moved it meanwhile.
		case errors.Is(err, console.ErrInvalid), errors.Is(err, console.ErrTooLarge):
			g.log.Warn("legacy saved storage not moved", "scope", l.Scope, "storage", l.Name, "owner", cands[0].name, "err", err)
		default:
			return fmt.Errorf("move legacy saved storage %q: %w", l.Name, err)
		}
	}
	return nil
}

// legacyCandidate is a caller a legacy scope may belong to.
type legacyCandidate struct {
	id, name string
	revoked  bool
}

type candidates []legacyCandidate

func (c candidates) names() []string {
	out := make([]string, len(c))
	for i, x := range c {
		out[i] = x.name
	}
	return out
}

// legacyOwners maps each legacy scope to the callers whose labels map to
// it. Revoked tokens count: a scope one of them shares is not the active
// token's alone (it may hold the revoked token's logins).
func (g *Gateway) legacyOwners(ctx context.Context) (map[string]candidates, error) {
	list, err := g.auth.Tokens().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	out := map[string]candidates{}
	add := func(c legacyCandidate) { out[legacyScope(c.id)] = append(out[legacyScope(c.id)], c) }
	add(legacyCandidate{id: Anonymous, name: Anonymous})
	add(legacyCandidate{id: kindConsole, name: kindConsole})
	for _, t := range list {
		add(legacyCandidate{id: "token:" + t.ID, name: "token " + t.Name + " (id " + t.ID + ")", revoked: t.Revoked()})
	}
	return out, nil
}
