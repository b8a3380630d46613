package browser

// Base profiles: a session opened with OpenSessionRequest.profile starts
// from a private copy of that profile (a Chromium user data directory,
// services/kit/profiles). A browser context cannot start from a profile
// directory, so such a session gets a Chromium of its own, launched by the
// worker's launch (same flags, sandbox and URL policy guard as the shared
// one) with --user-data-dir on the copy; its tabs live in that Chromium's
// default browser context, which holds the profile's cookies and storage.
// Closing the session (or its idle timeout, or the worker's shutdown)
// stops that Chromium and removes the copy. The stored profile is never
// written: the worker keeps the archives it fetched, by digest, and
// unpacks a new copy for every session.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/guard"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
)

// launcher starts a Chromium as the worker does, with extra allocator
// options; see Worker.launch.
type launcher func(extra ...chromedp.ExecAllocatorOption) (context.Context, *guard.Guard, context.CancelFunc, error)

// ownChrome is the Chromium of a session opened on a base profile, and the
// private copy of the profile it runs on.
type ownChrome struct {
	dir  string
	stop context.CancelFunc // stops the Chromium; nil until launched
	once sync.Once
}

// close stops the Chromium (waiting for it to exit) and removes the copy.
func (o *ownChrome) close() {
	o.once.Do(func() {
		if o.stop != nil {
			o.stop()
		}
		removeAll(o.dir)
	})
}

// removeAll removes dir, retrying for up to 10 s: Chromium's child
// processes (network and storage services) can still write into it for a
// while after the browser exits, longer on a loaded machine.
func removeAll(dir string) {
	var err error
	wait := 20 * time.Millisecond
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
	slog.Default().Warn("remove a session's profile copy", "dir", dir, "err", err)
}

// startOwn starts the session in a Chromium of its own whose user data
// directory is dir (a private copy of a base profile), with the URL
// policy p in force before its first tab loads anything.
func (s *session) startOwn(ctx context.Context, opts page.Options, p *browserv1.UrlPolicy, dir string, launch launcher) error {
	s.own = &ownChrome{dir: dir}
	params, err := s.prepareGuard(p)
	if err != nil {
		return err
	}
	extra := []chromedp.ExecAllocatorOption{chromedp.UserDataDir(dir)}
	if params.ProxyServer != "" {
		// The browser-wide equivalent of the WebSocket proxy a shared
		// session's browser context is created with (package guard).
		extra = append(extra, chromedp.ProxyServer(params.ProxyServer), chromedp.Flag("proxy-bypass-list", params.ProxyBypassList))
	}
	bctx, g, stop, err := launch(extra...)
	if err != nil {
		return err
	}
	s.own.stop = stop
	s.browser, s.guard = bctx, g
	// The page Chromium opened at start is in the default browser
	// context, the one on the profile.
	first := chromedp.FromContext(bctx).Target.TargetID
	cctx, cancel := within(bctx, ctx)
	defer cancel()
	info, err := chromedp.CallBrowser(cctx, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: first})
	if err != nil {
		return fmt.Errorf("read the profile's browser context: %w", err)
	}
	s.bcid = info.TargetInfo.BrowserContextID
	if s.pol != nil {
		if err := s.guard.Protect(ctx, s.bcid, s.pol); err != nil {
			return fmt.Errorf("put the url policy in force: %w", err)
		}
	}
	t, err := s.newTab(ctx, "", opts)
	if err != nil {
		return err
	}
	s.tabs, s.active = []*tab{t}, 0
	// The start page is not one of the session's tabs: close it, so that
	// tab_list does not show it.
	if _, err := chromedp.CallBrowser(cctx, target.CloseTarget, target.CloseTargetParams{TargetID: first}); err != nil {
		return fmt.Errorf("close the start page: %w", err)
	}
	return nil
}

// profileCache fetches base profiles from the profile store and keeps
// their archives on disk, one file per digest, under dir/archives;
// sessions' private copies go under dir/sessions.
type profileCache struct {
	dir   string
	owner *os.File // workOwnerFile, locked while the worker runs
	lim   profiles.Limits

	mu      sync.Mutex // held across a fetch; guards store and current
	store   *profiles.Store
	current map[string]string // profile name → digest (hex) of its cached archive
}

// profileArchive returns the path of the cached archive of the profile
// name, in its current version (asked of the store on every open, so that
// a new upload counts at once), fetching it when the cache does not hold
// it.
func (w *Worker) profileArchive(ctx context.Context, name string) (string, profiles.Info, error) {
	pc := w.profiles
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.store == nil {
		st, err := profiles.Open(ctx, w.c.NATS(), w.c.Prefix(), pc.lim)
		if err != nil {
			return "", profiles.Info{}, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "base profile %q: %v", name, err)
		}
		pc.store = st
	}
	info, err := pc.store.Stat(ctx, name)
	if errors.Is(err, profiles.ErrNotFound) {
		pc.setCurrent(name, "") // deleted: its archive goes too
	}
	if err != nil {
		return "", info, profileErr(name, err)
	}
	path := filepath.Join(pc.dir, "archives", info.Hex()+".tgz")
	if _, err := os.Stat(path); err == nil {
		pc.setCurrent(name, info.Hex())
		return path, info, nil
	}
	rc, info, err := pc.store.Get(ctx, name)
	if err != nil {
		return "", info, profileErr(name, err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "fetch-*")
	if err != nil {
		return "", info, err
	}
	_, err = io.Copy(tmp, rc) // the store checks the digest at the end
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		path = filepath.Join(pc.dir, "archives", info.Hex()+".tgz")
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", info, fmt.Errorf("fetch base profile %q: %w", name, err)
	}
	pc.setCurrent(name, info.Hex())
	w.log.InfoContext(ctx, "base profile fetched", "profile", name, "digest", info.Digest, "size", info.Size)
	return path, info, nil
}

