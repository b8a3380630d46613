//go:build !linux

package secrets

// echoOff is not implemented here: the value is read with echo on.
func echoOff(uintptr) (restore func(), ok bool) { return nil, false }
