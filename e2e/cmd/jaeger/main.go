// Command jaeger builds the Jaeger the e2e tests run (harness.BuildJaeger:
// the v2 all-in-one at harness.JaegerVersion, from the Go module proxy) if
// it is not cached yet, and prints its path. Run it before `go test
// ./e2e/...` so that the first, slow build is not inside a test's timeout:
//
//	go run ./e2e/cmd/jaeger
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	bin, err := harness.BuildJaeger(ctx, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "jaeger: "+format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "jaeger:", err)
		os.Exit(1)
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(os.Stderr, "jaeger: ready in %s\n", d.Round(time.Second))
	}
	fmt.Println(bin)
}
