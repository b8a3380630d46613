// Package browser is the browser worker: one shared Chromium per process
// (and one per session opened on a base profile, profile.go), many
// isolated sessions (one browser context each, with its tabs), served on the
// bus as nats.go/micro endpoints.
//
// Subjects (prefix "sov"):
//
//	sov.browser.open              open a session; a queue group of the workers
//	                              that have free capacity (a full worker leaves it)
//	sov.browser.restore           open a session from the checkpoint of a lost
//	                              one (checkpoint.go); the same queue group
//	sov.browser.w.<id>.call       run a tool in one of this worker's sessions
//	sov.browser.w.<id>.close      close a session
//	sov.browser.w.<id>.ping       liveness and load
//	sov.browser.w.<id>.open       open a session on this worker (placement by
//	                              the gateway from the loads, load.go)
//	sov.browser.w.<id>.restore    restore a session on this worker
//	sov.browser.load              each worker's headroom, published every second
//	sov.browser.http              send one call of a custom HTTP tool; a queue
//	                              group of every worker (http.go)
//	sov.browser.storage           import or export a saved storage; a queue
//	                              group of the workers with the key
//	                              (storage_transfer.go)
package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/chrome"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/guard"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Version is reported in micro service info.
const Version = "0.1.0"

// Config configures a worker.
type Config struct {
	// ID names the worker in subjects; default: host name and a random suffix.
	ID string
	// Chrome is the Chromium to drive: a path, or one of chrome.Auto
	// (the headless shell when installed, else the full browser),
	// chrome.Shell, chrome.Full; empty means SOVEREIGN_CHROME, then auto.
	Chrome string
	// ChromeSandbox: auto (default: Chromium's sandbox unless root), on or
	// off; see chrome.Sandbox.
	ChromeSandbox string
	// MaxSessions caps the sessions this worker holds (default 16).
	MaxSessions int
	// IdleTimeout closes a session that had no call for this long (default 10m).
	IdleTimeout time.Duration
	// AllowedSchemes are the URL schemes open and tab_new accept
	// (default http, https, about).
	AllowedSchemes []string
	// SecretKey decrypts the operator secrets that fill, type, open and
	// tab_new may name as {{secrets.NAME}} (secrets.go); nil: none.
	SecretKey *secrets.Key
	// Listen is host:port for /healthz, /readyz and /metrics when Serve
	// runs the worker (metrics.go); empty for none.
	Listen string
	// ProfileDir is where the worker makes its own directory (profile.go),
	// which Run removes: the base profiles it fetched, the private copies
	// its sessions run on, its sessions' upload and download files and
	// its Chromium's user data directory. Default: the system's temporary
	// directory (TMPDIR). Not a flag: tests set it.
	ProfileDir string
	// ProfileLimits bound a base profile's archive when a session unpacks
	// it; zero: SOVEREIGN_PROFILE_MAX_UPLOAD_MB and
	// SOVEREIGN_PROFILE_MAX_UNPACKED_MB.
	ProfileLimits profiles.Limits
	// WarmSessions is how many browser contexts the worker keeps ready
	// for new sessions (pool.go): 0 means min(2, MaxSessions), below 0
	// none. Open sessions plus warm ones never exceed MaxSessions.
	WarmSessions int
	// MinFreeMemory is the available memory (bytes) below which the
	// worker takes no new session (load.go); 0: 256 MiB, below 0: never.
	MinFreeMemory int64
	// CheckpointEvery is the longest a session goes without a checkpoint
	// (checkpoint.go; default 3s); a change is checkpointed sooner. Below
	// zero: no checkpoints. Checkpoints need SecretKey.
	CheckpointEvery time.Duration
	// CheckpointTTL is how long a checkpoint outlives its last write
	// (default 1h).
	CheckpointTTL time.Duration
	// ConsoleBuffer and NetworkBuffer are how many console messages and
	// requests each tab keeps for console_messages and network_requests
	// (default 500 each); MaxPDFBytes caps what pdf returns (default 10
	// MiB). See package page.
	ConsoleBuffer int
	NetworkBuffer int
	MaxPDFBytes   int
	// MaxProfileFileBytes caps the gzipped file of performance_stop and
	// heap_snapshot (default 20 MiB), MaxProfileReadBytes how much of a
	// trace or heap snapshot a tab reads (default 256 MiB). See package page.
	MaxProfileFileBytes int
	MaxProfileReadBytes int
	// MaxStorageBytes bounds one saved storage, sealed (storage.go;
	// default 900 KiB).
	MaxStorageBytes int
	// Files bound upload_file (files.go); zero fields take the defaults.
	Files FileLimits
	// Downloads bound downloads (downloads.go); zero fields take the
	// defaults.
	Downloads DownloadLimits
	// LighthouseDir is the directory of the Lighthouse runner
	// (services/browser/lighthouse: run.mjs, its node_modules installed by
	// `make lighthouse`) that lighthouse_audit runs with node; empty: the
	// tool answers FAILED_PRECONDITION and says how to install it.
	LighthouseDir string
}

