// Command gateway serves Sovereign's MCP endpoint against a NATS server.
package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

func main() {
	app.Main("gateway", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var errs []error
	natsURL := fs.String("nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	cfg := gateway.RegisterFlags(fs, &errs)
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	if *natsURL == "" {
		errs = append(errs, errors.New("--nats-url: is empty"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return app.UsageError{Err: errors.Join(errs...)}
	}
	return gateway.Serve(ctx, *cfg, *natsURL)
}
