package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Packages the harness builds.
const (
	SovereignPackage  = "github.com/sovereign-fleet/sovereign/services/sovereign/cmd/sovereign"
	NATSServerPackage = "github.com/nats-io/nats-server/v2"
)

// Binaries are the executables a fleet runs.
type Binaries struct {
	Sovereign  string
	NATSServer string
}

// EnvSovereignBin names a prebuilt sovereign binary to test instead of
// building one (for example a release build).
const EnvSovereignBin = "SOVEREIGN_E2E_BIN"

// Build compiles the all-in-one sovereign binary and nats-server into dir.
// It runs the go command in the current directory, which must be inside the
// workspace (the e2e module's go.mod pins nats-server as a tool). When
// $SOVEREIGN_E2E_BIN is set, that sovereign binary is used as it is.
func Build(ctx context.Context, dir string) (*Binaries, error) {
	b := &Binaries{
		Sovereign:  filepath.Join(dir, "sovereign"),
		NATSServer: filepath.Join(dir, "nats-server"),
	}
	if prebuilt := os.Getenv(EnvSovereignBin); prebuilt != "" {
		abs, err := filepath.Abs(prebuilt)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("$%s: %w", EnvSovereignBin, err)
		}
		b.Sovereign = abs
	} else if err := goBuild(ctx, b.Sovereign, SovereignPackage); err != nil {
		return nil, err
	}
	if err := goBuild(ctx, b.NATSServer, NATSServerPackage); err != nil {
		return nil, err
	}
	return b, nil
}

func goBuild(ctx context.Context, out, pkg string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go command not on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Env = os.Environ()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}
