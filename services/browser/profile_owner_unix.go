//go:build unix

package browser

import (
	"os"
	"syscall"
)

// lockOwner creates path and holds an exclusive lock on it for as long as
// the returned file stays open: until this process exits, however it
// exits, since the kernel drops the lock with the process.
func lockOwner(path string) (*os.File, error) {
	// The file is locked under another name and then renamed into place:
	// another worker's sweep (removeDeadProfileDirs) must never find it
	// between its creation and its lock, and take it for a dead worker's.
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// ownerGone reports whether the lock file at path exists and nobody holds
// its lock: the worker that made it has exited.
func ownerGone(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
