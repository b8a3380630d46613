//go:build unix

package systools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func TestReadWriteFIFO(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	if err := syscall.Mkfifo(filepath.Join(w.Dir(), "fifo"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	// Neither call may block waiting for the other end.
	_, err := w.Read("fifo", 0, 0)
	mustErr(t, "read FIFO", err, "fifo", "not a regular file")
	_, err = w.Write("fifo", "x", false)
	mustErr(t, "write FIFO", err, "fifo")
}

func TestExec(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	ctx := context.Background()
	r, err := w.Exec(ctx, `echo hello; echo oops >&2; pwd; echo "$HOME"; echo data > made.txt; exit 3`, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := "hello\n" + w.Dir() + "\n" + w.Dir() + "\n"
	if r.ExitCode != 3 || r.Stdout != wantOut || r.Stderr != "oops\n" || r.TimedOut || r.Signal != "" || r.StdoutClipped() {
		t.Errorf("Exec = %+v; want exit 3, stdout %q, stderr oops", r, wantOut)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir(), "made.txt")); err != nil || string(b) != "data\n" {
		t.Errorf("made.txt = %q, %v: the command did not run in the workspace", b, err)
	}
	if r, err := w.Exec(ctx, "true", 0); err != nil || r.ExitCode != 0 || r.Stdout != "" {
		t.Errorf("true = %+v, %v", r, err)
	}
	if r, _ := w.Exec(ctx, "printf 'a\\377b'", 0); r.Stdout != "a\uFFFDb" {
		t.Errorf("invalid UTF-8 output = %q, want it replaced", r.Stdout)
	}
	if r, _ := w.Exec(ctx, "read x; echo \"[$x]\"", 0); r.Stdout != "[]\n" {
		t.Errorf("stdin: %q, want empty", r.Stdout)
	}

	for _, c := range []struct {
		cmd     string
		timeout time.Duration
		want    string
	}{
		{"", 0, "command is empty"},
		{"  \n", 0, "command is empty"},
		{"true", -time.Second, "negative"},
		{"true", MaxTimeout + time.Millisecond, "maximum"},
	} {
		_, err := w.Exec(ctx, c.cmd, c.timeout)
		mustErr(t, "Exec("+c.cmd+")", err, c.want)
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("SOVEREIGN_SECRET_KEY", "s3cr3t-value-of-the-test")
	t.Setenv("OTHER_TOKEN", "another-secret")
	w, _ := newWorkspace(t)
	r, err := w.Exec(context.Background(), "env", 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Stdout, "s3cr3t") || strings.Contains(r.Stdout, "SOVEREIGN_") || strings.Contains(r.Stdout, "another-secret") {
		t.Errorf("the command's environment leaks the process's:\n%s", r.Stdout)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		name, _, _ := strings.Cut(l, "=")
		names = append(names, name)
	}
	for _, n := range names {
		switch n {
		case "PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD": // the last ones are the shell's own
		default:
			t.Errorf("unexpected variable %s in the command's environment", n)
		}
	}
	if !strings.Contains(r.Stdout, "HOME="+w.Dir()+"\n") {
		t.Errorf("HOME is not the workspace:\n%s", r.Stdout)
	}
}

func TestExecOutputCap(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	r, err := w.Exec(context.Background(), "head -c 200000 /dev/zero | tr '\\0' a; head -c 70000 /dev/zero | tr '\\0' b >&2; echo done >&2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != MaxOutput || r.StdoutBytes != 200000 || !r.StdoutClipped() || strings.Trim(r.Stdout, "a") != "" {
		t.Errorf("stdout: %d bytes kept of %d, clipped %v; want %d of 200000", len(r.Stdout), r.StdoutBytes, r.StdoutClipped(), MaxOutput)
	}
	if len(r.Stderr) != MaxOutput || r.StderrBytes != 70005 || !r.StderrClipped() {
		t.Errorf("stderr: %d bytes kept of %d; want %d of 70005", len(r.Stderr), r.StderrBytes, MaxOutput)
	}
	if r.ExitCode != 0 {
		t.Errorf("exit code %d", r.ExitCode)
	}
}

// gone reports whether process pid has ended (a zombie counts: it is only
// waiting for a parent to reap it).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // no /proc: only ESRCH says it
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// waitGone waits (up to a generous bound) for pid to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(gone(pid), "process %d still runs: the command's process group was not killed", pid)
	})
}

func readPid(t *testing.T, w *Workspace, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	// The shell waits for a background child that holds stdout: both must
	// die, and Exec must not wait for the child's pipe. The timeout leaves
	// the shell time to start and write on a loaded machine.
	r, err := w.Exec(context.Background(), "sleep 300 & echo $! > child.pid; echo started; wait", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.ExitCode != -1 || r.Signal != "killed" || r.Stdout != "started\n" {
		t.Errorf("Exec = %+v; want timed out, killed, stdout started", r)
	}
	waitGone(t, readPid(t, w, "child.pid"))
}

func TestExecKillsBackgroundJobs(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	// The shell exits at once; its background job, holding stdout, must
	// not keep Exec waiting, nor outlive it.
	r, err := w.Exec(context.Background(), "sleep 300 & echo $! > child.pid; echo bye", 0)
	if err != nil || r.ExitCode != 0 || r.TimedOut || r.Stdout != "bye\n" {
		t.Fatalf("Exec = %+v, %v", r, err)
	}
	waitGone(t, readPid(t, w, "child.pid"))
}

func TestExecCancel(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var r ExecResult
	var err error
	go func() {
		defer close(done)
		r, err = w.Exec(ctx, "echo $$ > sh.pid; sleep 300 & echo $! > child.pid; wait", time.Minute)
	}()
	// Cancel once the command runs: once the shell has written the
	// child's pid (the file exists a moment before it holds the line).
	kittest.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(w.Dir(), "child.pid"))
		if err != nil {
			return fmt.Errorf("the command has not started: %w", err)
		}
		return kittest.Check(strings.HasSuffix(string(b), "\n"), "the command has not written the child's pid")
	})
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) || r.TimedOut {
		t.Errorf("Exec after cancel = %+v, %v; want context.Canceled", r, err)
	}
	waitGone(t, readPid(t, w, "sh.pid"))
	waitGone(t, readPid(t, w, "child.pid"))
}
