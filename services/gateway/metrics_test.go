package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sovereign-fleet/sovereign/services/gateway"
)

// scrape reads the gateway's /metrics into name{label="value",…} → value;
// a histogram gives name_count{…} and name_sum{…}.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[name+key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name+key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+key] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// TestToolMetrics: each tool call is counted by tool and by the outcome its
// audit record has (ok, error, timeout, denied), timed in the histogram,
// and an open that no worker can take is a no-capacity rejection.
func TestToolMetrics(t *testing.T) {
	needChromium(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<!doctype html><title>Metrics</title><p>hello"))
	}))
	t.Cleanup(site.Close)
	port := site.URL[strings.LastIndex(site.URL, ":")+1:]

	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 1)
	g, url := startGatewayG(t, srv, gateway.Config{PolicyConfig: gateway.PolicyConfig{AllowPrivate: true, URLBlock: []string{"127.0.0.3"}}})
	before := scrape(t, g.Handler())
	delta := func(after map[string]float64, key string) float64 { return after[key] - before[key] }

	c := modernClient(t, url, nil)
	res := callTool(t, c, "open", map[string]any{"url": site.URL})
	handle := metaSession(res)
	if res.IsError || handle == "" {
		t.Fatalf("open: %s", text(res))
	}
	for range 2 {
		if res := callTool(t, c, "get_title", map[string]any{"session": handle}); res.IsError {
			t.Fatalf("get_title: %s", text(res))
		}
	}
	if res := callTool(t, c, "click", map[string]any{"session": handle, "ref": "e99"}); !res.IsError {
		t.Fatal("click on a missing ref succeeded")
	}
	if res := callTool(t, c, "wait_for", map[string]any{"session": handle, "selector": "#never", "timeout": 50}); !res.IsError {
		t.Fatal("wait_for a missing element succeeded")
	}
	if res := callTool(t, c, "open", map[string]any{"session": handle, "url": "http://127.0.0.3:" + port + "/"}); !res.IsError {
		t.Fatalf("open of a blocked host succeeded: %s", text(res))
	}
	// The only worker holds its one session: another caller is refused.
	other := modernClient(t, url, nil)
	if res := callTool(t, other, "get_title", nil); !res.IsError || !strings.Contains(text(res), "no browser capacity") {
		t.Fatalf("a second session on a full fleet: %v %s", res.IsError, text(res))
	}

	after := scrape(t, g.Handler())
	for key, want := range map[string]float64{
		`sovereign_tool_calls_total{outcome="ok",tool="open"}`:          1,
		`sovereign_tool_calls_total{outcome="denied",tool="open"}`:      1,
		`sovereign_tool_calls_total{outcome="ok",tool="get_title"}`:     2,
		`sovereign_tool_calls_total{outcome="error",tool="get_title"}`:  1,
		`sovereign_tool_calls_total{outcome="error",tool="click"}`:      1,
		`sovereign_tool_calls_total{outcome="timeout",tool="wait_for"}`: 1,
		`sovereign_tool_call_duration_seconds_count{tool="get_title"}`:  3,
		`sovereign_tool_call_duration_seconds_count{tool="open"}`:       2,
		`sovereign_no_capacity_total{}`:                                 1,
	} {
		if got := delta(after, key); got != want {
			t.Errorf("%s grew by %v, want %v", key, got, want)
		}
	}
	if sum := delta(after, `sovereign_tool_call_duration_seconds_sum{tool="open"}`); sum <= 0 || sum > 60 {
		t.Errorf("two opens took %v s in the histogram", sum)
	}
}
