// Package chrome finds and starts the Chromium that a worker drives.
package chrome

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

// HeadlessShell is where Debian's chromium-headless-shell package installs
// the headless shell: Chromium's content layer and DevTools without the
// browser UI, which costs about half the CPU per operation of the full
// browser in headless mode.
const HeadlessShell = "/usr/lib/chromium/chromium-headless-shell"

// Choices of Find besides a path.
const (
	Auto  = "auto"           // the headless shell when installed, else the full browser
	Shell = "headless-shell" // the headless shell only
	Full  = "full"           // the full browser only
)

var (
	shellNames = []string{"chromium-headless-shell", "chrome-headless-shell", "headless_shell"}
	fullNames  = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}
)

// Find returns the Chromium executable for choice (from --chrome or
// SOVEREIGN_CHROME): "" or Auto prefers the headless shell (HeadlessShell,
// else one of shellNames on PATH) and falls back to the full browser (the
// first of fullNames on PATH); Shell and Full take only that kind; anything
// else is the path of the executable.
func Find(choice string) (string, error) {
	switch choice {
	case "", Auto:
		if p, ok := find(HeadlessShell, shellNames); ok {
			return p, nil
		}
		if p, ok := find("", fullNames); ok {
			return p, nil
		}
		return "", errors.New("no Chromium found: install it (Debian: apt-get install -y chromium-headless-shell chromium) or set SOVEREIGN_CHROME to its path")
	case Shell:
		if p, ok := find(HeadlessShell, shellNames); ok {
			return p, nil
		}
		return "", errors.New("no Chromium headless shell found: install it (Debian: apt-get install -y chromium-headless-shell) or set SOVEREIGN_CHROME to its path")
	case Full:
		if p, ok := find("", fullNames); ok {
			return p, nil
		}
		return "", errors.New("no full Chromium found: install it (Debian: apt-get install -y chromium) or set SOVEREIGN_CHROME to its path")
	}
	if _, err := os.Stat(choice); err != nil {
		return "", fmt.Errorf("chromium at %s: %w", choice, err)
	}
	return choice, nil
}

// find returns path when that file exists, else the first of names on PATH.
func find(path string, names []string) (string, bool) {
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path, true
		}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Sandbox says whether Chromium runs its own sandbox.
type Sandbox string

// Sandbox settings.
const (
	// SandboxAuto runs the sandbox unless the process is root (Chromium
	// refuses to run as root with it).
	SandboxAuto Sandbox = "auto"
	// SandboxOn always runs it. As non-root it needs unprivileged user
	// namespaces, which the default seccomp profiles of Docker and
	// Kubernetes forbid (deploy/chromium-seccomp.json allows them).
	SandboxOn Sandbox = "on"
	// SandboxOff never runs it: the container (non-root, no capabilities,
	// seccomp) is then the only wall between a page and the worker.
	SandboxOff Sandbox = "off"
)

// ParseSandbox reads auto, on or off ("" is auto).
func ParseSandbox(s string) (Sandbox, error) {
	switch v := Sandbox(strings.ToLower(strings.TrimSpace(s))); v {
	case "":
		return SandboxAuto, nil
	case SandboxAuto, SandboxOn, SandboxOff:
		return v, nil
	}
	return "", fmt.Errorf("chrome sandbox %q: want auto, on or off", s)
}

// Options are the allocator options for a headless worker Chromium. They
// keep it quiet on a closed network (no background networking, component
// updates, sync or first-run work) and run it without the sandbox when
// sandbox says so (auto: when the process is root, which Chromium otherwise
// refuses).
//
// Cross-site iframes stay in their page's renderer (site isolation off), so
// snapshots and refs reach into them; each session is still its own browser
// context with its own cookies and storage. docs/security.md says so.
func Options(execPath, userDataDir string, sandbox Sandbox) []chromedp.ExecAllocatorOption {
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
		// WebRTC may only use the session's proxy (which checks the URL
		// policy), never direct UDP to arbitrary addresses.
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("disable-features", "SitePerProcess,IsolateOrigins,Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.WindowSize(1280, 800),
	)
	if sandbox == SandboxOff || sandbox != SandboxOn && os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	if userDataDir != "" {
		opts = append(opts, chromedp.UserDataDir(userDataDir))
	}
	opts = append(opts, processOptions()...)
	return opts
}

