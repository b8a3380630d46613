//go:build !linux

package nsigner

import (
	"errors"
	"io"
	"os"
)

var errNoSerial = errors.New("serial links and ptys are implemented on Linux only")

func openSerial(path string) (io.ReadWriteCloser, error) { return nil, errNoSerial }

// PTY is a pseudo-terminal pair; see the Linux implementation.
type PTY struct {
	Master    *os.File
	SlavePath string
}

// OpenPTY is implemented on Linux only.
func OpenPTY() (*PTY, error) { return nil, errNoSerial }

// Close closes both ends.
func (p *PTY) Close() error { return nil }