// Worker runs one Chromium and its sessions.
type Worker struct {
	cfg     Config
	exec    string
	sandbox chrome.Sandbox
	log     *slog.Logger

	c    *bus.Conn
	life app.Lifetime // Run until Close

	mu       sync.Mutex
	browser  context.Context // chromedp browser context; nil while Chromium is down
	stop     func()          // stops that Chromium and waits for it to exit
	guard    *guard.Guard    // enforces URL policies in that Chromium
	sessions map[string]*session
	lost     map[string]string  // session id → why it was lost
	openSvc  micro.Service      // nil while the worker is full or down
	secrets  *secrets.Cache     // operator secrets; nil without SecretKey
	profiles *profileCache      // base profiles (profile.go); set by Run
	stopping <-chan struct{}    // closed when Run's context ends; nil before Run
	ready    chan struct{}      // closed once the worker serves its endpoints
	ckpt     *checkpoints       // nil while checkpoints are off (checkpoint.go); set by Run
	storage  jetstream.KeyValue // saved storage (storage.go); nil without a secret key; set by Run
	warm     []*session         // warm browser contexts of the shared Chromium (pool.go)
	warmKick chan struct{}      // wakes the pool's refill loop
	// warmEnforced is the kind of warm context the pool makes: under the
	// URL policy guard or not (the kind the last open asked for).
	warmEnforced bool
	warmTaken    int64                 // opens that took a warm context
	loadKick     chan struct{}         // asks for a load report now (load.go)
	lighthouse   chan struct{}         // one Lighthouse run at a time (page.Options.LighthouseSlot)
	traces       *page.TraceTurns      // the sessions' performance recordings take turns (page.Options.Traces)
	pressure     bool                  // under memory pressure: no new sessions (load.go)
	dlStore      jetstream.ObjectStore // the fleet's downloads (downloads.go); nil: none; set by Run
}

