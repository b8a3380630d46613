package app

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Every connection Connect opens counts here, so each service's /metrics
// shows how often it lost NATS and got it back.
var (
	natsDisconnects = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_nats_disconnects_total",
		Help: "Times a NATS connection of this process lost its server (not counting its own close at shutdown).",
	})
	natsReconnects = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_nats_reconnects_total",
		Help: "Times a NATS connection of this process reconnected after losing its server.",
	})
)

// countDisconnect counts a disconnect unless it is the connection's own
// close (Close and Drain call the handler too, with the connection closed).
func countDisconnect(nc *nats.Conn) {
	if !nc.IsClosed() {
		natsDisconnects.Inc()
	}
}
