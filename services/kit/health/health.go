// Package health serves /healthz (the process is up) and /readyz (its
// dependencies answer) for every service.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency is usable.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Register adds /healthz and /readyz to mux.
func Register(mux *http.ServeMux, checks ...Check) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status := map[string]string{}
		code := http.StatusOK
		for _, c := range checks {
			if err := c.Func(ctx); err != nil {
				status[c.Name] = err.Error()
				code = http.StatusServiceUnavailable
			} else {
				status[c.Name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(status)
	})
}

// Metrics adds /metrics: the process's Prometheus metrics (default
// registry, with Go runtime and process collectors).
func Metrics(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.Handler())
}

// NATS is the readiness check of a NATS connection: ready while it is
// connected (not while it reconnects, drains or is closed).
func NATS(nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(context.Context) error {
		if st := nc.Status(); st != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", st)
		}
		return nil
	}}
}

// Serve serves /healthz, /readyz (checks) and /metrics on addr until ctx
// ends. It returns once the listener is open, with its address (addr may
// name port 0).
func Serve(ctx context.Context, addr string, checks ...Check) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	Register(mux, checks...)
	Metrics(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return ln.Addr(), nil
}
