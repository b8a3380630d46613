package nsigner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transports a Config names.
const (
	TransportSerial = "serial" // Device is a path such as /dev/ttyACM0; 115200 8N1 raw
	TransportUnix   = "unix"   // Device is a stream socket path
	TransportTCP    = "tcp"    // Device is host:port; loopback or an isolated VM network only
	TransportQrexec = "qrexec" // Device is a qube name; the link is qrexec-client-vm's stdin/stdout
)

// DefaultService is the qrexec service a qrexec link calls, with the key
// index as its argument: qubes.NsignerRpc+0.
const DefaultService = "qubes.NsignerRpc"

// QrexecClient is the program a qrexec link runs; it is looked up on PATH.
const QrexecClient = "qrexec-client-vm"

// qubeName is what Qubes accepts as a qube or service name; it also keeps an
// argument from being read as an option.
var qubeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// validTransport checks the fields one transport needs.
func validTransport(cfg *Config) error {
	if cfg.Device == "" {
		return fmt.Errorf("nsigner: no device given for transport %q (a device path, socket path, host:port or qube name)", cfg.Transport)
	}
	switch cfg.Transport {
	case TransportSerial, TransportUnix:
	case TransportTCP:
		if _, _, err := net.SplitHostPort(cfg.Device); err != nil {
			return fmt.Errorf("nsigner: tcp device %q is not host:port: %v", cfg.Device, err)
		}
	case TransportQrexec:
		if !qubeName.MatchString(cfg.Device) {
			return fmt.Errorf("nsigner: %q is not a qube name (letters, digits, '_', '.', '-')", cfg.Device)
		}
		if !qubeName.MatchString(cfg.Service) {
			return fmt.Errorf("nsigner: %q is not a qrexec service name", cfg.Service)
		}
	default:
		return fmt.Errorf("nsigner: unknown transport %q: use serial, unix, tcp or qrexec", cfg.Transport)
	}
	return nil
}

// openTransport opens the byte stream cfg names.
func openTransport(ctx context.Context, cfg *Config) (io.ReadWriteCloser, error) {
	switch cfg.Transport {
	case TransportUnix, TransportTCP:
		var d net.Dialer
		conn, err := d.DialContext(ctx, cfg.Transport, cfg.Device)
		if err != nil {
			return nil, err
		}
		return conn, nil
	case TransportSerial:
		return openSerial(cfg.Device)
	case TransportQrexec:
		return startQrexec(cfg)
	}
	return nil, fmt.Errorf("unknown transport %q", cfg.Transport)
}

// qrexecConn is a running qrexec-client-vm: writes go to its stdin, reads
// come from its stdout. The pipes are the host's own *os.File ends, so a
// write deadline applies and Close interrupts a read.
type qrexecConn struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *tailBuffer
	target string

	waitOnce sync.Once
	waitErr  error
}

func startQrexec(cfg *Config) (*qrexecConn, error) {
	target := fmt.Sprintf("%s+%d", cfg.Service, cfg.Index)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	q := &qrexecConn{stdin: inW, stdout: outR, stderr: &tailBuffer{max: 512}, target: cfg.Device + " " + target}
	q.cmd = exec.Command(QrexecClient, cfg.Device, target)
	q.cmd.Stdin, q.cmd.Stdout, q.cmd.Stderr = inR, outW, q.stderr
	q.cmd.WaitDelay = time.Second // for a stderr held open by a grandchild
	err = q.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s %s (is this a Qubes qube with qrexec?): %w", QrexecClient, q.target, err)
	}
	return q, nil
}

func (q *qrexecConn) Read(p []byte) (int, error) {
	n, err := q.stdout.Read(p)
	if errors.Is(err, io.EOF) {
		return n, q.ended()
	}
	return n, err
}

// ended says why the client ended (a refused call prints on stderr).
func (q *qrexecConn) ended() error {
	werr := q.exitStatus()
	if werr == nil {
		werr = errors.New("exited")
	}
	if msg := strings.TrimSpace(q.stderr.String()); msg != "" {
		return fmt.Errorf("%s %s ended (%v): %s", QrexecClient, q.target, werr, msg)
	}
	return fmt.Errorf("%s %s ended (%v)", QrexecClient, q.target, werr)
}

// Write writes to the client's stdin; when the client is gone (a broken
// pipe), the error says why it ended.
func (q *qrexecConn) Write(p []byte) (int, error) {
	n, err := q.stdin.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		return n, q.ended()
	}
	return n, err
}

// SetWriteDeadline bounds writes to the client's stdin.
func (q *qrexecConn) SetWriteDeadline(t time.Time) error { return q.stdin.SetWriteDeadline(t) }

// exitStatus waits a moment for the client to exit, then ends it.
func (q *qrexecConn) exitStatus() error {
	done := make(chan struct{})
	go func() {
		q.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		q.cmd.Process.Kill()
		<-done
	}
	return q.waitErr
}

func (q *qrexecConn) wait() error {
	q.waitOnce.Do(func() { q.waitErr = q.cmd.Wait() })
	return q.waitErr
}

// Close ends the client: stdin closed, then the process killed and reaped.
func (q *qrexecConn) Close() error {
	q.stdin.Close()
	q.cmd.Process.Kill()
	q.stdout.Close()
	q.wait()
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, nil))
}