// setCurrent records digest as name's current archive ("": the profile is
// gone) and removes the archive it replaces unless another profile has the
// same content. A session still unpacking the old file keeps reading it
// (it is open).
func (pc *profileCache) setCurrent(name, digest string) {
	old, ok := pc.current[name]
	if digest == "" {
		delete(pc.current, name)
	} else {
		pc.current[name] = digest
	}
	if !ok || old == digest {
		return
	}
	for _, d := range pc.current {
		if d == old {
			return
		}
	}
	_ = os.Remove(filepath.Join(pc.dir, "archives", old+".tgz"))
}

// profileErr turns a profile store error into the bus error of an open.
func profileErr(name string, err error) error {
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "base profile %q does not exist: no profile of that name is in the profile store", name)
	case errors.Is(err, profiles.ErrBadName):
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "base profile %q: the name must match %s", name, profiles.NamePattern)
	}
	return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "base profile %q: %v", name, err)
}

// startProfile starts session s on a private copy of the base profile
// name.
func (w *Worker) startProfile(ctx context.Context, s *session, name string, p *browserv1.UrlPolicy) error {
	if err := profiles.CheckName(name); err != nil {
		return profileErr(name, err)
	}
	archive, info, err := w.profileArchive(ctx, name)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Join(w.profiles.dir, "sessions"), s.id+"-")
	if err != nil {
		return fmt.Errorf("copy base profile %q: %w", name, err)
	}
	f, err := os.Open(archive)
	if err == nil {
		_, err = profiles.Unpack(f, dir, w.profiles.lim)
		_ = f.Close()
	}
	if err != nil {
		removeAll(dir)
		return fmt.Errorf("copy base profile %q: %w", name, err)
	}
	launch := func(extra ...chromedp.ExecAllocatorOption) (context.Context, *guard.Guard, context.CancelFunc, error) {
		// The Chromium outlives this request: it lives until the session
		// closes, which the worker's shutdown does for every session.
		return w.launch(context.WithoutCancel(ctx), extra...)
	}
	if err := s.startOwn(ctx, w.pageOptions(), p, dir, launch); err != nil {
		return err // closeTabs removes the copy
	}
	s.profile = name
	// A Chromium of its own can die alone: the session is then lost.
	context.AfterFunc(s.browser, func() { w.ownChromeDied(s) })
	w.log.InfoContext(ctx, "session on base profile", "session", s.id, "profile", name, "digest", info.Digest)
	return nil
}

// ownChromeDied drops a base profile session whose Chromium went away
// while nobody was closing it.
func (w *Worker) ownChromeDied(s *session) {
	if s.ctx.Err() != nil || w.isStopping() {
		return // closing, or the worker is shutting down
	}
	w.mu.Lock()
	mine := w.sessions[s.id] == s
	if mine {
		delete(w.sessions, s.id)
		w.markLostLocked(s.id, "its Chromium crashed")
		w.updateOpenLocked()
	}
	w.mu.Unlock()
	if !mine {
		return
	}
	sessionsLost.WithLabelValues(w.cfg.ID).Inc() // metrics.go
	w.log.Error("chromium of a base profile session died", "session", s.id, "profile", s.profile)
	s.closeTabs()
}

// A worker's scratch directory is named workDirPrefix + worker ID + "-" +
// random. It holds the base profile archives it fetched (archives/), the
// private profile copies of sessions (sessions/), the sessions' upload and
// download files (files/, files.go), the shared Chromium's user data
// directory (chrome-*, worker.go) and workOwnerFile, locked by the worker
// while it runs.
const (
	workDirPrefix = "sovereign-worker-"
	workOwnerFile = ".owner"
)

// openProfiles prepares the worker's scratch directory; Run removes it
// when it ends. It first removes the directories of workers that died
// without removing theirs (a SIGKILL, an OOM kill): they hold copies of
// base profiles, cookies included, and the files of sessions.
func (w *Worker) openProfiles() error {
	base := w.cfg.ProfileDir
	if base == "" {
		base = os.TempDir()
	}
	w.removeDeadProfileDirs(base)
	dir, err := os.MkdirTemp(base, workDirPrefix+w.cfg.ID+"-")
	if err != nil {
		return fmt.Errorf("worker directory: %w", err)
	}
	owner, err := lockOwner(filepath.Join(dir, workOwnerFile))
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("worker directory: lock it: %w", err)
	}
	pc := &profileCache{dir: dir, owner: owner, lim: w.cfg.ProfileLimits, current: make(map[string]string)}
	for _, sub := range []string{"archives", "sessions", "files"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			pc.close()
			return fmt.Errorf("worker directory: %w", err)
		}
	}
	w.profiles = pc
	return nil
}

// filesDir is where sessions keep their upload and download files ("":
// the temp dir, before the worker runs).
func (pc *profileCache) filesDir() string {
	if pc == nil {
		return ""
	}
	return filepath.Join(pc.dir, "files")
}

// close removes the worker's directory, then lets go of its lock.
func (pc *profileCache) close() {
	_ = os.RemoveAll(pc.dir)
	_ = pc.owner.Close()
}

// removeDeadProfileDirs removes the worker directories under base whose
// owner lock nobody holds. A directory without the lock file is left
// alone: its worker may be creating it right now, or it predates the lock.
func (w *Worker) removeDeadProfileDirs(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, workDirPrefix+"*"))
	for _, d := range dirs {
		if !ownerGone(filepath.Join(d, workOwnerFile)) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			w.log.Warn("remove the directory of a worker that died", "dir", d, "err", err)
			continue
		}
		w.log.Info("removed the directory of a worker that died", "dir", d)
	}
}
