package harness

import (
	"context"
	"errors"
	"fmt"
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
	var s *Signer
	err := onFreePort(func(port int) (*Proc, error) {
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		args := append([]string{"signer", "--nats-url", f.NATS.URL, "--listen", listen, "--data-dir", dataDir}, extra...)
		p, err := StartProc("signer", f.Bins.Sovereign, args, env, f.Tee)
		if err != nil {
			return nil, err
		}
		f.add(p)
		s = &Signer{Proc: p, Base: "http://" + listen}
		return p, WaitHTTPReady(ctx, p, s.Base+"/readyz", gatewayReadyTimeout)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
