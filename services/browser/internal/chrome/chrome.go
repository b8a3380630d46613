// Package chrome finds and starts the Chromium that a worker drives.
package chrome

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Find returns the Chromium executable: path when it is set (from --chrome or
// SOVEREIGN_CHROME), else the first of chromium, chromium-browser,
// google-chrome, google-chrome-stable, chrome on PATH.
func Find(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("chromium at %s: %w", path, err)
		}
		return path, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found: install it (Debian: apt-get install -y chromium) or set SOVEREIGN_CHROME to its path")
}

// Options are the allocator options for a headless worker Chromium. They
// keep it quiet on a closed network (no background networking, component
// updates, sync or first-run work) and run it without the sandbox when the
// process is root, which Chromium otherwise refuses.
//
// Cross-site iframes stay in their page's renderer (site isolation off), so
// snapshots and refs reach into them; each session is still its own browser
// context with its own cookies and storage. docs/security.md says so.
func Options(execPath, userDataDir string) []chromedp.ExecAllocatorOption {
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(execPath),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-features", "SitePerProcess,IsolateOrigins,Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.WindowSize(1280, 800),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	if userDataDir != "" {
		opts = append(opts, chromedp.UserDataDir(userDataDir))
	}
	return opts
}

// Start launches Chromium and returns a browser context (the first tab is
// created by chromedp) and a cancel func that stops the process. The
// returned context is done when the browser goes away, crash included.
func Start(ctx context.Context, execPath string) (context.Context, context.CancelFunc, error) {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, Options(execPath, "")...)
	bctx, cancelB := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(bctx); err != nil {
		cancelB()
		cancelAlloc()
		return nil, nil, fmt.Errorf("start chromium %s: %w", execPath, err)
	}
	return bctx, func() { cancelB(); cancelAlloc() }, nil
}

// Process returns the Chromium process behind a browser context from Start.
func Process(browserCtx context.Context) *os.Process {
	if c := chromedp.FromContext(browserCtx); c != nil && c.Browser != nil {
		return c.Browser.Process()
	}
	return nil
}
