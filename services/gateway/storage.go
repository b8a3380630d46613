package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Saved storage (storage_save) in the admin API: the gateway holds no key
// to seal or open it, so it asks a browser worker that does
// (sov.browser.storage); the console guards the routes (admin token, and
// export only with --storage-export).

// registerStorageFlags adds the saved storage settings.
func registerStorageFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.BoolVar(&cfg.StorageExport, "storage-export", config.MustBool(errs, "SOVEREIGN_STORAGE_EXPORT", false),
		"allow GET /admin/storage/{owner}/{name}/export: an exported storage holds the session cookies of every site it is "+
			"logged in to; turn it on only for the export, and off again [SOVEREIGN_STORAGE_EXPORT]")
}

// consoleStorage is the admin API's saved storage source.
type consoleStorage struct{ g *Gateway }

func (s consoleStorage) Import(ctx context.Context, owner, name string, state []byte) (json.RawMessage, error) {
	res, err := s.transfer(ctx, &browserv1.StorageTransferRequest{Op: "import", Owner: owner, Name: name, StateJson: state})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(res.GetSummaryJson()), nil
}

func (s consoleStorage) Export(ctx context.Context, owner, name string) ([]byte, error) {
	res, err := s.transfer(ctx, &browserv1.StorageTransferRequest{Op: "export", Owner: owner, Name: name})
	if err != nil {
		return nil, err
	}
	return res.GetStateJson(), nil
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
	case commonv1.ErrorCode_INVALID_ARGUMENT:
		return nil, fmt.Errorf("%w: %w", console.ErrInvalid, err)
	case commonv1.ErrorCode_NOT_FOUND:
		return nil, fmt.Errorf("%w: %w", console.ErrNotFound, err)
	case commonv1.ErrorCode_TOO_LARGE:
		return nil, fmt.Errorf("%w: %w", console.ErrTooLarge, err)
	}
	return nil, err
}
