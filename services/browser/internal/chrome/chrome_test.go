package chrome

import (
	"context"
	"os"
	"strings"
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

func TestFind(t *testing.T) {
	for _, choice := range []string{"", Auto, Shell, Full} {
		p, err := Find(choice)
		if err != nil {
			t.Logf("Find(%q): %v", choice, err) // not installed here
			continue
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Find(%q) = %s, which is missing: %v", choice, p, err)
		}
	}
	if _, err := os.Stat(HeadlessShell); err == nil {
		if p, err := Find(""); err != nil || p != HeadlessShell {
			t.Errorf("Find(\"\") = %q, %v; want %s (installed)", p, err, HeadlessShell)
		}
	}
	if p, err := Find(Full); err == nil && strings.Contains(p, "headless") {
		t.Errorf("Find(%q) = %s, want the full browser", Full, p)
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

func TestSandbox(t *testing.T) {
	for in, want := range map[string]Sandbox{"": SandboxAuto, "auto": SandboxAuto, "ON": SandboxOn, " off ": SandboxOff} {
		if got, err := ParseSandbox(in); err != nil || got != want {
			t.Errorf("ParseSandbox(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSandbox("maybe"); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("ParseSandbox(maybe): %v", err)
	}
	// Options renders NoSandbox as the no-sandbox flag: count the options
	// each setting produces against auto.
	base := len(Options("/bin/chromium", "", SandboxOn))
	if got := len(Options("/bin/chromium", "", SandboxOff)); got != base+1 {
		t.Errorf("off adds %d options, want 1 (no-sandbox)", got-base)
	}
	auto := len(Options("/bin/chromium", "", SandboxAuto))
	if root := os.Geteuid() == 0; root != (auto == base+1) {
		t.Errorf("auto as uid %d: %d options, on: %d", os.Geteuid(), auto, base)
	}
}
