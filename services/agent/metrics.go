package agent

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
)

var (
	runsStarted = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_agent_runs_started_total",
		Help: "Agent runs started on this replica.",
	})
	runsEnded = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_agent_runs_ended_total",
		Help: "Agent runs ended, by outcome: complete, capped (complete at the iteration cap), error, cancelled, restarted (given up after a replica died).",
	}, []string{"outcome"})
	runsActive = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "sovereign_agent_runs_active",
		Help: "Agent runs this replica works on.",
	})
	modelRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_agent_model_requests_total",
		Help: "Model calls (chat completions, retries included in one call), by outcome: ok, timeout, cancelled, unreachable, http_<status>, bad_reply, error.",
	}, []string{"outcome"})
	modelSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "sovereign_agent_model_request_seconds",
		Help:    "Duration of model calls, retries included.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 20, 40, 60, 120, 300},
	})
	toolCalls = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_agent_tool_calls_total",
		Help: "Tool calls of agent runs, by outcome: ok, tool_error, bus_error, timeout, malformed (unknown tool or arguments that are not a JSON object).",
	}, []string{"outcome"})
	requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_agent_requests_total",
		Help: "Agent bus requests by endpoint and outcome (ok or the error code).",
	}, []string{"endpoint", "outcome"})
)

// counted wraps a bus handler to count its outcomes in requestsTotal.
func counted[Req, Resp any](name string, h func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return bus.Counted(requestsTotal, name, h)
}

// serveHealth serves /healthz, /readyz and /metrics on cfg.Listen until ctx
// ends.
func (a *Agent) serveHealth(ctx context.Context) error {
	addr, err := health.Serve(ctx, a.cfg.Listen, health.NATS(a.bus.NATS()))
	if err != nil {
		return err
	}
	a.log.Info("agent health and metrics", "url", "http://"+addr.String()+"/readyz")
	return nil
}
