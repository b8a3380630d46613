package page

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var tracer = otel.Tracer("github.com/sovereign-fleet/sovereign/services/browser/internal/page")

// Spans of the page-level actions a tool is made of, children of the
// worker's tool span (browser.<tool>). Their attributes are counts and
// sizes: never a URL, a selector, a script or anything from the page.
const (
	spanAttach     = "page.attach"     // first use of a tab: attach, listen, set up
	spanNavigate   = "page.navigate"   // Page.navigate and its history and reload kin
	spanLoad       = "page.load"       // waiting for the navigation to load
	spanSnapshot   = "page.snapshot"   // one frame's snapshot (child frames nest)
	spanScreenshot = "page.screenshot" // Page.captureScreenshot
	spanEvaluate   = "page.evaluate"   // Runtime.evaluate of a script
	spanClick      = "page.click"      // the mouse events of a click
	spanSettle     = "page.settle"     // waiting for what an action started
)

// startSpan starts the span of one page-level action.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends s, failed when err is not nil. The status says the kind of
// failure (error.type: the bus code, timeout, canceled or _OTHER), not the
// message, which may quote the page.
func endSpan(s trace.Span, err error) {
	if err != nil {
		typ := errorType(err)
		s.SetStatus(codes.Error, typ)
		s.SetAttributes(attribute.String("error.type", typ))
	}
	s.End()
}

func errorType(err error) string {
	var be *bus.Error
	switch {
	case errors.As(err, &be):
		return be.Code.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}
