package browser

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
)

// Worker metrics. Each series has the worker's id as its "worker" label:
// `sovereign up` runs several workers in one process (their series show on
// its gateway's /metrics); a standalone worker serves them on --listen.
var (
	chromiumRestarts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_browser_chromium_restarts_total",
		Help: "Times the worker restarted its Chromium after it died.",
	}, []string{"worker"})
	sessionsLost = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_browser_sessions_lost_total",
		Help: "Browser sessions lost because their Chromium died.",
	}, []string{"worker"})
	checkpointsWritten = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_browser_checkpoints_written_total",
		Help: "Session checkpoints the worker wrote into the fleet (checkpoint.go).",
	}, []string{"worker"})

	sessionsOpenDesc = prometheus.NewDesc("sovereign_browser_sessions_open",
		"Browser sessions the worker holds (those still opening included).", []string{"worker"}, nil)
	sessionsCapacityDesc = prometheus.NewDesc("sovereign_browser_sessions_capacity",
		"Browser sessions the worker holds at most (--max-sessions).", []string{"worker"}, nil)

	running = &workerSet{workers: map[*Worker]struct{}{}}
)

func init() { prometheus.MustRegister(running) }

// workerSet is the running workers of this process; as a Prometheus
// collector it reads their session gauges at scrape time.
type workerSet struct {
	mu      sync.Mutex
	workers map[*Worker]struct{}
}

// track adds w to the running workers until the returned func is called.
// Its counters show from 0 on; a worker of the same id that ran before it
// in this process left its counts there, and this one counts on from them.
func track(w *Worker) (untrack func()) {
	chromiumRestarts.WithLabelValues(w.cfg.ID)
	sessionsLost.WithLabelValues(w.cfg.ID)
	checkpointsWritten.WithLabelValues(w.cfg.ID)
	running.mu.Lock()
	running.workers[w] = struct{}{}
	running.mu.Unlock()
	return func() {
		running.mu.Lock()
		delete(running.workers, w)
		running.mu.Unlock()
	}
}

func (s *workerSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsOpenDesc
	ch <- sessionsCapacityDesc
}

func (s *workerSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	workers := make([]*Worker, 0, len(s.workers))
	for w := range s.workers {
		workers = append(workers, w)
	}
	s.mu.Unlock()
	for _, w := range workers {
		w.mu.Lock()
		n := len(w.sessions)
		w.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(sessionsOpenDesc, prometheus.GaugeValue, float64(n), w.cfg.ID)
		ch <- prometheus.MustNewConstMetric(sessionsCapacityDesc, prometheus.GaugeValue, float64(w.cfg.MaxSessions), w.cfg.ID)
	}
}

// serveHealth serves /healthz, /readyz and /metrics on cfg.Listen until ctx
// ends. Ready means NATS connected and Chromium running with the worker's
// endpoints served.
func (w *Worker) serveHealth(ctx context.Context, c *bus.Conn) error {
	addr, err := health.Serve(ctx, w.cfg.Listen, health.NATS(c.NATS()),
		health.Check{Name: "chromium", Func: w.chromiumReady})
	if err != nil {
		return fmt.Errorf("%w (another worker on this host? give each its own --listen, or --listen '' for none)", err)
	}
	w.log.Info("browser worker health and metrics", "url", "http://"+addr.String()+"/readyz")
	return nil
}

// chromiumReady reports whether the worker takes sessions: started, and its
// Chromium alive (not restarting).
func (w *Worker) chromiumReady(context.Context) error {
	select {
	case <-w.ready:
	default:
		return errors.New("starting")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.browser == nil || w.browser.Err() != nil {
		return errors.New("no Chromium running (it is restarting)")
	}
	return nil
}
