package harness

import (
	"context"
	"errors"
)

// Signer is a running `sovereign signer`.
type Signer struct {
	*Proc
	// Base is its health and metrics URL (http://127.0.0.1:port).
	Base string
}

// StartSigner starts `sovereign signer` with its data in dataDir and waits
// for /readyz. env adds environment variables (e.g. the passphrase).
func (f *Fleet) StartSigner(ctx context.Context, dataDir string, env []string, extra ...string) (*Signer, error) {
	if f.NATS == nil {
		return nil, errors.New("start NATS before the signer")
	}
	args := append([]string{"signer", "--nats-url", f.NATS.URL, "--listen", anyPort, "--data-dir", dataDir}, extra...)
	p, base, err := f.startService(ctx, "signer", "signer health and metrics", args, env)
	if err != nil {
		return nil, err
	}
	return &Signer{Proc: p, Base: base}, nil
}
