//go:build linux

package chrome

import (
	"os/exec"
	"syscall"

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
