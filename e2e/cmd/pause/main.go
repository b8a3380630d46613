// Command pause is the pod sandbox of the local Kubernetes that make
// e2e-helm runs (scripts/k8s-local.sh): the process that holds a pod's
// namespaces while its containers come and go, as registry.k8s.io/pause
// does on a cluster that can pull it. It sleeps until SIGINT or SIGTERM,
// and reaps the zombies it inherits as PID 1 of a pod that shares its
// process namespace.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
