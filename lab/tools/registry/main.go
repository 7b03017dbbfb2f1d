// Command registry is the lab's image registry: an OCI distribution
// registry (go-containerregistry's pkg/registry) that keeps blobs in a
// directory and manifests in memory. The lab runs it on its bridge address
// inside its network namespace and pushes the add-on images into it; every
// host's containerd uses it as the mirror of registry.k8s.io and
// molt.local, so a pod scheduled on any node pulls an image no agent
// imported there (the lab's hosts reach nothing else).
//
// Manifests do not outlive the process: whoever starts it pushes what it
// must serve (blobs already in the directory are not sent again).
//
// Usage: registry -listen 10.77.0.1:5000 -dir /var/cache/molt/lab/registry
package main

import (
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:5000", "address to serve the registry API on")
	dir := flag.String("dir", "", "directory for blobs (required)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("registry: -dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatalf("registry: %v", err)
	}
	logger := log.New(os.Stderr, "registry ", log.LstdFlags)
	srv := &http.Server{
		Addr:              *listen,
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)), registry.Logger(logger)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		_ = srv.Close()
	}()
	logger.Printf("serving on %s, blobs in %s", *listen, *dir)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Fatal(err)
	}
}
