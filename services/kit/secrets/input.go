package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// IsTerminal reports whether f is a terminal (a character device).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ReadValue reads a secret value for a command line tool from in. From a
// terminal it writes prompt to promptOut, reads one line with echo off
// (where the platform allows; a warning says when it does not) and drops
// its line ending. From a pipe or file it reads everything (at most
// [MaxValueLen] bytes) and drops one trailing newline ("\n" or "\r\n").
// A canceled ctx ends a terminal read and restores the echo.
func ReadValue(ctx context.Context, in *os.File, promptOut io.Writer, prompt string) ([]byte, error) {
	if !IsTerminal(in) {
		return ReadAllValue(in)
	}
	restore, hidden := echoOff(in.Fd())
	if !hidden {
		fmt.Fprintln(promptOut, "(warning: this terminal will show what you type)")
		restore = func() {}
	}
	fmt.Fprint(promptOut, prompt)
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Byte by byte: a terminal delivers a line at a time anyway, and
		// nothing is read past the line.
		line := make([]byte, 0, MaxValueLen+2) // never grows: no stray copies
		one := make([]byte, 1)
		for {
			n, err := in.Read(one)
			if n == 1 {
				if one[0] == '\n' {
					break
				}
				if len(line) > MaxValueLen+1 {
					clear(line)
					ch <- result{nil, fmt.Errorf("the value is longer than %d bytes (64 KiB)", MaxValueLen)}
					return
				}
				line = append(line, one[0])
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				clear(line)
				ch <- result{nil, err}
				return
			}
		}
		ch <- result{trimNewline(line), nil}
	}()
	var res result
	select {
	case res = <-ch:
	case <-ctx.Done():
		res.err = ctx.Err()
	}
	restore()
	fmt.Fprintln(promptOut)
	if res.err != nil {
		return nil, fmt.Errorf("read the value from the terminal: %w", res.err)
	}
	return res.b, nil
}

// ReadAllValue reads a value from a pipe or file: everything, at most
// [MaxValueLen] bytes, less one trailing newline.
func ReadAllValue(r io.Reader) ([]byte, error) {
	buf := make([]byte, MaxValueLen+3)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		clear(buf)
		return nil, fmt.Errorf("read the value: %w", err)
	}
	if n == len(buf) {
		clear(buf)
		return nil, fmt.Errorf("the value is longer than %d bytes (64 KiB)", MaxValueLen)
	}
	out := bytes.Clone(trimNewline(buf[:n]))
	clear(buf)
	return out, nil
}

// trimNewline drops one trailing "\n" or "\r\n".
func trimNewline(b []byte) []byte {
	if bytes.HasSuffix(b, []byte("\r\n")) {
		return b[:len(b)-2]
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}
