package gateway

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
)

// Base profiles: logged-in browser profile templates an operator uploads
// through the admin API (tar.gz, filtered both ways, kit/profiles) into
// the fleet's object store; a browser session opened by `open` with
// profile "name" starts from a private copy on whichever worker takes it.

// registerProfileFlags adds the profile settings.
func registerProfileFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.BoolVar(&cfg.ProfileExport, "profile-export", config.MustBool(errs, "SOVEREIGN_PROFILE_EXPORT", false),
		"allow GET /admin/profiles/{name}/export: an exported profile holds the session cookies and saved passwords of every site "+
			"it is logged in to; turn it on only for the export, and off again [SOVEREIGN_PROFILE_EXPORT]")
	lim, err := profiles.LimitsFromEnv() // SOVEREIGN_PROFILE_MAX_UPLOAD_MB, SOVEREIGN_PROFILE_MAX_UNPACKED_MB
	if err != nil {
		*errs = append(*errs, err)
	}
	cfg.ProfileLimits = lim
}

// consoleProfiles is the admin API's profile source.
type consoleProfiles struct{ store *profiles.Store }

// adminErr maps a kit/profiles error to the admin API's kinds.
func adminErr(err error) error {
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		return fmt.Errorf("%w: %w", console.ErrNotFound, err)
	case errors.Is(err, profiles.ErrTooLarge):
		return fmt.Errorf("%w: %w", console.ErrTooLarge, err)
	case errors.Is(err, profiles.ErrUnsafePath), errors.Is(err, profiles.ErrBadArchive), errors.Is(err, profiles.ErrBadName):
		return fmt.Errorf("%w: %w", console.ErrInvalid, err)
	}
	return err
}

func profileInfo(i profiles.Info) console.ProfileInfo {
	return console.ProfileInfo{Name: i.Name, Size: i.Size, Files: i.Stats.Files, Digest: i.Digest, Updated: i.Uploaded,
		Dropped: i.Stats.Dropped, Skipped: i.Stats.Skipped}
}

func (p consoleProfiles) List(ctx context.Context) ([]console.ProfileInfo, error) {
	list, err := p.store.List(ctx)
	if err != nil {
		return nil, adminErr(err)
	}
	out := make([]console.ProfileInfo, 0, len(list))
	for _, i := range list {
		out = append(out, profileInfo(i))
	}
	return out, nil
}

func (p consoleProfiles) Put(ctx context.Context, name string, r io.Reader) (console.ProfileInfo, error) {
	i, err := p.store.Put(ctx, name, r)
	if err != nil {
		return console.ProfileInfo{}, adminErr(err)
	}
	return profileInfo(i), nil
}

func (p consoleProfiles) Delete(ctx context.Context, name string) error {
	return adminErr(p.store.Delete(ctx, name))
}

func (p consoleProfiles) Export(ctx context.Context, name string, w io.Writer) error {
	_, err := p.store.Export(ctx, name, w)
	return adminErr(err)
}
