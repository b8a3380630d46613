// Package kittest holds the test helpers that every Sovereign module
// shares: waiting for a condition instead of sleeping (Eventually), and
// running a service until the test ends (RunService).
//
// A test that waits for something to happen (a worker to come up, a
// record to reach the audit trail, a page to log) polls for it with
// Eventually rather than sleeping a fixed time: it goes on as soon as the
// condition holds, and on a loaded machine it waits longer instead of
// failing. A failure names the condition's last error and how long it
// was waited for.
package kittest

import (
	"fmt"
	"time"
)

// TB is the part of testing.TB that the helpers use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Backoff between two calls of a condition: the first retry comes after
// minBackoff, each later one after twice the one before, up to maxBackoff.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
)

// Eventually calls cond until it returns nil, with a short backoff
// between calls, and fails the test (Fatalf) with cond's last error if
// that has not happened within timeout. cond runs on the test's
// goroutine, so it may itself fail the test when it sees that waiting
// longer cannot help.
func Eventually(tb TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	EventuallyValue(tb, timeout, func() (struct{}, error) { return struct{}{}, cond() })
}

// EventuallyValue calls f until it returns a nil error, as Eventually
// does, and returns the value it returned then.
func EventuallyValue[T any](tb TB, timeout time.Duration, f func() (T, error)) T {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	backoff := minBackoff
	for tries := 1; ; tries++ {
		v, err := f()
		if err == nil {
			return v
		}
		if !time.Now().Before(deadline) {
			tb.Fatalf("condition not met after %s (%d tries): %v", time.Since(start).Round(time.Millisecond), tries, err)
			var zero T
			return zero // tb's Fatalf returned (it is not a *testing.T)
		}
		time.Sleep(min(backoff, time.Until(deadline)))
		backoff = min(2*backoff, maxBackoff)
	}
}

// Check returns nil when ok holds and an error made from format and
// args when it does not: the shape of a condition that is a plain test,
// as in
//
//	kittest.Eventually(t, 30*time.Second, func() error {
//		n := len(store.Records())
//		return kittest.Check(n == 3, "%d records, want 3", n)
//	})
func Check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
