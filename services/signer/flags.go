package signer

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
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
	p, err := passphrase(os.Getenv)
	if err != nil {
		*errs = append(*errs, err)
	}
	cfg.Passphrase = p
	return cfg
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
	c, closeConn, err := app.Connect(natsURL, "sovereign-signer", "")
	if err != nil {
		return err
	}
	defer closeConn()
	s, err := New(cfg, c)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}
