package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moltproject/molt/metrics"
)

// newRegistry returns a fresh registry with the Go and process collectors
// and the agent's own metrics, which it returns for agent.Config.Metrics.
func newRegistry() (*prometheus.Registry, *metrics.AgentMetrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	metrics.RegisterBuildInfo(reg) // molt_build_info: which molt this agent runs
	return reg, metrics.NewAgentMetrics(reg)
}

// newHandler serves GET /metrics from g and GET /healthz ("ok", 200 while
// the process serves at all).
func newHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	// No gzip: the page is ~10 KB, and each compressed scrape allocates a
	// ~1 MB flate state, which measurably raised the agent's RSS (budget
	// 20 MiB; see docs/agent.md, Footprint).
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{DisableCompression: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// maxConns bounds the listener's open connections. The port is open to
// the network (peers probe it in preflight, Prometheus scrapes it), and
// net/http bounds how long a connection may idle but not how many there
// are: a peer reconnecting as fast as it is dropped could take the
// agent's file descriptors, which it needs for its real work. Beyond the
// bound a connection is closed at once; a peer probe only needs TCP to
// connect, which the kernel has done by then.
const maxConns = 128

// listener is the agent's HTTP endpoint.
type listener struct {
	addr net.Addr
	srv  *http.Server
	done chan struct{}
	// refused counts connections closed at once for maxConns.
	refused *atomic.Uint64
}

// listen binds addr at once, so a taken port fails startup instead of
// being logged later, and serves h in the background until close.
func listen(addr string, h http.Handler, log *slog.Logger) (*listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	bl := &boundedListener{Listener: l, slots: make(chan struct{}, maxConns)}
	s := &listener{
		addr: l.Addr(),
		// IdleTimeout: a kept-alive connection does not hold its slot
		// for ever.
		srv:     &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second},
		done:    make(chan struct{}),
		refused: &bl.refused,
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(bl); !errors.Is(err, http.ErrServerClosed) {
			log.Error("listener stopped", "addr", s.addr.String(), "err", err)
		}
	}()
	return s, nil
}

// close stops accepting, waits briefly for requests in flight and returns
// when the server goroutine has ended.
func (s *listener) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// boundedListener closes a new connection at once while cap(slots) are
// open, rather than blocking: the accept loop never waits on a peer.
type boundedListener struct {
	net.Listener
	slots   chan struct{}
	refused atomic.Uint64
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
			l.refused.Add(1)
		}
	}
}

// slotConn gives its slot back once, on the first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
