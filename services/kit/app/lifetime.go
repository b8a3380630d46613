package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Lifetime ties a service's Run to its Close, the contract every Sovereign
// service follows: New(ctx, cfg, conn) builds it, Run(ctx) serves until ctx
// ends or Close is called, and Close(ctx) stops Run, waits for it to return
// (up to ctx's end) and then releases what New acquired. The zero value is
// ready to use.
type Lifetime struct {
	mu      sync.Mutex
	stopped bool
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// ErrRunning is what a second concurrent Run returns.
var ErrRunning = errors.New("already running")

// Run calls run with a context that ends when ctx ends or Stop is called,
// and returns what run returns. After Stop it returns nil at once.
func (l *Lifetime) Run(ctx context.Context, run func(context.Context) error) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	if l.running {
		l.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	l.running, l.cancel, l.done = true, cancel, make(chan struct{})
	done := l.done
	l.mu.Unlock()
	defer func() {
		cancel()
		l.mu.Lock()
		l.running = false
		l.mu.Unlock()
		close(done)
	}()
	return run(ctx)
}

// Stop ends Run's context and waits for Run to return, or for ctx to end
// (then it returns ctx's error). Run is not started after Stop.
func (l *Lifetime) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return nil // Run never started
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Service is the contract of a Sovereign service: built by
// New(ctx, cfg, conn), served by Run and stopped by Close (see Lifetime).
type Service interface {
	Run(ctx context.Context) error
	Close(ctx context.Context) error
}

// CloseTimeout bounds a service's Close once its Run has ended.
const CloseTimeout = 30 * time.Second

// Serve connects to NATS at natsURL as name, builds a service on the
// connection with newService, runs it until ctx ends, then closes it (up
// to CloseTimeout) and the connection: what a service's own binary does.
// It returns Run's error; Close's is logged.
func Serve[S Service](ctx context.Context, natsURL, name string, newService func(context.Context, *bus.Conn) (S, error)) error {
	c, closeConn, err := Connect(natsURL, name, "")
	if err != nil {
		return err
	}
	defer closeConn()
	s, err := newService(ctx, c)
	if err != nil {
		return err
	}
	err = s.Run(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CloseTimeout)
	defer cancel()
	if cerr := s.Close(cctx); cerr != nil {
		slog.Warn("close", "service", name, "err", cerr)
	}
	return err
}
