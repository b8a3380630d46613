package history

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Config is the history service's configuration.
type Config struct {
	// DSN selects the backend: postgres://… (or postgresql://…) for
	// PostgreSQL, sqlite:<path> or a plain path for SQLite. Empty means
	// SQLite at <DataDir>/history.db.
	DSN     string
	DataDir string
	// Retention deletes audit records older than this (0 keeps them for
	// ever).
	Retention time.Duration
	// Stream bounds the audit stream (the backlog while history is down).
	Stream audit.StreamConfig
	// Listen serves /healthz, /readyz and /metrics; empty for none.
	Listen string
	// Batch is how many records one transaction stores at most.
	Batch int
}

// Defaults.
const (
	DefaultRetention = 90 * 24 * time.Hour
	DefaultBatch     = 500
)

func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = "./.sovereign"
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	return c
}

// Validate reports every bad setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("--audit-retention %s: must be 0 (keep for ever) or more", c.Retention))
	}
	if c.Retention > 0 && c.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("--audit-retention %s: must be at least 1h (or 0 to keep for ever)", c.Retention))
	}
	if c.Stream.MaxAge < 0 || c.Stream.MaxBytes < 0 {
		errs = append(errs, errors.New("--audit-stream-max-age and --audit-stream-max-bytes must not be negative"))
	}
	if c.Batch > 10000 {
		errs = append(errs, fmt.Errorf("--audit-batch %d: at most 10000", c.Batch))
	}
	if _, _, err := c.backend(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// backend returns "sqlite" or "postgres" and the path or DSN to open.
func (c Config) backend() (kind, target string, err error) {
	dsn := strings.TrimSpace(c.DSN)
	switch {
	case dsn == "":
		dir := c.DataDir
		if dir == "" {
			dir = "./.sovereign"
		}
		return "sqlite", filepath.Join(dir, "history.db"), nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "postgres", dsn, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		p := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		if p == "" {
			return "", "", errors.New("SOVEREIGN_HISTORY_DSN=sqlite: names no file (use sqlite:/path/to/history.db)")
		}
		return "sqlite", p, nil
	case strings.Contains(dsn, "://"):
		scheme, _, _ := strings.Cut(dsn, "://")
		return "", "", fmt.Errorf("SOVEREIGN_HISTORY_DSN: unknown database %q (use postgres://… or sqlite:/path)", scheme)
	}
	return "sqlite", dsn, nil
}

// RegisterFlags adds the history flags to fs with their SOVEREIGN_*
// fallbacks. Malformed environment values are appended to errs. The data
// dir is not a flag here: `sovereign up` shares its own --data-dir.
func RegisterFlags(fs *flag.FlagSet, errs *[]error) *Config {
	cfg := &Config{}
	fs.StringVar(&cfg.DSN, "history-dsn", config.Env("SOVEREIGN_HISTORY_DSN", ""), "history database: postgres://user:pass@host/db, or sqlite:/path/history.db (default: history.db in the data dir) [SOVEREIGN_HISTORY_DSN]")
	config.DurationVar(fs, &cfg.Retention, "audit-retention", config.MustDuration(errs, "SOVEREIGN_AUDIT_RETENTION", DefaultRetention), "delete audit records older than this; 0 keeps them for ever [SOVEREIGN_AUDIT_RETENTION]")
	config.DurationVar(fs, &cfg.Stream.MaxAge, "audit-stream-max-age", config.MustDuration(errs, "SOVEREIGN_AUDIT_STREAM_MAX_AGE", audit.DefaultMaxAge), "how long records wait in the audit stream for history before NATS drops them [SOVEREIGN_AUDIT_STREAM_MAX_AGE]")
	maxBytes := config.MustInt(errs, "SOVEREIGN_AUDIT_STREAM_MAX_BYTES", audit.DefaultMaxBytes)
	fs.Func("audit-stream-max-bytes", fmt.Sprintf("size of the audit stream backlog; when full, publishers hold records and then drop them (default %d) [SOVEREIGN_AUDIT_STREAM_MAX_BYTES]", audit.DefaultMaxBytes), func(s string) error {
		var n int64
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			return errors.New("must be a positive number of bytes")
		}
		cfg.Stream.MaxBytes = n
		return nil
	})
	cfg.Stream.MaxBytes = int64(maxBytes)
	fs.IntVar(&cfg.Batch, "audit-batch", config.MustInt(errs, "SOVEREIGN_AUDIT_BATCH", DefaultBatch), "audit records stored per transaction at most [SOVEREIGN_AUDIT_BATCH]")
	return cfg
}

// Serve connects to NATS at natsURL and runs history until ctx ends: what
// `sovereign history` does.
func Serve(ctx context.Context, cfg Config, natsURL string) error {
	if err := cfg.Validate(); err != nil {
		return app.UsageError{Err: err}
	}
	return app.Serve(ctx, natsURL, "sovereign-history", func(ctx context.Context, c *bus.Conn) (*Service, error) {
		return New(ctx, cfg, c)
	})
}