// Start launches Chromium and returns a browser context (the first tab is
// created by chromedp) and a cancel func that stops the process and its
// child processes, and waits for them to exit. The
// returned context is done when the browser goes away, crash included.
func Start(ctx context.Context, execPath string) (context.Context, context.CancelFunc, error) {
	return StartWrapped(ctx, execPath, SandboxAuto, nil)
}

// StartWrapped is Start with the connection to Chromium passed through
// wrap, which may read and write messages of its own on it (the URL policy
// guard does). With a wrap the connection is a websocket to a debugging
// port on 127.0.0.1 instead of a pipe: chromedp takes no other transport.
// The port's HTTP endpoints answer only requests whose Host is an address
// or localhost, and its websocket refuses pages (no
// --remote-allow-origins); the address and its browser id are random.
// extra options go after the worker's (a base profile session's
// user data directory and proxy).
func StartWrapped(ctx context.Context, execPath string, sandbox Sandbox, wrap func(chromedp.Transport) chromedp.Transport, extra ...chromedp.ExecAllocatorOption) (context.Context, context.CancelFunc, error) {
	opts := append(Options(execPath, "", sandbox), extra...)
	devtools := new(atomic.Pointer[string])
	if wrap != nil {
		opts = append(opts, chromedp.WithDialer(func(ctx context.Context, wsURL string) (chromedp.Transport, error) {
			c, err := remote.DialContext(ctx, wsURL)
			if err != nil {
				return nil, err
			}
			devtools.Store(&wsURL)
			return wrap(c), nil
		}))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.WithValue(ctx, devToolsKey{}, devtools), opts...)
	bctx, cancelB := chromedp.NewContext(allocCtx, chromedp.WithBrowserOption(chromedp.WithBrowserErrorf(browserErrorf)))
	if err := chromedp.Do(bctx); err != nil {
		cancelB()
		cancelAlloc()
		return nil, nil, fmt.Errorf("start chromium %s: %w", execPath, err)
	}
	var pid int
	if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		pid = c.Browser.Process().Pid
	}
	return bctx, func() {
		cancelB()
		cancelAlloc()
		// Chromium's child processes (the network service, which keeps
		// the HTTP cache) outlive the browser process for a while and
		// write into the user data directory, creating directories again
		// after the caller removed it: stop them too.
		stopGroup(pid)
	}, nil
}

type devToolsKey struct{}

// DevToolsURL returns the browser websocket address (ws://127.0.0.1:…/
// devtools/browser/…) of the Chromium that ctx, a browser context from
// StartWrapped or a tab context made from it, belongs to; "" when that
// Chromium talks over a pipe (no wrap). Another DevTools client (the
// Lighthouse runner) connects there.
func DevToolsURL(ctx context.Context) string {
	if p, ok := ctx.Value(devToolsKey{}).(*atomic.Pointer[string]); ok {
		if u := p.Load(); u != nil {
			return *u
		}
	}
	return ""
}

// browserErrorf logs chromedp's browser errors, except the detach of a
// session that chromedp did not attach: the URL policy guard attaches its
// own sessions (see package guard), and chromedp reports each of their
// detaches as an error.
func browserErrorf(format string, args ...any) {
	if strings.HasPrefix(format, "executor for %q doesn't exist") {
		return
	}
	log.Printf("ERROR: "+format, args...)
}

// Process returns the Chromium process behind a browser context from Start.
func Process(browserCtx context.Context) *os.Process {
	if c := chromedp.FromContext(browserCtx); c != nil && c.Browser != nil {
		return c.Browser.Process()
	}
	return nil
}
