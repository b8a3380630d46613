package browser_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// parseMetrics reads Prometheus text into name{label="value",…} → value.
func parseMetrics(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitStatus polls url until it answers code.
func awaitStatus(t *testing.T, url string, code int, within time.Duration) string {
	t.Helper()
	return kittest.EventuallyValue(t, within, func() (string, error) {
		got, body := get(t, url)
		return body, kittest.Check(got == code, "%s = %d %s, want %d", url, got, body, code)
	})
}

// TestServeHealth runs a worker as `sovereign browser` does (Serve, its
// listener on --listen) against a NATS server on a port: /readyz is 200
// once Chromium runs, 503 naming nats while NATS is down and 200 again
// after it is back; /metrics has the worker's session gauges; a second
// worker on the same --listen is refused with a hint.
func TestServeHealth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.Listening(t, dir)
	listen := kittest.FreeAddr(t)
	base := "http://" + listen
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- browser.Serve(ctx, browser.Config{ID: "observed", MaxSessions: 3, Listen: listen}, srv.URL())
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the worker did not stop within 20 s")
		}
	})
	kittest.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("the worker's /readyz = %d %s, want 200", resp.StatusCode, b)
		}
		if !strings.Contains(string(b), `"chromium":"ok"`) || !strings.Contains(string(b), `"nats":"ok"`) {
			t.Fatalf("/readyz = %s, want nats and chromium ok", b)
		}
		return nil
	})
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}

	f := &fleet{t: t, srv: srv.Server(), c: natstest.Bus(t, srv.Server())}
	s := f.mustOpen()
	if s.GetWorkerId() != "observed" {
		t.Fatalf("session opened on %q", s.GetWorkerId())
	}
	_, body := get(t, base+"/metrics")
	m := parseMetrics(t, strings.NewReader(body))
	for key, want := range map[string]float64{
		`sovereign_browser_sessions_open{worker="observed"}`:           1,
		`sovereign_browser_sessions_capacity{worker="observed"}`:       3,
		`sovereign_browser_chromium_restarts_total{worker="observed"}`: 0,
		`sovereign_browser_sessions_lost_total{worker="observed"}`:     0,
	} {
		if got, ok := m[key]; !ok || got != want {
			t.Errorf("%s = %v (present: %v), want %v", key, got, ok, want)
		}
	}
	if _, ok := m["sovereign_nats_reconnects_total{}"]; !ok {
		t.Error("/metrics has no sovereign_nats_reconnects_total")
	}

	// NATS down: not ready. Back on the same port: ready again.
	srv.Stop()
	if body := awaitStatus(t, base+"/readyz", 503, 30*time.Second); !strings.Contains(body, `"nats":"NATS connection is`) {
		t.Errorf("/readyz with NATS down = %s, want nats named", body)
	}
	srv.Start(dir)
	awaitStatus(t, base+"/readyz", 200, 30*time.Second)

	// The port is taken: a second worker says so and how to fix it.
	err := browser.Serve(ctx, browser.Config{ID: "second", Listen: listen}, srv.URL())
	if err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("a second worker on %s: %v, want a listen error naming --listen", listen, err)
	}
}

// TestCrashMetrics: a Chromium crash counts one restart and the sessions it
// took with it.
func TestCrashMetrics(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	w := f.worker(browser.Config{ID: "crashmetrics", MaxSessions: 2})
	mux := http.NewServeMux()
	health.Metrics(mux)
	scrape := func() map[string]float64 {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return parseMetrics(t, rec.Body)
	}
	const (
		open     = `sovereign_browser_sessions_open{worker="crashmetrics"}`
		restarts = `sovereign_browser_chromium_restarts_total{worker="crashmetrics"}`
		lost     = `sovereign_browser_sessions_lost_total{worker="crashmetrics"}`
	)
	f.mustOpen()
	f.mustOpen()
	// The counters are the process's: a run before this one in the same
	// process (go test -count=2) left its counts there, so count from here.
	before := scrape()
	if got := before[open]; got != 2 {
		t.Fatalf("sessions_open = %v, want 2", got)
	}
	if err := w.KillChromium(); err != nil {
		t.Fatal(err)
	}
	m := kittest.EventuallyValue(t, 30*time.Second, func() (map[string]float64, error) {
		m := scrape()
		return m, kittest.Check(m[restarts]-before[restarts] == 1, "no restart counted: %v (before the crash: %v)", m, before)
	})
	if got := m[lost] - before[lost]; got != 2 {
		t.Errorf("sessions_lost_total rose by %v, want 2", got)
	}
	if got := m[open]; got != 0 {
		t.Errorf("sessions_open after the crash = %v, want 0", got)
	}
}
