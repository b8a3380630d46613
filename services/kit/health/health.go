// Package health serves /healthz (the process is up) and /readyz (its
// dependencies answer) for every service.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

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
