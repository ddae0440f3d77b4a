// Command pause is the sandbox ("pause") container of the test cluster's
// pods: it holds the pod's namespaces open until the kubelet stops the pod.
// As PID 1 of a pod that shares its process namespace it also reaps orphaned
// children. The cluster's containerd names its image as sandbox_image
// (hack/cluster/cluster.sh); no registry is reachable to pull the usual one.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
