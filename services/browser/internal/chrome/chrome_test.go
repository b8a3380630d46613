package chrome

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// start launches Chromium for one test; tests fail (not skip) without it.
func start(t *testing.T) context.Context {
	t.Helper()
	p, err := Find("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel, err := Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return ctx
}

func TestStart(t *testing.T) {
	sctx, cancel := chromedp.NewContext(start(t), chromedp.WithNewBrowserContext())
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.Navigate("data:text/html,<title>hi</title>")); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(sctx, chromedp.Title()); err != nil || title != "hi" {
		t.Fatalf("Title() = %q, %v; want hi", title, err)
	}
}

func TestFindMissing(t *testing.T) {
	if _, err := Find("/nonexistent/chromium"); err == nil {
		t.Fatal("Find(/nonexistent/chromium) = nil error")
	}
}

// TestCrashEndsContext: the browser context ends when Chromium dies, which is
// how a worker notices a crash.
func TestCrashEndsContext(t *testing.T) {
	ctx := start(t)
	proc := Process(ctx)
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
