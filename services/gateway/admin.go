package gateway

import (
	"context"
	"fmt"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
)

// adminSources are the admin API's sources (/admin/… on the admin
// listener, internal/console/admin.go): what an operator deploys there
// goes into NATS (KV, object store), so every gateway and worker of the
// fleet serves it.
func (g *Gateway) adminSources(ctx context.Context) (console.Admin, error) {
	store, err := profiles.Open(ctx, g.bus.NATS(), g.bus.Prefix(), g.cfg.ProfileLimits)
	if err != nil {
		return console.Admin{}, fmt.Errorf("base profiles: %w", err)
	}
	return console.Admin{
		Scripts:          g.ext.Scripts(), // internal/extend
		Reload:           g.ext.Reload,
		HTTPTools:        g.ext.HTTPTools,
		PutHTTPTools:     g.ext.PutHTTPTools,
		Profiles:         consoleProfiles{store: store},
		ProfileExport:    g.cfg.ProfileExport,
		MaxProfileUpload: store.Limits().MaxUpload,
		Storage:          consoleStorage{g: g},
		StorageExport:    g.cfg.StorageExport,
	}, nil
}
