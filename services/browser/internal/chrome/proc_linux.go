//go:build linux

package chrome

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// processOptions start Chromium in a process group of its own, so that a
// terminal's Ctrl-C (SIGINT to the foreground process group) reaches only
// the worker's process, which then closes its sessions and stops Chromium
// in order (`sovereign up` stops the gateway first), instead of killing
// Chromium under live sessions. Like chromedp's default, Chromium is
// killed when the worker's process dies.
func processOptions() []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = new(syscall.SysProcAttr)
		}
		cmd.SysProcAttr.Setpgid = true
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	})}
}

// stopGroup kills what is left of the process group of the Chromium whose
// browser process was pid (its renderers and services; processOptions
// made the group) once that process exited, and waits up to 10 s for them
// to exit. pid 0: nothing to do.
func stopGroup(pid int) {
	if pid <= 0 {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); groupRuns(pid) && time.Now().Before(deadline); {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

// groupRuns reports whether a process of the process group pgid runs
// (one that exited but is not yet reaped does not).
func groupRuns(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := strings.LastIndexByte(string(st), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}
