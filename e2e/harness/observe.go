package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// StartObservedWorker is StartWorker with the worker's health and metrics
// listener on a port of its choosing; it returns the listener's base URL
// (http://127.0.0.1:port) once /readyz answers 200.
func (f *Fleet) StartObservedWorker(ctx context.Context, id string, maxSessions int, extra ...string) (*Worker, string, error) {
	w, err := f.startWorker(ctx, id, maxSessions, append([]string{"--listen", anyPort}, extra...)...)
	if err != nil {
		return nil, "", err
	}
	ready, err := w.LoggedURL(ctx, workerReadyTimeout, "browser worker health and metrics")
	if err != nil {
		return nil, "", err
	}
	if err := WaitHTTPReady(ctx, w.Proc, ready, workerReadyTimeout); err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	f.Workers = append(f.Workers, w)
	f.mu.Unlock()
	return w, strings.TrimSuffix(ready, "/readyz"), nil
}

// StopNATS stops the fleet's nats-server (SIGTERM, then SIGKILL after
// grace), as an outage would. RestartNATS brings it back.
func (f *Fleet) StopNATS(grace time.Duration) error {
	f.mu.Lock()
	n := f.NATS
	f.mu.Unlock()
	if n == nil {
		return errors.New("NATS is not running")
	}
	return n.Stop(grace)
}

// RestartNATS starts nats-server again on the same port with the same
// JetStream store (as StartNATS chose them) and waits until it accepts
// connections and JetStream answers. Processes connected before reconnect
// by themselves. The port is the one the first server bound, free since
// it stopped: this is the one place a fleet names a port, because a
// restart that moved would not be the outage the processes must survive.
func (f *Fleet) RestartNATS(ctx context.Context) (*NATS, error) {
	f.mu.Lock()
	old := f.NATS
	f.mu.Unlock()
	if old == nil {
		return nil, errors.New("start NATS before restarting it")
	}
	if exited, _ := old.Exited(); !exited {
		return nil, errors.New("NATS is still running: StopNATS first")
	}
	u, err := url.Parse(old.URL)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, err
	}
	n, err := f.runNATS(ctx, port, "again ")
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.NATS = n
	f.mu.Unlock()
	return n, nil
}

// Metrics is one scrape of a Prometheus /metrics: each sample keyed by
// name{label="value",…} with the labels sorted by name ({} for none). A
// histogram gives name_count{…} and name_sum{…}.
type Metrics map[string]float64

// Key builds a Metrics key from a name and label name/value pairs.
func Key(name string, labels ...string) string {
	var ls []string
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, labels[i]+`="`+labels[i+1]+`"`)
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// Scrape fetches and parses a /metrics URL with Prometheus's own text
// parser.
func Scrape(ctx context.Context, metricsURL string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", metricsURL, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", metricsURL, err)
	}
	out := Metrics{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				out[Key(name, labels...)] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[Key(name, labels...)] = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				out[Key(name, labels...)] = m.GetUntyped().GetValue()
			case m.GetHistogram() != nil:
				out[Key(name+"_count", labels...)] = float64(m.GetHistogram().GetSampleCount())
				out[Key(name+"_sum", labels...)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out, nil
}

// Status GETs url and returns its status code and (the start of) its body.
func Status(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// WaitStatus polls url until it answers code (a transport error counts as
// no answer) and returns the body of that answer and how long it took.
func WaitStatus(ctx context.Context, url string, code int, timeout time.Duration) (string, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer yet"
	for {
		got, body, err := Status(ctx, url)
		switch {
		case err == nil && got == code:
			return body, time.Since(start), nil
		case err == nil:
			last = fmt.Sprintf("%d %s", got, body)
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return "", time.Since(start), fmt.Errorf("waited %s for %s to answer %d; last: %s", timeout, url, code, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
