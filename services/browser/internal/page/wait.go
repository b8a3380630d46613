package page

import (
	"context"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

const (
	// defaultWait is how long wait waits when ms is 0.
	defaultWait = time.Second
	// maxWait is the longest wait.
	maxWait = 60 * time.Second
	// defaultWaitFor is how long wait_for waits when timeout_ms is 0.
	defaultWaitFor = 10 * time.Second
	// pollEvery is how often wait_for looks for its selector.
	pollEvery = 50 * time.Millisecond
)

// wait sleeps ms milliseconds (default 1000), at most a minute and never
// past the request deadline.
func (t *Tab) wait(ctx context.Context, ms int32) (*browserv1.ToolResult, error) {
	if ms < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait needs ms >= 0 (milliseconds to wait), not %d", ms)
	}
	d := defaultWait
	if ms > 0 {
		d = time.Duration(ms) * time.Millisecond
	}
	note := ""
	if d > maxWait {
		d, note = maxWait, " (the longest wait is 60000 ms)"
	}
	if soft := time.Until(softDeadline(ctx, 0)); d > soft {
		d, note = max(soft, 0), " (cut short by the request deadline)"
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return textResult("Waited %d ms%s", d.Milliseconds(), note), nil
}

// found is what page.js's find says about a selector.
type found struct {
	Visible bool   `json:"visible"`
	Desc    string `json:"desc"`
}

// waitFor waits until an element that matches selector is visible in the
// main frame, for timeoutMs (default 10000) and never past the request
// deadline. It keeps looking across navigations.
func (t *Tab) waitFor(ctx context.Context, selector string, timeoutMs int32) (*browserv1.ToolResult, error) {
	selector = strings.TrimSpace(selector)
	if selector == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for needs selector, a CSS selector such as #results")
	}
	if timeoutMs < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for needs timeout_ms >= 0, not %d", timeoutMs)
	}
	limit := defaultWaitFor
	if timeoutMs > 0 {
		limit = time.Duration(timeoutMs) * time.Millisecond
	}
	start := time.Now()
	deadline := softDeadline(ctx, limit)
	var last *found
	for {
		f, err := t.find(ctx, selector)
		if err != nil {
			return nil, err
		}
		if f != nil && f.Visible {
			return textResult("Found %s: %s (after %d ms)", selector, t.noteDesc(f.Desc), time.Since(start).Milliseconds()), nil
		}
		if f != nil {
			last = f
		}
		wait := min(pollEvery, time.Until(deadline))
		if wait <= 0 {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	waited := time.Since(start).Milliseconds()
	why := "the timeout"
	if limit > time.Since(start)+pollEvery {
		why = "the request deadline"
	}
	if last != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "wait_for: %q matches an element, but it stayed hidden for %d ms (%s)", selector, waited, why)
	}
	return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "wait_for: no element matched %q within %d ms (%s); check the selector or take a snapshot", selector, waited, why)
}

// find looks once for selector in the main frame. A page between two
// documents counts as not found; a bad selector is an error.
func (t *Tab) find(ctx context.Context, selector string) (*found, error) {
	var f *found
	err := t.callWorld(ctx, t.main(), `function(s) { return __sov.find(s, ''); }`, &f, selector)
	if je, ok := err.(*jsError); ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "selector %q is not valid CSS: %s", selector, firstLines(je.Error(), 1))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, nil // the page is navigating; look again
	}
	return f, nil
}