var subjectToken = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Resolve returns cfg with its defaults filled in (a worker ID from the
// host name and a random suffix when it has none) and checks it, so that a
// caller can name the worker's NATS connection before New.
func (cfg Config) Resolve() (Config, error) {
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = host + "-" + randomHex(3)
	}
	cfg.ID = strings.Trim(subjectToken.ReplaceAllString(cfg.ID, "-"), "-")
	if cfg.ID == "" {
		return cfg, errors.New("worker id is empty after removing characters a NATS subject token cannot hold")
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 16
	}
	if cfg.MaxSessions < 0 {
		return cfg, fmt.Errorf("max sessions %d: must be at least 1", cfg.MaxSessions)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.IdleTimeout < 0 {
		return cfg, fmt.Errorf("idle timeout %s: must be positive", cfg.IdleTimeout)
	}
	if cfg.Chrome == "" {
		cfg.Chrome = os.Getenv("SOVEREIGN_CHROME")
	}
	if cfg.MinFreeMemory == 0 {
		cfg.MinFreeMemory = 256 << 20
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 3 * time.Second
	}
	if cfg.CheckpointTTL == 0 {
		cfg.CheckpointTTL = time.Hour
	}
	for _, l := range []struct {
		name string
		v    *int
		def  int
		max  int
	}{
		{"console buffer", &cfg.ConsoleBuffer, page.DefaultConsoleBuffer, 100000},
		{"network buffer", &cfg.NetworkBuffer, page.DefaultNetworkBuffer, 100000},
		{"max pdf bytes", &cfg.MaxPDFBytes, page.DefaultMaxPDFBytes, bus.MaxReply / 2},
		{"max profile file bytes", &cfg.MaxProfileFileBytes, page.DefaultMaxProfileFileBytes, bus.MaxReply / 2},
		{"max profile read bytes", &cfg.MaxProfileReadBytes, page.DefaultMaxProfileReadBytes, 4 << 30},
		{"max storage bytes", &cfg.MaxStorageBytes, DefaultMaxStorageBytes, 64 << 20},
	} {
		if *l.v == 0 {
			*l.v = l.def
		}
		if *l.v < 1 || *l.v > l.max {
			return cfg, fmt.Errorf("%s %d: must be 1-%d", l.name, *l.v, l.max)
		}
	}
	if cfg.CheckpointTTL < time.Second {
		return cfg, fmt.Errorf("checkpoint ttl %s: must be at least 1s", cfg.CheckpointTTL)
	}
	if cfg.LighthouseDir != "" {
		dir, err := filepath.Abs(cfg.LighthouseDir)
		if err == nil {
			_, err = os.Stat(filepath.Join(dir, "run.mjs"))
		}
		if err != nil {
			return cfg, fmt.Errorf("lighthouse dir %q: no Lighthouse runner there (run.mjs of services/browser/lighthouse): %w", cfg.LighthouseDir, err)
		}
		cfg.LighthouseDir = dir
	}
	cfg.Downloads = cfg.Downloads.withDefaults()
	if cfg.Downloads.MaxBytes < 0 || cfg.Downloads.TTL < 0 || cfg.Downloads.Wait < 0 || cfg.Downloads.SessionMaxBytes < 0 {
		return cfg, fmt.Errorf("download limits %+v: must be positive", cfg.Downloads)
	}
	cfg.Files = cfg.Files.withDefaults()
	if err := cfg.Files.validate(); err != nil {
		return cfg, err
	}
	var err error
	if cfg.ProfileLimits == (profiles.Limits{}) {
		if cfg.ProfileLimits, err = profiles.LimitsFromEnv(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// New checks cfg (see Config.Resolve) and returns a worker on c; a bad
// configuration is an app.UsageError. The worker does its I/O in Run
// (Chromium, endpoints, secrets); call Close when done.
func New(_ context.Context, cfg Config, c *bus.Conn) (*Worker, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, app.UsageError{Err: err}
	}
	exec, err := chrome.Find(cfg.Chrome)
	if err != nil {
		return nil, app.UsageError{Err: err}
	}
	sandbox, err := chrome.ParseSandbox(cfg.ChromeSandbox)
	if err != nil {
		return nil, app.UsageError{Err: err}
	}
	return &Worker{
		cfg:      cfg,
		c:        c,
		exec:     exec,
		sandbox:  sandbox,
		log:      slog.Default().With("worker", cfg.ID),
		sessions: make(map[string]*session),
		lost:     make(map[string]string),
		ready:    make(chan struct{}),
		warmKick: make(chan struct{}, 1),
		// The gateway's default blocks private addresses: its opens are
		// enforced.
		warmEnforced: true,
		loadKick:     make(chan struct{}, 1),
		lighthouse:   make(chan struct{}, 1),
		traces:       &page.TraceTurns{},
	}, nil
}

// Ready is closed once the worker takes sessions (Chromium started,
// endpoints served).
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Run serves cfg.Listen (when set), starts Chromium, serves the worker's
// endpoints and blocks until ctx ends or Close is called; then it closes
// every session and stops Chromium. A Chromium that dies is restarted; the
// sessions it held fail with SESSION_LOST.
func (w *Worker) Run(ctx context.Context) error { return w.life.Run(ctx, w.run) }

// Close stops Run and waits for it to return (up to ctx's end): the
// sessions closed, Chromium stopped, the profile directory removed.
func (w *Worker) Close(ctx context.Context) error { return w.life.Stop(ctx) }

func (w *Worker) run(ctx context.Context) error {
	c := w.c
	w.mu.Lock()
	w.stopping = ctx.Done()
	w.mu.Unlock()
	defer track(w)() // metrics.go

	if w.cfg.Listen != "" {
		if err := w.serveHealth(ctx, c); err != nil { // metrics.go
			return err
		}
	}

	if err := w.openSecrets(ctx, c); err != nil { // secrets.go
		return fmt.Errorf("operator secrets: %w", err)
	}
	if w.secrets != nil {
		defer w.secrets.Close()
	}
	w.openDownloads(ctx, c)                           // downloads.go
	if err := w.openCheckpoints(ctx, c); err != nil { // checkpoint.go
		return fmt.Errorf("session checkpoints: %w", err)
	}
	if err := w.openStorage(ctx, c); err != nil { // storage.go
		return fmt.Errorf("saved storage: %w", err)
	}
	if err := w.openProfiles(); err != nil { // profile.go
		return err
	}
	defer w.profiles.close() // after shutdown closed the sessions
	if err := w.startChrome(ctx); err != nil {
		return err
	}
	defer w.stopChrome()  // Run returns once Chromium exited
	var bg sync.WaitGroup // closes what is left of the sessions of a Chromium that died
	defer bg.Wait()       // before the profile directory goes
	svc, err := c.AddService(browserbus.WorkerService, Version, "Sovereign browser worker "+w.cfg.ID,
		map[string]string{"worker_id": w.cfg.ID})
	if err != nil {
		return fmt.Errorf("add browser service: %w", err)
	}
	defer svc.Stop()
	g := svc.AddGroup(browserbus.WorkerGroup(c, w.cfg.ID), micro.WithGroupQueueGroupDisabled())
	ep := browserbus.Of(w.cfg.ID)
	for name, h := range map[string]micro.Handler{
		ep.Call.Name:    bus.Handle(c, w.call),
		ep.Close.Name:   bus.Handle(c, w.closeSession),
		ep.Ping.Name:    bus.Handle(c, w.ping),
		ep.Open.Name:    bus.Handle(c, scrubbed(w, w.open)),    // placed by the gateway (load.go)
		ep.Restore.Name: bus.Handle(c, scrubbed(w, w.restore)), // checkpoint.go
	} {
		if err := g.AddEndpoint(name, h); err != nil {
			return fmt.Errorf("add endpoint %s: %w", name, err)
		}
	}
	if err := w.addHTTPEndpoint(c, svc); err != nil { // custom HTTP tools (http.go)
		return fmt.Errorf("add endpoint http: %w", err)
	}
	if err := w.addStorageEndpoint(c, svc); err != nil { // storage_transfer.go
		return fmt.Errorf("add endpoint storage: %w", err)
	}
	w.mu.Lock()
	w.updateOpenLocked()
	w.mu.Unlock()
	if err := c.Served(); err != nil { // ready means an open finds the worker
		return err
	}
	close(w.ready)
	w.log.Info("browser worker ready", "chrome", w.exec, "max_sessions", w.cfg.MaxSessions, "idle_timeout", w.cfg.IdleTimeout.String())

	var loops sync.WaitGroup
	defer loops.Wait()                         // they end with ctx; a close waits for a checkpoint under way
	loops.Go(func() { w.checkpointLoop(ctx) }) // checkpoint.go
	loops.Go(func() { w.warmLoop(ctx) })       // pool.go
	loops.Go(func() { w.loadLoop(ctx) })       // load.go

	reap := time.NewTicker(min(w.cfg.IdleTimeout/4, 30*time.Second))
	defer reap.Stop()
	for {
		w.mu.Lock()
		browserDone := w.browser.Done()
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.shutdown()
			return nil
		case <-reap.C:
			w.reapIdle()
		case <-browserDone:
			if ctx.Err() != nil {
				continue
			}
			w.chromeDied(ctx, &bg)
		}
	}
}

// startChrome launches the shared Chromium; the caller holds no lock.
//
// Its user data directory is in the worker's directory (profile.go), so a
// worker killed before it could remove it leaves it to the next worker's
// sweep; stopping this Chromium removes it, and a restart after a crash
// removes the dead one's first.
func (w *Worker) startChrome(ctx context.Context) error {
	w.mu.Lock()
	prev := w.stop
	w.mu.Unlock()
	if prev != nil {
		prev()
	}
	dir, err := os.MkdirTemp(w.profiles.dir, "chrome-")
	if err != nil {
		return fmt.Errorf("chromium's user data directory: %w", err)
	}
	bctx, g, cancel, err := w.launch(ctx, chromedp.UserDataDir(dir))
	if err != nil {
		removeAll(dir)
		return err
	}
	stop := sync.OnceFunc(func() {
		cancel()
		removeAll(dir)
	})
	w.mu.Lock()
	w.browser, w.guard, w.stop = bctx, g, stop
	w.mu.Unlock()
	context.AfterFunc(ctx, stop)
	return nil
}

// stopChrome stops the shared Chromium and waits for it to exit; the
// caller holds no lock.
func (w *Worker) stopChrome() {
	w.mu.Lock()
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// launch starts a Chromium with the worker's executable, flags and
// sandbox, and a URL policy guard on its connection; extra adds allocator
// options (a base profile session's user data directory). The Chromium
// stops when ctx ends or cancel is called; cancel waits for it to exit.
// The caller holds no lock.
func (w *Worker) launch(ctx context.Context, extra ...chromedp.ExecAllocatorOption) (context.Context, *guard.Guard, context.CancelFunc, error) {
	g := guard.New(w.log)
	bctx, cancel, err := chrome.StartWrapped(ctx, w.exec, w.sandbox, g.Wrap, extra...)
	if err != nil {
		return nil, nil, nil, err
	}
	g.Bind(bctx)
	return bctx, g, cancel, nil
}

// chromeDied marks every session of the shared Chromium lost and starts a
// new Chromium, retrying with backoff until it starts or ctx ends. Base
// profile sessions run in Chromiums of their own and stay.
func (w *Worker) chromeDied(ctx context.Context, bg *sync.WaitGroup) {
	w.mu.Lock()
	lost := w.takeSharedLocked()
	for _, s := range lost {
		w.markLostLocked(s.id, "its Chromium crashed")
	}
	cold := w.drainWarmLocked() // pool.go
	w.stopOpenLocked()
	w.mu.Unlock()
	n := len(lost)
	sessionsLost.WithLabelValues(w.cfg.ID).Add(float64(n)) // metrics.go
	// Their tabs died with Chromium; closing only releases what is left.
	// It must not hold up the restart, nor w.mu (pings and other calls).
	bg.Go(func() { closeAll(lost); closeAll(cold) })
	w.log.Error("chromium died; restarting it", "lost_sessions", n)
	backoff := time.Second
	for ctx.Err() == nil {
		err := w.startChrome(ctx)
		if err == nil {
			w.mu.Lock()
			w.updateOpenLocked()
			w.mu.Unlock()
			chromiumRestarts.WithLabelValues(w.cfg.ID).Inc() // metrics.go
			w.log.Info("chromium restarted")
			return
		}
		w.log.Error("restart chromium", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (w *Worker) markLostLocked(id, why string) {
	if len(w.lost) >= 10000 { // bounded: forget the oldest-ish half
		for k := range w.lost {
			delete(w.lost, k)
			if len(w.lost) < 5000 {
				break
			}
		}
	}
	w.lost[id] = why
}

func (w *Worker) shutdown() {
	w.mu.Lock()
	w.stopOpenLocked()
	all := append(w.takeSessionsLocked(), w.drainWarmLocked()...)
	w.mu.Unlock()
	closeAll(all)
}

// takeSessionsLocked empties the session table and returns what it held.
func (w *Worker) takeSessionsLocked() []*session {
	all := make([]*session, 0, len(w.sessions))
	for _, s := range w.sessions {
		all = append(all, s)
	}
	w.sessions = make(map[string]*session)
	return all
}

// takeSharedLocked removes the sessions of the shared Chromium from the
// session table and returns them.
func (w *Worker) takeSharedLocked() []*session {
	var shared []*session
	for id, s := range w.sessions {
		if s.own == nil {
			shared = append(shared, s)
			delete(w.sessions, id)
		}
	}
	return shared
}

// closeAll closes sessions in parallel; each waits a bounded time for its
// running call.
func closeAll(all []*session) {
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.closeTabs)
	}
	wg.Wait()
}

// updateOpenLocked joins the open queue group while the worker has room and
// leaves it when it is full, so that an open request only reaches workers
// that can take it, and a full fleet answers "no responders" at once.
func (w *Worker) updateOpenLocked() {
	room := w.acceptingLocked() // load.go
	switch {
	case room && w.openSvc == nil:
		svc, err := w.c.AddService("sovereign-browser-open", Version, "Opens browser sessions on workers with free capacity",
			map[string]string{"worker_id": w.cfg.ID})
		if err != nil {
			w.log.Error("join open queue", "err", err)
			return
		}
		err = svc.AddEndpoint(browserbus.Open.Name, bus.Handle(w.c, scrubbed(w, w.open)),
			micro.WithEndpointSubject(browserbus.Open.Subject(w.c)),
			micro.WithEndpointQueueGroup("sovereign-browser-open"))
		if err == nil {
			err = svc.AddEndpoint(browserbus.Restore.Name, bus.Handle(w.c, scrubbed(w, w.restore)), // checkpoint.go
				micro.WithEndpointSubject(browserbus.Restore.Subject(w.c)),
				micro.WithEndpointQueueGroup("sovereign-browser-open"))
		}
		if err != nil {
			_ = svc.Stop()
			w.log.Error("join open queue", "err", err)
			return
		}
		w.openSvc = svc
	case !room:
		w.stopOpenLocked()
	}
}

func (w *Worker) stopOpenLocked() {
	if w.openSvc != nil {
		_ = w.openSvc.Stop()
		w.openSvc = nil
	}
}

func (w *Worker) open(ctx context.Context, req *browserv1.OpenSessionRequest) (*browserv1.OpenSessionResponse, error) {
	return w.openWith(ctx, req, nil)
}

// openWith opens a session as req asks; then, when fill is set, runs it on
// the session before anyone else can (restore puts a checkpoint in).
func (w *Worker) openWith(ctx context.Context, req *browserv1.OpenSessionRequest, fill func(context.Context, *session) error) (*browserv1.OpenSessionResponse, error) {
	w.mu.Lock()
	if len(w.sessions) >= w.cfg.MaxSessions || w.browser == nil || w.browser.Err() != nil {
		w.mu.Unlock()
		return nil, bus.Errorf(commonv1.ErrorCode_NO_CAPACITY, "browser worker %s is at its limit of %d sessions", w.cfg.ID, w.cfg.MaxSessions)
	}
	if w.pressure {
		w.mu.Unlock()
		return nil, bus.Errorf(commonv1.ErrorCode_NO_CAPACITY, "browser worker %s is under memory pressure (less than %d MiB available): it takes no new session", w.cfg.ID, w.cfg.MinFreeMemory>>20)
	}
	id := "s" + randomHex(12)
	var s *session
	var drop []*session             // warm contexts to close: dead, or beyond the free slots
	s, drop = w.takeWarmLocked(req) // pool.go
	warm := s != nil
	if warm {
		s.id, s.owner = id, req.GetOwner()
	} else {
		// busy until started: the idle reaper must not close a session
		// that is still opening.
		s = newSession(id, req.GetOwner(), w.browser, w.guard)
		// window.nostr asks the signer (nostr.go).
		s.bus, s.log = w.c, w.log
	}
	s.limits, s.fileRoot = w.cfg.Files, w.profiles.filesDir() // files.go
	s.dlLimits, s.dlStore = w.cfg.Downloads, w.dlStore        // downloads.go
	s.lock <- struct{}{}                                      // held until started: no call or close runs on a half-made session
	w.sessions[id] = s                                        // reserve the slot before the slow part
	drop = append(drop, w.trimWarmLocked()...)                // a cold open may take a warm context's slot
	w.updateOpenLocked()
	w.mu.Unlock()
	closeAll(drop)

	var err error
	switch {
	case warm:
		err = s.applyPolicy(ctx, req.GetPolicy()) // the caller's policy replaces the warm one
	case req.GetProfile() != "":
		err = w.startProfile(ctx, s, req.GetProfile(), req.GetPolicy()) // profile.go
	default:
		err = s.start(ctx, w.pageOptions(), req.GetPolicy())
	}
	if err == nil {
		err = s.enableDownloads(ctx) // downloads.go
	}
	if err == nil && fill != nil {
		err = fill(ctx, s)
	}
	if err == nil && ctx.Err() != nil {
		// The caller gave up: nobody will use or close this session.
		err = ctx.Err()
	}
	s.mu.Lock()
	s.busy, s.lastUsed = 0, time.Now()
	s.mu.Unlock()
	<-s.lock
	if err != nil {
		w.mu.Lock()
		delete(w.sessions, id)
		w.updateOpenLocked()
		w.mu.Unlock()
		s.closeTabs()
		var be *bus.Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "open browser session on %s: %v", w.cfg.ID, err)
	}
	w.markChanged(id) // checkpoint.go
	w.kickLoad()      // load.go
	w.log.InfoContext(ctx, "session opened", "session", id, "owner", s.owner, "profile", req.GetProfile(), "warm", warm)
	return &browserv1.OpenSessionResponse{SessionId: id, WorkerId: w.cfg.ID}, nil
}

func (w *Worker) pageOptions() page.Options {
	o := page.Options{AllowedSchemes: w.cfg.AllowedSchemes, ConsoleBuffer: w.cfg.ConsoleBuffer,
		NetworkBuffer: w.cfg.NetworkBuffer, MaxPDFBytes: w.cfg.MaxPDFBytes,
		MaxProfileFileBytes: w.cfg.MaxProfileFileBytes, MaxProfileReadBytes: w.cfg.MaxProfileReadBytes,
		LighthouseDir: w.cfg.LighthouseDir, LighthouseSlot: w.lighthouse, Traces: w.traces}
	return o
}

// get returns the session or the error that explains why there is none.
func (w *Worker) get(id string) (*session, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.sessions[id]; ok {
		return s, nil
	}
	if why, ok := w.lost[id]; ok {
		return nil, bus.Errorf(commonv1.ErrorCode_SESSION_LOST, "browser session %s was lost: %s", id, why)
	}
	return nil, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND,
		"browser session %s is not open on worker %s (closed, or idle for more than %s)", id, w.cfg.ID, w.cfg.IdleTimeout)
}

func (w *Worker) call(ctx context.Context, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	s, err := w.get(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	tool, ok := catalog.ForRequest(req)
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the request names no tool")
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if s.ctx.Err() != nil { // closed while this call waited for its turn
		return nil, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND, "browser session %s was closed", s.id)
	}
	// The idle reaper (and close) take a session out of w.sessions before
	// they cancel it: one taken out between get and acquire still has a
	// live context here, and would be cancelled under this call. Now
	// that the call is counted busy, a session still in w.sessions stays
	// there (the reaper sees it busy); one already gone says why.
	if cur, err := w.get(s.id); err != nil {
		return nil, err
	} else if cur != s {
		return nil, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND, "browser session %s was closed", s.id)
	}
	run, err := w.withSecrets(tool, req) // secrets.go: values only in this copy
	if err != nil {
		return nil, err
	}
	if run != req {
		ctx = page.WithSecretInput(ctx) // fields typed into draw discs: pixels are not scrubbed
	}
	var res *browserv1.ToolResult
	if tool.Storage.Of(run) {
		res, err = w.storageCall(ctx, s, tool, run) // storage.go
	} else {
		res, err = s.do(ctx, run, w.pageOptions())
	}
	w.markChanged(s.id) // checkpointed once this call releases the session (checkpoint.go)
	if err != nil && s.browser.Err() != nil && !w.isStopping() {
		// Chromium went away under the call: say so, not a CDP error.
		return nil, bus.Errorf(commonv1.ErrorCode_SESSION_LOST, "browser session %s was lost: its Chromium crashed", s.id)
	}
	if err != nil {
		return nil, w.scrubErr(err)
	}
	res, err = w.scrubResult(res)
	return res, w.scrubErr(err)
}

// isStopping reports whether Run's context ended.
func (w *Worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stoppingLocked()
}

func (w *Worker) stoppingLocked() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false // running, or not started (nil channel)
	}
}

