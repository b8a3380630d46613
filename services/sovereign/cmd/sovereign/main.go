// Command sovereign is the all-in-one Sovereign binary: `sovereign up` runs
// the whole fleet in one process; `sovereign gateway` and `sovereign browser`
// run one service against a NATS server.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/sovereign"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, sovereign.Usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Print(sovereign.Usage)
		return
	case "version", "--version":
		fmt.Println("sovereign", sovereign.Version)
		return
	case "healthcheck":
		// Runs every few seconds in containers: no logging or telemetry
		// set-up, just the request.
		if err := sovereign.Command(context.Background(), cmd, args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	service := "sovereign"
	if cmd != "up" {
		service = cmd
	}
	app.Main(service, func(ctx context.Context) error { return sovereign.Command(ctx, cmd, args) })
}
