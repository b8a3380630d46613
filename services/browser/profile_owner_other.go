//go:build !unix

package browser

import "os"

// lockOwner creates path; without flock there is no lock to hold.
func lockOwner(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

// ownerGone is false: without flock a live owner cannot be told apart.
func ownerGone(string) bool { return false }
