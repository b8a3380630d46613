package kittest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeTB records a Fatalf instead of failing the test.
type fakeTB struct{ fatal string }

func (*fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func TestEventuallyWaitsForCondition(t *testing.T) {
	var tb fakeTB
	calls := 0
	Eventually(&tb, 30*time.Second, func() error {
		calls++
		return Check(calls == 4, "call %d", calls)
	})
	if tb.fatal != "" || calls != 4 {
		t.Errorf("Eventually = fatal %q after %d calls, want success on call 4", tb.fatal, calls)
	}
}

func TestEventuallyValue(t *testing.T) {
	var tb fakeTB
	calls := 0
	got := EventuallyValue(&tb, 30*time.Second, func() (string, error) {
		calls++
		if calls < 3 {
			return "early", errors.New("not yet")
		}
		return "ready", nil
	})
	if got != "ready" || tb.fatal != "" {
		t.Errorf("EventuallyValue = %q, fatal %q; want %q and no failure", got, tb.fatal, "ready")
	}
}

func TestEventuallyFailsWithLastError(t *testing.T) {
	var tb fakeTB
	calls := 0
	start := time.Now()
	Eventually(&tb, 50*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("still %d", calls)
	})
	elapsed := time.Since(start)
	want := fmt.Sprintf("(%d tries): still %d", calls, calls)
	if !strings.HasPrefix(tb.fatal, "condition not met after ") || !strings.HasSuffix(tb.fatal, want) {
		t.Errorf("Eventually failed with %q, want the elapsed time and %q", tb.fatal, want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times in %s, want it retried", calls, elapsed)
	}
	if elapsed < 50*time.Millisecond {
		t.Errorf("Eventually gave up after %s, before its timeout", elapsed)
	}
}

func TestEventuallyCallsOnceAfterTimeout(t *testing.T) {
	// A zero timeout still checks the condition once.
	var tb fakeTB
	calls := 0
	Eventually(&tb, 0, func() error { calls++; return nil })
	if calls != 1 || tb.fatal != "" {
		t.Errorf("Eventually(0) = %d calls, fatal %q; want one call and success", calls, tb.fatal)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(true, "bad %d", 1); err != nil {
		t.Errorf("Check(true) = %v, want nil", err)
	}
	if err := Check(false, "bad %d", 1); err == nil || err.Error() != "bad 1" {
		t.Errorf("Check(false) = %v, want \"bad 1\"", err)
	}
}
