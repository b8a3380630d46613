package browser_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/browser/profiletest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/profiles"
)

func (f *fleet) openProfile(profile string, p *browserv1.UrlPolicy) (*browserv1.OpenSessionResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res browserv1.OpenSessionResponse
	err := f.c.Request(ctx, f.c.Subject("browser", "open"), &browserv1.OpenSessionRequest{Owner: "test", Profile: profile, Policy: p}, &res)
	return &res, err
}

func title(f *fleet, s *browserv1.OpenSessionResponse) string {
	f.t.Helper()
	return f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}})
}

// entries lists the directory's entries, for checks that copies are gone.
func entries(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProfileSession: a base profile made by a real Chromium that logged
// into a site makes a new session logged in, on its own Chromium; a
// session without it is not; what a session writes never reaches the
// stored profile; closing the session removes its copy.
func TestProfileSession(t *testing.T) {
	t.Parallel()
	ts := profiletest.LoginSite(t)
	raw := profiletest.RawTarGz(t, profiletest.MakeProfile(t, ts.URL))

	f := newFleet(t)
	ctx := context.Background()
	store, err := profiles.Open(ctx, f.c.NATS(), f.c.Prefix(), profiles.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := store.Put(ctx, "alice", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upload of %d bytes stored as %d: %+v", len(raw), base.Size, base.Stats)
	if base.Stats.Dropped == 0 {
		t.Errorf("uploading a used profile dropped nothing: %+v", base.Stats)
	}
	pdir := t.TempDir()
	// Cleanups run last-in first-out: this one after the worker stopped.
	t.Cleanup(func() {
		if left := entries(t, filepath.Join(pdir, "*")); len(left) > 0 {
			t.Errorf("the worker left %q behind", left)
		}
	})
	f.worker(browser.Config{ID: "prof", MaxSessions: 3, ProfileDir: pdir})
	copies := filepath.Join(pdir, "sovereign-worker-prof-*", "sessions", "*")

	a, err := f.openProfile("alice", nil)
	if err != nil {
		t.Fatalf("open a session on profile alice: %v", err)
	}
	f.mustCall(a, openReq(ts.URL+"/"))
	if got := title(f, a); !strings.Contains(got, "logged in as alice") {
		t.Fatalf("session on the profile: title %q, want logged in", got)
	}
	// Local Storage (LevelDB, opened without the LOCK file the filter
	// dropped) came along too.
	if got := f.mustCall(a, evalReq(`localStorage.getItem("user")`)); !strings.Contains(got, "alice") {
		t.Fatalf("localStorage user = %q, want alice", got)
	}
	if got := entries(t, copies); len(got) != 1 {
		t.Fatalf("private copies while one profile session is open: %q", got)
	}

	plain := f.mustOpen()
	f.mustCall(plain, openReq(ts.URL+"/"))
	if got := title(f, plain); !strings.Contains(got, "not logged in") {
		t.Fatalf("session without a profile: title %q, want not logged in", got)
	}

	// Session a writes a cookie of its own; the base does not change.
	f.mustCall(a, openReq(ts.URL+"/more"))
	if got := f.mustCall(a, evalReq("document.cookie")); !strings.Contains(got, "extra=from-session") {
		t.Fatalf("cookie after /more = %q", got)
	}
	// The worker is full (3): a profile session counts like any other.
	b, err := f.openProfile("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.openProfile("alice", nil)
	wantCode(t, "open on a full worker", err, commonv1.ErrorCode_UNAVAILABLE, "")
	f.mustCall(b, openReq(ts.URL+"/"))
	if got := title(f, b); !strings.Contains(got, "logged in as alice") {
		t.Fatalf("second session on the profile: title %q", got)
	}
	if got := f.mustCall(b, evalReq("document.cookie")); !strings.Contains(got, "sid=alice") || strings.Contains(got, "extra") {
		t.Fatalf("second session on the profile: cookies %q, want sid=alice and not the first session's", got)
	}
	for _, s := range []*browserv1.OpenSessionResponse{a, b, plain} {
		if err := f.close(s); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, copies); len(got) != 0 {
		t.Fatalf("private copies left after closing the sessions: %q", got)
	}
	after, err := store.Stat(ctx, "alice")
	if err != nil || after.Digest != base.Digest || after.Size != base.Size {
		t.Fatalf("stored profile after the sessions: %+v, %v; want it unchanged (%s)", after, err, base.Digest)
	}

	// A new upload under the same name counts for the next session, and
	// the worker's cache keeps only its archive; a deleted profile is gone.
	archives := filepath.Join(pdir, "sovereign-worker-prof-*", "archives", "*")
	if got := entries(t, archives); len(got) != 1 || !strings.Contains(got[0], base.Hex()) {
		t.Fatalf("cached archives: %q, want the one of %s", got, base.Digest)
	}
	var empty bytes.Buffer
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := profiles.Pack(d, &empty); err != nil {
		t.Fatal(err)
	}
	next, err := store.Put(ctx, "alice", &empty)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.openProfile("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mustCall(c, openReq(ts.URL+"/"))
	if got := title(f, c); !strings.Contains(got, "not logged in") {
		t.Fatalf("session on the re-uploaded (empty) profile: title %q", got)
	}
	if err := f.close(c); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, archives); len(got) != 1 || !strings.Contains(got[0], next.Hex()) {
		t.Fatalf("cached archives after the new upload: %q, want only the one of %s", got, next.Digest)
	}
	if err := store.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = f.openProfile("alice", nil)
	wantCode(t, "open on a deleted profile", err, commonv1.ErrorCode_NOT_FOUND, `base profile "alice" does not exist`)
	if got := entries(t, archives); len(got) != 0 {
		t.Fatalf("cached archives after the delete: %q", got)
	}

	// Unknown and malformed names are clear errors.
	_, err = f.openProfile("bob", nil)
	wantCode(t, "open on an unknown profile", err, commonv1.ErrorCode_NOT_FOUND, `base profile "bob" does not exist`)
	_, err = f.openProfile("../alice", nil)
	wantCode(t, "open on a bad profile name", err, commonv1.ErrorCode_INVALID_ARGUMENT, `base profile "../alice": the name must match`)
}

// TestProfileSessionPolicy: the URL policy guards a profile session's own
// Chromium as it guards the shared one, WebSockets included (its proxy is
// a command-line flag there).
func TestProfileSessionPolicy(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	emptyProfile(t, f, "empty")
	f.worker(browser.Config{ID: "profpol", MaxSessions: 2, ProfileDir: t.TempDir()})
	other := newOrigin(t, nil)
	evil := "http://localhost:" + other.port()
	home := newOrigin(t, map[string]string{
		"/sockets": `<!doctype html><title>sockets</title><script>
function ws(u) { return new Promise(ok => { const s = new WebSocket(u); s.onopen = () => ok("open"); s.onerror = () => ok("error"); }); }
window.wsBlocked = ws("ws://localhost:` + other.port() + `/ws");
window.wsAllowed = ws("ws://127.0.0.1:` + other.port() + `/ws");
</script>`,
	})
	s, err := f.openProfile("empty", enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.mustCall(s, openReq(home.URL+"/a")); !strings.Contains(got, `title "page /a"`) {
		t.Fatalf("open an allowed page = %q", got)
	}
	_, err = f.call(s, openReq(evil+"/x"))
	wantCode(t, "open a blocked host", err, commonv1.ErrorCode_FORBIDDEN, evil+"/x is blocked")
	if other.served("/x") {
		t.Fatal("the blocked page was requested from its server")
	}
	f.mustCall(s, openReq(home.URL+"/sockets"))
	if got := f.mustCall(s, evalReq("window.wsAllowed")); !strings.Contains(got, "open") {
		t.Fatalf("allowed WebSocket = %q, want open", got)
	}
	if got := f.mustCall(s, evalReq("window.wsBlocked")); !strings.Contains(got, "error") {
		t.Fatalf("blocked WebSocket = %q, want error", got)
	}
	// Only the allowed WebSocket reached the server.
	other.mu.Lock()
	n := strings.Count(strings.Join(other.hits, " "), "/ws")
	other.mu.Unlock()
	if n != 1 {
		t.Fatalf("the WebSocket server saw %d handshakes, want 1 (the allowed one)", n)
	}
	// tab_list shows the session's one tab, not Chromium's start page.
	got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}})
	if strings.Count(got, "\n") != 0 || !strings.Contains(got, "/sockets") {
		t.Fatalf("tab_list = %q, want the one tab", got)
	}
}

// TestProfileSessionCrash: when a profile session's own Chromium dies,
// that session is lost (SESSION_LOST), its copy is removed, and the
// worker's other sessions go on.
func TestProfileSessionCrash(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	emptyProfile(t, f, "empty")
	pdir := t.TempDir()
	f.worker(browser.Config{ID: "profcrash", MaxSessions: 2, ProfileDir: pdir})
	ts := site(t)
	plain := f.mustOpen()
	s, err := f.openProfile("empty", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.mustCall(s, openReq(ts.URL+"/a"))
	copies := entries(t, filepath.Join(pdir, "sovereign-worker-profcrash-*", "sessions", "*"))
	if len(copies) != 1 {
		t.Fatalf("private copies: %q", copies)
	}
	pid := browserPID(t, copies[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = kittest.EventuallyValue(t, 30*time.Second, func() (error, error) {
		_, err := f.call(s, evalReq("1"))
		return err, kittest.Check(err != nil, "the session still answers after its Chromium was killed")
	})
	wantCode(t, "call after its Chromium died", err, commonv1.ErrorCode_SESSION_LOST, "its Chromium crashed")
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(len(entries(t, copies[0])) == 0, "the copy %s is still there", copies[0])
	})
	if got := f.mustCall(plain, openReq(ts.URL+"/b")); !strings.Contains(got, `page /b`) {
		t.Fatalf("the shared Chromium's session after the crash: %q", got)
	}
}

// browserPID finds the Chromium browser process (not a renderer or
// helper) running on the user data directory dir.
func browserPID(t *testing.T, dir string) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		hasDir, helper := false, false
		for _, a := range args {
			hasDir = hasDir || a == "--user-data-dir="+dir
			helper = helper || strings.HasPrefix(a, "--type=")
		}
		if hasDir && !helper {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			return pid
		}
	}
	t.Fatalf("no Chromium runs on %s", dir)
	return 0
}

// emptyProfile stores a profile with an empty Default directory as name.
func emptyProfile(t *testing.T, f *fleet, name string) {
	t.Helper()
	ctx := context.Background()
	store, err := profiles.Open(ctx, f.c.NATS(), f.c.Prefix(), profiles.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := profiles.Pack(d, &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, name, &buf); err != nil {
		t.Fatal(err)
	}
}

// TestProfileSessionLifecycle: closing a profile session, and its idle
// timeout, stop its Chromium and remove its copy; nothing leaks over many
// sessions; the worker's shutdown removes its profile directory.
func TestProfileSessionLifecycle(t *testing.T) {
	f := newFleet(t)
	emptyProfile(t, f, "empty")
	pdir := t.TempDir()
	t.Cleanup(func() { // after the worker stopped
		if left := entries(t, filepath.Join(pdir, "*")); len(left) > 0 {
			t.Errorf("the worker left %q behind", left)
		}
	})
	w := f.worker(browser.Config{ID: "proflife", MaxSessions: 2, IdleTimeout: 2 * time.Second, ProfileDir: pdir})
	copies := filepath.Join(pdir, "sovereign-worker-proflife-*", "sessions", "*")
	ts := site(t)
	cycle := func() {
		s, err := f.openProfile("empty", nil)
		if err != nil {
			t.Fatal(err)
		}
		f.mustCall(s, openReq(ts.URL+"/a"))
		if err := f.close(s); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	// The count of before is taken with the shared Chromium's warm pool
	// full again (a renderer per warm context; a profile session's slot
	// is refilled after its close, in the background): see TestNoLeaks.
	waitWarm(t, w, 2)
	time.Sleep(500 * time.Millisecond) // time passes: the processes the refill started settle before the count
	g0, p0 := runtime.NumGoroutine(), chromiumProcesses()
	for range 4 {
		cycle()
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		g, p := runtime.NumGoroutine(), chromiumProcesses()
		left := entries(t, copies)
		return kittest.Check(g <= g0+3 && p <= p0 && len(left) == 0, "after 4 profile sessions: goroutines %d -> %d, Chromium processes %d -> %d, copies left %q", g0, g, p0, p, left)
	})
	deadline := time.Now().Add(30 * time.Second)

	// The idle timeout closes a profile session like any other.
	s, err := f.openProfile("empty", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := chromiumProcesses(); n <= p0 {
		t.Fatalf("Chromium processes with a profile session open: %d, before: %d", n, p0)
	}
	for {
		_, err := f.call(s, evalReq("1"))
		if bus.CodeOf(err) == commonv1.ErrorCode_SESSION_NOT_FOUND {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("profile session still open long after its idle timeout")
		}
		time.Sleep(3 * time.Second) // time passes: longer than the timeout, idle between calls
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		p, left := chromiumProcesses(), entries(t, copies)
		return kittest.Check(p <= p0 && len(left) == 0, "after the idle timeout: Chromium processes %d (before: %d), copies %q", p, p0, left)
	})
	// One left open for the shutdown (the cleanup above checks).
	if _, err := f.openProfile("empty", nil); err != nil {
		t.Fatal(err)
	}
}

// TestProfileDirsOfDeadWorkers: a starting worker removes the profile
// directories (copies of base profiles, cookies included) that workers
// killed before they could remove theirs left behind, and only those:
// one whose worker still runs (its owner file is locked) stays, and so
// does one without an owner file (a worker may be creating it).
func TestProfileDirsOfDeadWorkers(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mk := func(name string, owner bool) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(d, "sessions", "s1-1", "Default"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sessions", "s1-1", "Default", "Cookies"), []byte("cookie"), 0o600); err != nil {
			t.Fatal(err)
		}
		if owner {
			if err := os.WriteFile(filepath.Join(d, ".owner"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("sovereign-worker-gone-111", true)
	live := mk("sovereign-worker-other-222", true)
	unowned := mk("sovereign-worker-new-333", false)
	lock, err := os.Open(filepath.Join(live, ".owner"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	f := newFleet(t)
	f.worker(browser.Config{ID: "sweeper", MaxSessions: 1, ProfileDir: base})
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the directory of a worker that died is still there (%v)", err)
	}
	for _, d := range []string{live, unowned} {
		if _, err := os.Stat(filepath.Join(d, "sessions", "s1-1", "Default", "Cookies")); err != nil {
			t.Errorf("%s was touched: %v", filepath.Base(d), err)
		}
	}
	own := entries(t, filepath.Join(base, "sovereign-worker-sweeper-*"))
	if len(own) != 1 {
		t.Fatalf("the worker's own profile directories: %q, want one", own)
	}
	// A second worker sees the first one's directory as live.
	f.worker(browser.Config{ID: "sweeper2", MaxSessions: 1, ProfileDir: base})
	if _, err := os.Stat(own[0]); err != nil {
		t.Errorf("a starting worker removed a running worker's directory: %v", err)
	}
}
