//go:build !unix

package systools

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Exec is not supported on this system: it needs a POSIX shell and
// process groups.
func (w *Workspace) Exec(ctx context.Context, command string, timeout time.Duration) (ExecResult, error) {
	return ExecResult{}, fmt.Errorf("running commands is not supported on %s", runtime.GOOS)
}
