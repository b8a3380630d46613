// Package app is the start-up and shutdown that every Sovereign binary
// shares: logging, telemetry from OTEL_*, signals, and the NATS connection.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/logging"
	"github.com/sovereign-fleet/sovereign/services/kit/telemetry"
)

// Main runs run under a context that ends on SIGINT or SIGTERM, with the
// default logger and the tracer provider set up for service. It exits 2 on a
// usage error (flag parsing) and 1 when run fails.
func Main(service string, run func(ctx context.Context) error) {
	logging.Setup(service)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if addr := os.Getenv("SOVEREIGN_PPROF"); addr != "" {
		servePprof(ctx, addr)
	}
	shutdown, err := telemetry.Setup(ctx, service)
	if err != nil {
		slog.Error("telemetry", "err", err)
		os.Exit(1)
	}
	err = run(ctx)
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := shutdown(flushCtx); ferr != nil {
		slog.Warn("flush traces", "err", ferr)
	}
	var usage UsageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		slog.Error(service+" failed", "err", err)
		os.Exit(1)
	}
}

// servePprof serves net/http/pprof on addr (SOVEREIGN_PPROF, e.g.
// 127.0.0.1:6060) for profiling a live process. Off unless set.
func servePprof(ctx context.Context, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		slog.Info("pprof serving", "url", "http://"+addr+"/debug/pprof/")
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("pprof", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
}

// UsageError is a bad flag or environment value; Main exits 2 on it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Connect opens a NATS connection named name to url that reconnects for
// ever (counted in sovereign_nats_disconnects_total and
// sovereign_nats_reconnects_total), and wraps it in a bus with the given
// subject prefix. The returned close func waits (up to 10 s) for in-flight
// handlers to reply, then drains the connection.
func Connect(url, name, prefix string, opts ...nats.Option) (*bus.Conn, func(), error) {
	if url == "" {
		url = nats.DefaultURL
	}
	if err := config.CheckJetStreamReplicas(); err != nil {
		return nil, nil, UsageError{Err: err}
	}
	opts = append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			countDisconnect(nc) // metrics.go
			if err != nil {
				slog.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			natsReconnects.Inc()
			slog.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	c, err := bus.New(nc, prefix)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, func() {
		// Let handlers that are still running reply before the drain.
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Wait(wctx); err != nil {
			slog.Warn("handlers still running at shutdown", "err", err)
		}
		_ = c.Close()
		if err := nc.Drain(); err != nil {
			nc.Close()
			return
		}
		for deadline := time.Now().Add(10 * time.Second); !nc.IsClosed() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		nc.Close()
	}, nil
}
