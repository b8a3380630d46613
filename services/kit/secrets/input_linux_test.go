//go:build linux

package secrets

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair: the controlling side and the
// terminal a program reads from.
func openPTY(t *testing.T) (ctl, term *os.File) {
	t.Helper()
	// Non-blocking, so that reads from it take a deadline.
	fd, err := syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ctl = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { ctl.Close() })
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ctl.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("TIOCGPTN: %v", e)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ctl.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("TIOCSPTLCK: %v", e)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	return ctl, term
}

func echoOn(t *testing.T, f *os.File) bool {
	t.Helper()
	var tio syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&tio))); e != 0 {
		t.Fatalf("TCGETS: %v", e)
	}
	return tio.Lflag&syscall.ECHO != 0
}

// promptWriter signals when the prompt was written.
type promptWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
	once    sync.Once
}

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), "Value:") {
		w.once.Do(func() { close(w.written) })
	}
	return n, err
}

// TestReadValueTerminal types a value into a real pseudo-terminal: it is
// read, not echoed, and the echo is back on afterwards.
func TestReadValueTerminal(t *testing.T) {
	t.Parallel()
	ctl, term := openPTY(t)
	if !IsTerminal(term) || !echoOn(t, term) {
		t.Fatal("the pty is not a terminal with echo on")
	}
	prompt := &promptWriter{written: make(chan struct{})}
	type result struct {
		v   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := ReadValue(context.Background(), term, prompt, "Value: ")
		done <- result{v, err}
	}()
	select {
	case <-prompt.written:
	case <-time.After(5 * time.Second):
		t.Fatal("no prompt")
	}
	if echoOn(t, term) {
		t.Error("echo is on while the value is typed")
	}
	if _, err := ctl.WriteString("typed-secret-42\n"); err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ReadValue did not return")
	}
	if res.err != nil || string(res.v) != "typed-secret-42" {
		t.Fatalf("ReadValue = %q, %v", res.v, res.err)
	}
	if !echoOn(t, term) {
		t.Error("echo stays off after the read")
	}
	// What the terminal showed: nothing of the value.
	_ = ctl.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	shown := make([]byte, 4096)
	n, _ := ctl.Read(shown)
	if strings.Contains(string(shown[:n]), "typed-secret") {
		t.Errorf("the terminal echoed the value: %q", shown[:n])
	}
}

// TestReadValueCanceled restores the echo when the read is canceled
// (Ctrl-C in the CLI cancels its context).
func TestReadValueCanceled(t *testing.T) {
	t.Parallel()
	_, term := openPTY(t)
	ctx, cancel := context.WithCancel(context.Background())
	prompt := &promptWriter{written: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := ReadValue(ctx, term, prompt, "Value: ")
		done <- err
	}()
	<-prompt.written
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Errorf("err = %v, want canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadValue ignored the cancellation")
	}
	if !echoOn(t, term) {
		t.Error("echo stays off after a canceled read")
	}
}

func TestReadAllValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"v\n": "v", "v\r\n": "v", "v\n\n": "v\n", "v": "v", "v\r": "v\r", "a\nb": "a\nb",
	} {
		got, err := ReadAllValue(strings.NewReader(in))
		if err != nil || string(got) != want {
			t.Errorf("ReadAllValue(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ReadAllValue(strings.NewReader(strings.Repeat("a", MaxValueLen+3))); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("too long: err = %v", err)
	}
	if got, err := ReadAllValue(strings.NewReader(strings.Repeat("a", MaxValueLen) + "\n")); err != nil || len(got) != MaxValueLen {
		t.Errorf("64 KiB and a newline: %d bytes, %v", len(got), err)
	}
}
