package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var noCapacityTotal = promauto.NewCounter(prometheus.CounterOpts{
	Name: "sovereign_no_capacity_total",
	Help: "Browser session opens refused because no worker could take one (every worker at --max-sessions, or none running).",
})
