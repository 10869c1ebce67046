// Command pause is the sandbox ("pause") container of the real test node's pods: it holds the pod's namespaces and
// does nothing until it is told to stop. The test images carry it instead of registry.k8s.io/pause, which cannot be
// pulled offline.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of its namespace it would inherit orphans; the pod's containers run in their own PID namespaces
	// unless shareProcessNamespace is set, which the tests do not use, so there is nothing to reap.
	<-stop
}
