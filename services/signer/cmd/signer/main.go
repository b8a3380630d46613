// Command signer runs the Sovereign signer (Nostr identities per browser
// session, window.nostr's backend) against a NATS server. Run one replica.
package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/signer"
)

func main() {
	app.Main("signer", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("signer", flag.ContinueOnError)
	var errs []error
	natsURL := fs.String("nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	cfg := signer.RegisterFlags(fs, &errs)
	signer.RegisterStandaloneFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	if len(errs) > 0 {
		return app.UsageError{Err: errors.Join(errs...)}
	}
	return signer.Serve(ctx, *cfg, *natsURL)
}
