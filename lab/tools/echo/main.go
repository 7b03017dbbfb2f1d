// Command echo is the lab's sample workload: an HTTP server that answers
// every request with the pod and node it runs on, so a test can tell which
// host served it.
//
// Usage: echo -listen :8080 (POD_NAME and NODE_NAME from the downward API).
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	flag.Parse()
	msg := fmt.Sprintf("pod=%s node=%s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(msg)) })
	log.Fatal(http.ListenAndServe(*listen, nil))
}