func (w *Worker) closeSession(ctx context.Context, req *browserv1.CloseSessionRequest) (*browserv1.CloseSessionResponse, error) {
	w.mu.Lock()
	s, ok := w.sessions[req.GetSessionId()]
	if ok {
		delete(w.sessions, s.id)
		w.updateOpenLocked()
	}
	w.mu.Unlock()
	if !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND, "browser session %s is not open on worker %s", req.GetSessionId(), w.cfg.ID)
	}
	s.closeTabs()
	w.kickWarm()                // a slot is free: pool.go
	w.kickLoad()                // load.go
	w.dropCheckpoint(ctx, s.id) // checkpoint.go
	w.log.InfoContext(ctx, "session closed", "session", s.id)
	return &browserv1.CloseSessionResponse{}, nil
}

func (w *Worker) ping(context.Context, *browserv1.PingRequest) (*browserv1.PingResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &browserv1.PingResponse{WorkerId: w.cfg.ID, Sessions: int32(len(w.sessions)), MaxSessions: int32(w.cfg.MaxSessions)}, nil
}

// reapIdle closes sessions idle for longer than the idle timeout.
func (w *Worker) reapIdle() {
	cutoff := time.Now().Add(-w.cfg.IdleTimeout)
	var idle []*session
	w.mu.Lock()
	for id, s := range w.sessions {
		if s.idleSince().Before(cutoff) {
			idle = append(idle, s)
			delete(w.sessions, id)
		}
	}
	if len(idle) > 0 {
		w.updateOpenLocked()
	}
	w.mu.Unlock()
	for _, s := range idle {
		s.closeTabs()
		w.dropCheckpoint(context.Background(), s.id) // checkpoint.go
		w.log.Info("session closed after idle timeout", "session", s.id, "idle_timeout", w.cfg.IdleTimeout.String())
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// KillChromium kills the worker's Chromium process, as a crash would. It is
// for tests and chaos drills.
func (w *Worker) KillChromium() error {
	w.mu.Lock()
	b := w.browser
	w.mu.Unlock()
	if b == nil {
		return errors.New("chromium is not running")
	}
	p := chrome.Process(b)
	if p == nil {
		return errors.New("chromium process unknown")
	}
	return p.Kill()
}
