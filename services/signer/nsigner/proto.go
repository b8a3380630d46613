// Package nsigner speaks the nsigner link protocol, version 1, from both
// ends: Client is the host side (the signer service talking to a hardware or
// isolated-VM signer over serial, unix, tcp or qrexec) and Serve is the device
// side, used by the nsigner-sim simulator and the tests.
//
// The protocol is one JSON object per line (at most MaxLine bytes), exactly
// one request in flight per connection, replies matched by id. The
// specification is docs/nsigner.md.
package nsigner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version carried in every message's "v" field.
const Version = 1

// Proto is what a version 1 device answers in hello's "proto" field.
const Proto = "nsigner/1"

// MaxLine is the longest line, in bytes and not counting its terminating
// '\n', that either end sends or accepts.
const MaxLine = 65536

// Methods of protocol version 1.
const (
	MethodHello        = "hello"
	MethodPing         = "ping"
	MethodListKeys     = "list_keys"
	MethodGetPublicKey = "get_public_key"
	MethodSignEvent    = "sign_event"
	MethodNip44Encrypt = "nip44_encrypt"
	MethodNip44Decrypt = "nip44_decrypt"
	MethodNip04Encrypt = "nip04_encrypt"
	MethodNip04Decrypt = "nip04_decrypt"
)

// Error codes a device returns.
const (
	CodeBadRequest    = "bad_request"
	CodeUnknownMethod = "unknown_method"
	CodeKeyNotFound   = "key_not_found"
	CodeRejected      = "rejected"
	CodeBusy          = "busy"
	CodeTimeout       = "timeout"
	CodeTooLarge      = "too_large"
)

// Error is an error code with its message: one the device returned, or a
// timeout or too_large the host raised itself (Local).
//
// Compare with the sentinels: errors.Is(err, nsigner.ErrRejected).
type Error struct {
	Method  string // the request's method
	Code    string // one of the Code constants (a device may send others)
	Message string // the device's message, or the host's explanation
	Local   bool   // raised by the host, not returned by the device
}

func (e *Error) Error() string {
	who := "the device"
	if e.Local {
		who = "the host"
	}
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("nsigner %s: %s (reported by %s): %s", e.Method, e.Code, who, msg)
}

// Is matches a sentinel Error (one with only a Code) by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Method == "" && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is, one per error code.
var (
	ErrBadRequest    = &Error{Code: CodeBadRequest}
	ErrUnknownMethod = &Error{Code: CodeUnknownMethod}
	ErrKeyNotFound   = &Error{Code: CodeKeyNotFound}
	ErrRejected      = &Error{Code: CodeRejected}
	ErrBusy          = &Error{Code: CodeBusy}
	ErrTimeout       = &Error{Code: CodeTimeout}
	ErrTooLarge      = &Error{Code: CodeTooLarge}
)

// ErrLinkDown is wrapped by errors for calls that could not reach the device
// or whose link broke before the reply came.
var ErrLinkDown = errors.New("nsigner link is down")

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("nsigner client is closed")

// request is one line from the host.
type request struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// inRequest is a request as the device parses it.
type inRequest struct {
	V      int             `json:"v"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// response is one line from the device.
type response struct {
	V      int             `json:"v"`
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// HelloResult is hello's result.
type HelloResult struct {
	Proto  string `json:"proto"`  // "nsigner/1"
	Device string `json:"device"` // the device's name and version
	Keys   int    `json:"keys"`   // how many keys it lists
}

// KeyInfo is one entry of list_keys.
type KeyInfo struct {
	Index  uint32 `json:"index"`
	PubKey string `json:"pubkey"` // 64 hex
	Label  string `json:"label"`
}

type indexParams struct {
	Index *uint32 `json:"index"`
}

type pubkeyResult struct {
	PubKey string `json:"pubkey"`
}

// wireEvent is the unsigned event the host sends: the device computes the id.
type wireEvent struct {
	Kind      int        `json:"kind"`
	CreatedAt int64      `json:"created_at"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
}

type signParams struct {
	Index *uint32    `json:"index"`
	Event *wireEvent `json:"event"`
}

type signResult struct {
	ID     string `json:"id"`
	PubKey string `json:"pubkey"`
	Sig    string `json:"sig"`
}

type cryptParams struct {
	Index  *uint32 `json:"index"`
	PubKey string  `json:"pubkey"`
	Text   string  `json:"text"`
}

type textResult struct {
	Text string `json:"text"`
}

// errLineTooLong is returned by lineReader.next for a line over MaxLine; the
// line has been consumed and the next call reads the line after it.
type errLineTooLong struct{ n int }

func (e errLineTooLong) Error() string {
	return fmt.Sprintf("line of %d bytes is longer than the nsigner limit of %d", e.n, MaxLine)
}

// lineReader reads '\n'-terminated lines of at most MaxLine bytes.
type lineReader struct{ r *bufio.Reader }

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, MaxLine+1)}
}

// next returns the next line without its '\n'. The slice is valid until the
// following call. A line longer than MaxLine is skipped whole and reported as
// errLineTooLong; an unterminated last line before EOF is returned as is.
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		n := len(line)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = lr.r.ReadSlice('\n')
			n += len(line)
		}
		if err != nil {
			return nil, err
		}
		return nil, errLineTooLong{n: n - 1}
	}
	if len(line) > 0 && errors.Is(err, io.EOF) {
		return line, nil
	}
	return nil, err
}

// encodeLine marshals v as one protocol line, '\n' included, refusing one
// longer than MaxLine.
func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxLine {
		return nil, errLineTooLong{n: len(b)}
	}
	return append(b, '\n'), nil
}
