package nip46

import "errors"

// Errors of this package. Every error a Client returns matches one of
// them with errors.Is; most are an *Error that also names the method.
var (
	// ErrBadURL: the bunker:// URL could not be parsed.
	ErrBadURL = errors.New("nip46: bad bunker URL")
	// ErrRejected: the remote signer answered the request with an error
	// (its message is in the error text).
	ErrRejected = errors.New("nip46: the remote signer refused the request")
	// ErrTimeout: no answer came before the request's deadline.
	ErrTimeout = errors.New("nip46: the remote signer did not answer in time")
	// ErrLinkDown: no relay could be reached.
	ErrLinkDown = errors.New("nip46: no relay reachable")
	// ErrBadSignature: sign_event returned an event that is not a valid
	// signature of the event asked for by the user's key.
	ErrBadSignature = errors.New("nip46: the remote signer returned a bad signed event")
	// ErrBadResponse: the remote signer's answer does not make sense
	// (connect not acknowledged, get_public_key not a pubkey …).
	ErrBadResponse = errors.New("nip46: unexpected answer from the remote signer")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("nip46: the client is closed")
)

// Error is an error of a request to the remote signer. errors.Is matches
// its Kind (one of the Err* values) and, if set, its Cause.
type Error struct {
	// Kind is one of the Err* values.
	Kind error
	// Method is the NIP-46 method ("connect", "sign_event" …), or "".
	Method string
	// Detail says what happened; it never holds a secret or a plaintext.
	Detail string
	// Cause is an underlying error (a context error …), or nil.
	Cause error
}

// Error returns "<kind> (<method>): <detail>".
func (e *Error) Error() string {
	s := e.Kind.Error()
	if e.Method != "" {
		s += " (" + e.Method + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns Kind and Cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}
