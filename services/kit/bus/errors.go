package bus

import (
	"errors"
	"fmt"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// Error is a failure with a code that travels over the bus as micro error
// headers (Nats-Service-Error-Code carries the code's name,
// Nats-Service-Error the message).
type Error struct {
	Code    commonv1.ErrorCode
	Message string
	err     error // a cause errors.Is can find (ErrDisconnected), or nil
}

func (e *Error) Error() string { return e.Message }

// Unwrap is the error's cause, if it has one.
func (e *Error) Unwrap() error { return e.err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code commonv1.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err: the code of an *Error in its chain,
// TIMEOUT for a deadline, INTERNAL for anything else and UNSPECIFIED for nil.
func CodeOf(err error) commonv1.ErrorCode {
	if err == nil {
		return commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if isDeadline(err) {
		return commonv1.ErrorCode_TIMEOUT
	}
	return commonv1.ErrorCode_INTERNAL
}

// MessageOf is err's message as its server put it (a coded error's
// message without its code), else err's text.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// Is reports whether err carries code.
func Is(err error, code commonv1.ErrorCode) bool { return err != nil && CodeOf(err) == code }

func parseCode(s string) commonv1.ErrorCode {
	if v, ok := commonv1.ErrorCode_value[s]; ok {
		return commonv1.ErrorCode(v)
	}
	return commonv1.ErrorCode_INTERNAL
}
