package nsigner

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// openSerial opens a serial device at 115200 baud, 8N1, raw, no flow control,
// and discards whatever was waiting in its buffers.
func openSerial(path string) (io.ReadWriteCloser, error) {
	// O_NONBLOCK keeps open from waiting for carrier and lets the runtime
	// poller (and so Close) interrupt a read.
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open serial device: %w", err)
	}
	if err := makeRaw(f, unix.B115200, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("configure serial device %s as 115200 8N1 raw: %w", path, err)
	}
	return f, nil
}

// makeRaw puts the terminal f in raw mode (cfmakeraw), 8N1, receiver on,
// modem lines ignored, no flow control, at baud (0 keeps the speed); flush
// discards pending input and output.
func makeRaw(f *os.File, baud uint32, flush bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		t, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		if err != nil {
			ioErr = fmt.Errorf("TCGETS (is it a terminal?): %w", err)
			return
		}
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF | unix.IXANY
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CSTOPB | unix.CRTSCTS
		t.Cflag |= unix.CS8 | unix.CREAD | unix.CLOCAL
		if baud != 0 {
			t.Cflag &^= unix.CBAUD
			t.Cflag |= baud
			t.Ispeed, t.Ospeed = baud, baud
		}
		t.Cc[unix.VMIN] = 1
		t.Cc[unix.VTIME] = 0
		if err := unix.IoctlSetTermios(int(fd), unix.TCSETS, t); err != nil {
			ioErr = fmt.Errorf("TCSETS: %w", err)
			return
		}
		if flush {
			if err := unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIOFLUSH); err != nil {
				ioErr = fmt.Errorf("TCFLSH: %w", err)
			}
		}
	})
	if err != nil {
		return err
	}
	return ioErr
}

// PTY is a pseudo-terminal pair made by OpenPTY: the simulator serves on
// Master and a host opens SlavePath as its serial device.
type PTY struct {
	Master    *os.File
	SlavePath string
	slave     *os.File // held open so the pty outlives a host closing it
}

// OpenPTY opens a new pseudo-terminal (posix_openpt, unlockpt and ptsname
// done with ioctls, no cgo). The slave is put in raw mode and kept open, so
// a host may close and reopen SlavePath without ending the pty.
func OpenPTY() (*PTY, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		m.Close()
		return nil, err
	}
	var n uint32
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		if ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioErr != nil {
			ioErr = fmt.Errorf("unlockpt (TIOCSPTLCK): %w", ioErr)
			return
		}
		if n, ioErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); ioErr != nil {
			ioErr = fmt.Errorf("ptsname (TIOCGPTN): %w", ioErr)
		}
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	p := &PTY{Master: m, SlavePath: fmt.Sprintf("/dev/pts/%d", n)}
	p.slave, err = os.OpenFile(p.SlavePath, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("open pty slave: %w", err)
	}
	if err := makeRaw(p.slave, unix.B115200, false); err != nil {
		p.Close()
		return nil, fmt.Errorf("configure pty slave %s: %w", p.SlavePath, err)
	}
	return p, nil
}

// Close closes both ends.
func (p *PTY) Close() error {
	err := p.Master.Close()
	if p.slave != nil {
		p.slave.Close()
	}
	return err
}
