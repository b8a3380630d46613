// Package harness runs a Sovereign fleet as real processes on loopback for
// end-to-end tests and benchmarks: it builds the binaries, starts
// nats-server, browser workers and gateways on ports they pick themselves
// (and log), waits until each is ready, keeps their output, and kills them (process groups, so Chromium
// goes too) when done. Every wait is bounded.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxOutput bounds the output kept per process; older output is dropped.
const maxOutput = 4 << 20

// Proc is one started process (and its process group).
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error // set before done is closed
}

// StartProc starts bin with args in its own process group, stdout and
// stderr captured (and copied to tee when it is not nil). env is added to
// the current environment.
func StartProc(name, bin string, args, env []string, tee io.Writer) (*Proc, error) {
	p := &Proc{Name: name, out: &tailBuffer{max: maxOutput}, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var w io.Writer = p.out
	if tee != nil {
		w = io.MultiWriter(p.out, &prefixWriter{prefix: "[" + name + "] ", w: tee})
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Own process group: Kill reaches Chromium and its helpers too. The
	// kernel kills the process if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A grandchild still holding the output pipe must not block Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id (also the process group id).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Output returns what the process printed so far (the last few MiB).
func (p *Proc) Output() string { return p.out.String() }

// LoggedURL waits (up to timeout) until the process has logged a line
// whose message is msg and returns its url attribute. A Sovereign service
// logs JSON when its output is not a terminal, and logs where it serves
// once it listens: that is how one told to listen on port 0 says which
// port it bound.
func (p *Proc) LoggedURL(ctx context.Context, timeout time.Duration, msg string) (string, error) {
	var url string
	err := poll(ctx, timeout, p, p.Name+" to log "+strconv.Quote(msg), func(context.Context) error {
		for _, line := range strings.Split(p.Output(), "\n") {
			var rec struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.URL != "" {
				url = rec.URL
				return nil
			}
		}
		return errors.New("no such line yet")
	})
	return url, err
}

// Kill sends SIGKILL to the whole process group and waits (at most 10 s)
// for the process to be reaped.
func (p *Proc) Kill() error {
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit 10 s after SIGKILL", p.Name, p.PID())
	}
}

// Stop sends SIGTERM to the process, waits up to grace for it to exit, then
// kills the whole group. Whatever happens, nothing of it is left running.
func (p *Proc) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL) // stray helpers
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// tailBuffer is a goroutine-safe buffer that keeps the last max bytes.
type tailBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
		b.dropped += over
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[… %d earlier bytes dropped …]\n%s", b.dropped, b.buf.String())
	}
	return b.buf.String()
}

// prefixWriter prefixes each line written to w.
type prefixWriter struct {
	mu      sync.Mutex
	prefix  string
	w       io.Writer
	partial []byte
}

func (pw *prefixWriter) Write(p []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.partial = append(pw.partial, p...)
	for {
		i := bytes.IndexByte(pw.partial, '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(pw.w, pw.prefix+string(pw.partial[:i+1])); err != nil {
			return len(p), err
		}
		pw.partial = pw.partial[i+1:]
	}
	return len(p), nil
}

// exitError describes how a process that should still be running ended.
func exitError(p *Proc, err error) error {
	msg := "exited"
	if err != nil {
		msg = "exited: " + err.Error()
	}
	return errors.New(p.Name + " " + msg + "; " + outputTail(p))
}

// outputTail is the end of p's output, for error messages.
func outputTail(p *Proc) string {
	out := p.Output()
	if len(out) > 8000 {
		out = "…" + out[len(out)-8000:]
	}
	return "output of " + p.Name + ":\n" + strings.TrimRight(out, "\n")
}
