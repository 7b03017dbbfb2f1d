// Command pause is the lab's pod sandbox process: it does nothing until it
// is told to stop, like registry.k8s.io/pause, and reaps no children because
// the lab's pods never share a PID namespace.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
}
