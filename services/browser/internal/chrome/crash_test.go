package chrome

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestCrashEndsContext: the browser context ends when Chromium dies, which is
// how a worker notices a crash.
func TestCrashEndsContext(t *testing.T) {
	p, err := Find("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel, err := Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	proc := chromedp.FromContext(ctx).Browser.Process()
	if proc == nil {
		t.Fatal("no chromium process")
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("browser context still alive 10s after Chromium was killed")
	}
}
