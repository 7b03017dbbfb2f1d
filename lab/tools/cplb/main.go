// Command cplb is the lab's control-plane load balancer: a plain TCP proxy
// that accepts on one address and forwards each connection to the first
// backend that answers, starting at a rotating offset. It stands in for the
// HAProxy static pod of a GKE-on-bare-metal control-plane LB node; TLS passes
// through untouched, so clients verify the apiservers' own certificates.
//
// Usage: cplb -listen 10.77.0.10:6443 -backend 10.77.0.11:6443 -backend ...
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

type backends []string

func (b *backends) String() string     { return strings.Join(*b, ",") }
func (b *backends) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var bs backends
	listen := flag.String("listen", ":6443", "address to accept on")
	flag.Var(&bs, "backend", "host:port of a backend (repeatable)")
	flag.Parse()
	if len(bs) == 0 {
		log.Fatal("cplb: no -backend")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("cplb: %s -> %s", *listen, bs.String())
	var next atomic.Uint64
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Printf("cplb: accept: %v", err)
			continue
		}
		go serve(c, bs, int(next.Add(1)))
	}
}

// serve connects c to the first reachable backend, trying each once.
func serve(c net.Conn, bs backends, start int) {
	defer c.Close()
	for i := range bs {
		b := bs[(start+i)%len(bs)]
		up, err := net.DialTimeout("tcp", b, 2*time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
		<-done
		<-done
		return
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
