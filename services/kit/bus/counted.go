package bus

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Counted wraps a handler so that every answer counts in requests, a
// counter with the labels endpoint and outcome ("ok" or the error's code,
// like "NOT_FOUND"): what each service's sovereign_<service>_requests_total
// shows.
func Counted[Req, Resp any](requests *prometheus.CounterVec, endpoint string, h func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, r Req) (Resp, error) {
		resp, err := h(ctx, r)
		outcome := "ok"
		if err != nil {
			outcome = CodeOf(err).String()
		}
		requests.WithLabelValues(endpoint, outcome).Inc()
		return resp, err
	}
}
