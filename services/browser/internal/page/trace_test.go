package page

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// The span recorder of this test binary. The package's tracer comes from
// the global provider, which delegates to the first provider ever set and
// to no later one: a second TestSpans in the same process (go test
// -count=2) sets the provider once, with the recorder of the first.
var (
	tracingOnce sync.Once
	tracingRec  *tracetest.SpanRecorder
	tracingTP   *sdktrace.TracerProvider
)

func testTracing() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	tracingOnce.Do(func() {
		tracingRec = tracetest.NewSpanRecorder()
		tracingTP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracingRec))
		otel.SetTracerProvider(tracingTP) // the only test of this binary that sets one
	})
	return tracingRec, tracingTP
}

// TestSpans: each tool's page-level actions are spans under the caller's
// span, with sizes and counts but nothing from the page, its URL or the
// script.
func TestSpans(t *testing.T) {
	rec, tp := testTracing()
	start := len(rec.Ended()) // spans of an earlier run in this process are not this run's
	const secret = "TOPSECRET-content"
	srv := serve(t, map[string]string{
		"/": `<title>` + secret + `</title><p>` + secret + `</p>
			<a href="/next?token=` + secret + `">go</a>
			<iframe src="/frame"></iframe>`,
		"/frame": `<button>` + secret + ` in a frame</button>`,
		"/next":  `<title>next</title><p>arrived</p>`,
	})
	tab := newTab(t, Options{})

	for _, tt := range []struct {
		req  *browserv1.ToolRequest
		want []string // span names under the tool's span
	}{
		{openReq(srv.URL + "/?q=" + secret), []string{spanAttach, spanNavigate, spanLoad}},
		{snapReq(false, false), []string{spanSnapshot, spanSnapshot}}, // the page and its frame
		{evalReq("document.title.length + '" + secret + "'.length"), []string{spanEvaluate}},
		{shotReq(&browserv1.Screenshot{}), []string{spanScreenshot}},
		{clickReq(sel("a")), []string{spanClick, spanSettle}},
	} {
		name := toolName(tt.req)
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			ctx, parent := tp.Tracer("test").Start(ctx, "browser."+name)
			before := len(rec.Ended())
			_, err := tab.Do(ctx, tt.req)
			parent.End()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			spans := rec.Ended()[before:]
			var got []string
			for _, s := range spans {
				if s == nil || s.Name() == "browser."+name {
					continue
				}
				got = append(got, s.Name())
				if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
					t.Errorf("%s is in another trace", s.Name())
				}
				if !inTree(s, spans, parent.SpanContext().SpanID()) {
					t.Errorf("%s is not under the tool's span", s.Name())
				}
				for _, a := range s.Attributes() {
					if v := a.Value.Emit(); strings.Contains(v, secret) || strings.Contains(v, srv.URL) {
						t.Errorf("%s attribute %s = %q: page content or URL in a span", s.Name(), a.Key, v)
					}
				}
			}
			for _, w := range tt.want {
				if !remove(&got, w) {
					t.Errorf("spans %v lack %s", got, w)
				}
			}
		})
	}

	// Sizes and counts are there.
	for _, s := range rec.Ended()[start:] {
		switch s.Name() {
		case spanSnapshot:
			if attr(s, "sovereign.frame") == "0" && (attr(s, "sovereign.snapshot.size") == "0" || attr(s, "sovereign.frame.children") != "1") {
				t.Errorf("snapshot of the main frame: %v", s.Attributes())
			}
		case spanScreenshot:
			if attr(s, "sovereign.screenshot.size") == "" || attr(s, "sovereign.screenshot.area") != "viewport" {
				t.Errorf("screenshot: %v", s.Attributes())
			}
		case spanLoad:
			if attr(s, "http.response.status_code") != "200" {
				t.Errorf("load: %v", s.Attributes())
			}
		case spanSettle:
			if attr(s, "sovereign.navigation.committed") != "true" {
				t.Errorf("settle after a link click: %v", s.Attributes())
			}
		}
	}
}

// inTree reports whether s descends from the span id root among spans.
func inTree(s sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan, root trace.SpanID) bool {
	for range spans {
		if s.Parent().SpanID() == root {
			return true
		}
		var up sdktrace.ReadOnlySpan
		for _, p := range spans {
			if p.SpanContext().SpanID() == s.Parent().SpanID() {
				up = p
			}
		}
		if up == nil {
			return false
		}
		s = up
	}
	return false
}

func remove(list *[]string, s string) bool {
	for i, v := range *list {
		if v == s {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}
