package signer

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// RegisterFlags adds the signer's flags to fs, each with its SOVEREIGN_*
// environment fallback, and returns the Config they fill (the caller sets
// DataDir). The passphrase for remembered identities only ever comes from
// the environment (SOVEREIGN_SIGNER_PASSPHRASE) or a file
// (SOVEREIGN_SIGNER_PASSPHRASE_FILE): a flag would show it in the process
// list. Problems are appended to errs.
func RegisterFlags(fs *flag.FlagSet, errs *[]error) *Config {
	cfg := &Config{}
	fs.StringVar(&cfg.PolicyFile, "signer-policy", config.Env("SOVEREIGN_SIGNER_POLICY", ""),
		"YAML file of window.nostr origin rules (allow, deny, ask) checked before the defaults; see docs/identity.md [SOVEREIGN_SIGNER_POLICY]")
	fs.DurationVar(&cfg.IdentityIdle, "identity-idle", config.MustDuration(errs, "SOVEREIGN_SIGNER_IDENTITY_IDLE", DefaultIdentityIdle),
		"wipe an identity no request has used for this long (sessions of a worker that died) [SOVEREIGN_SIGNER_IDENTITY_IDLE]")
	p, err := passphrase(os.Getenv)
	if err == nil && p != "" && len(p) < 8 {
		err = fmt.Errorf("SOVEREIGN_SIGNER_PASSPHRASE: use at least 8 characters (it guards every remembered key)")
	}
	if err != nil {
		*errs = append(*errs, err)
	}
	cfg.Passphrase = p
	return cfg
}

// RegisterStandaloneFlags adds the flags of a signer running as its own
// process (`sovereign signer`, cmd/signer): --data-dir and --listen.
// `sovereign up` sets DataDir itself and serves no signer listener.
func RegisterStandaloneFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.DataDir, "data-dir", config.Env("SOVEREIGN_DATA_DIR", "./.sovereign"), "where remembered identities live (<data dir>/identities) [SOVEREIGN_DATA_DIR]")
	fs.StringVar(&cfg.Listen, "listen", config.Env("SOVEREIGN_SIGNER_LISTEN", "127.0.0.1:8093"), "host:port for /healthz, /readyz and /metrics; empty for none [SOVEREIGN_SIGNER_LISTEN]")
}

// passphrase reads SOVEREIGN_SIGNER_PASSPHRASE, or the file
// SOVEREIGN_SIGNER_PASSPHRASE_FILE names (its trailing newline dropped).
func passphrase(getenv func(string) string) (string, error) {
	v, file := getenv("SOVEREIGN_SIGNER_PASSPHRASE"), getenv("SOVEREIGN_SIGNER_PASSPHRASE_FILE")
	switch {
	case v != "" && file != "":
		return "", fmt.Errorf("set SOVEREIGN_SIGNER_PASSPHRASE or SOVEREIGN_SIGNER_PASSPHRASE_FILE, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("SOVEREIGN_SIGNER_PASSPHRASE_FILE: %w", err)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("SOVEREIGN_SIGNER_PASSPHRASE_FILE %s is empty", file)
		}
	}
	return v, nil
}

// Serve connects to NATS at natsURL and runs the signer until ctx ends:
// what `sovereign signer` and cmd/signer do.
func Serve(ctx context.Context, cfg Config, natsURL string) error {
	return app.Serve(ctx, natsURL, "sovereign-signer", func(ctx context.Context, c *bus.Conn) (*Service, error) {
		return New(ctx, cfg, c)
	})
}
