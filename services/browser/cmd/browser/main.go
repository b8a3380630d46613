// Command browser runs one Sovereign browser worker against a NATS server.
package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

func main() {
	app.Main("browser", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("browser", flag.ContinueOnError)
	var errs []error
	natsURL := fs.String("nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	cfg := browser.RegisterFlags(fs, &errs)
	browser.RegisterStandaloneFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	if len(errs) > 0 {
		return app.UsageError{Err: errors.Join(errs...)}
	}
	return browser.Serve(ctx, *cfg, *natsURL)
}
