package signer

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
)

var (
	identitiesGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "sovereign_signer_identities",
		Help: "Browser sessions with a Nostr identity logged in.",
	})
	requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_signer_requests_total",
		Help: "Signer requests by endpoint and outcome (ok or the error code).",
	}, []string{"endpoint", "outcome"})
	policyTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_signer_policy_decisions_total",
		Help: "Origin-policy decisions on window.nostr requests: allow, deny, ask_approved, ask_denied.",
	}, []string{"decision"})
)

// counted wraps a bus handler to count its outcomes in requestsTotal.
func counted[Req, Resp any](name string, h func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return bus.Counted(requestsTotal, name, h)
}

// serveHealth serves /healthz, /readyz and /metrics on cfg.Listen until ctx
// ends.
func (s *Service) serveHealth(ctx context.Context) error {
	addr, err := health.Serve(ctx, s.cfg.Listen, health.NATS(s.bus.NATS()))
	if err != nil {
		return err
	}
	s.log.Info("signer health and metrics", "url", "http://"+addr.String()+"/readyz")
	return nil
}
