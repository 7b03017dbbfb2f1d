// Command echo is the lab's sample workload: an HTTP server that answers
// every request with the pod and node it runs on, so a test can tell which
// host served it.
//
// It shuts down the way a workload that cares about its clients does: on
// SIGTERM it keeps serving for -drain-delay (the time the cluster takes to
// take the pod out of its Services' endpoints on every node), then stops
// accepting and finishes the requests in flight. A server that exits at
// once refuses the connections kube-proxy still sends it.
//
// Usage: echo -listen :8080 [-drain-delay 5s] (POD_NAME and NODE_NAME from
// the downward API).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	drainDelay := flag.Duration("drain-delay", 5*time.Second, "how long to keep serving after SIGTERM")
	flag.Parse()
	msg := fmt.Sprintf("pod=%s node=%s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	srv := &http.Server{Addr: *listen, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(msg))
	})}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-term
		log.Printf("terminating: serving %s more, then shutting down", *drainDelay)
		time.Sleep(*drainDelay)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-done // Shutdown returned: the requests in flight are answered
}
