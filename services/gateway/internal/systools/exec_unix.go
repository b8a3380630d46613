//go:build unix

package systools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// drainGrace is how long Exec keeps reading output after the command's
// process group was killed: only a process that left the group (setsid)
// can hold the pipes open longer, and its output is then cut.
const drainGrace = 2 * time.Second

// Exec runs command with "sh -c" in the workspace (its working directory
// and HOME), with only PATH, HOME, LANG and PWD in its environment, and no
// stdin. It runs in its own process group, which is killed (SIGKILL) when
// the command ends, so that background jobs do not outlive it, when
// timeout passes (TimedOut is then set; 0 means DefaultTimeout, more than
// MaxTimeout is refused) and when ctx ends (Exec then returns ctx's error
// with what the command wrote so far). A command that runs and fails is no
// error: its ExitCode says so.
func (w *Workspace) Exec(ctx context.Context, command string, timeout time.Duration) (ExecResult, error) {
	if strings.TrimSpace(command) == "" {
		return ExecResult{}, errors.New("command is empty")
	}
	timeout, err := checkTimeout(timeout)
	if err != nil {
		return ExecResult{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return ExecResult{}, fmt.Errorf("start command: %w", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return ExecResult{}, fmt.Errorf("start command: %w", err)
	}
	defer errR.Close()

	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = w.dir
	cmd.Env = w.env()
	cmd.Stdout, cmd.Stderr = outW, errW // files: Wait waits for the shell, not for the pipes
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if errors.Is(err, fs.ErrNotExist) {
		return ExecResult{}, errors.New("start command: this system has no /bin/sh (the distroless gateway image has none); run the gateway from an image with a shell to use shell_exec")
	}
	if err != nil {
		return ExecResult{}, fmt.Errorf("start command: %w", err)
	}
	pgid := cmd.Process.Pid
	kill := func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

	stdout, stderr := &capture{max: MaxOutput}, &capture{max: MaxOutput}
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut bool
	var ctxErr error
	select {
	case <-waited:
	case <-timer.C:
		timedOut = true
		kill()
		<-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		kill()
		<-waited
	}
	kill() // what the command left running in its group
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		outR.Close() // unblocks the readers
		errR.Close()
		<-drained
	}

	res := ExecResult{
		ExitCode: cmd.ProcessState.ExitCode(),
		Stdout:   stdout.text(), StdoutBytes: stdout.total,
		Stderr: stderr.text(), StderrBytes: stderr.total,
		TimedOut: timedOut,
		Duration: time.Since(start),
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	if ctxErr != nil {
		return res, fmt.Errorf("command cancelled: %w", ctxErr)
	}
	return res, nil
}
