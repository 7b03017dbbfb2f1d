package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/moltproject/molt/cloud/labcloud"
)

// GroupService serves the lab's instance groups to the coordinator
// members: the "lab" cloud adapter (cloud/labcloud) over HTTP, listening
// on the loopback of the lab's network namespace. The members run in that
// namespace and reach it at Endpoint; the hosts, each in a namespace of
// its own, cannot, and nothing on the machine's own interfaces listens.
// The process that serves it owns the hosts: run it for as long as a MIG
// pool may be upgraded (the demo and the end-to-end test do).
type GroupService struct {
	groups   *Groups
	srv      *http.Server
	endpoint string
	done     chan struct{}
	net      Network
}

// ServeGroups opens the lab's instance groups (Groups) and serves them on
// a free port of the lab namespace's loopback.
func (l *Lab) ServeGroups(cfg GroupsConfig) (*GroupService, error) {
	if !nsExists(l.net.LabNS()) {
		return nil, fmt.Errorf("%w: namespace %s does not exist: bring the lab up first", ErrNetwork, l.net.LabNS())
	}
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if ap, err := netip.ParseAddrPort(listen); err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("%w: instance groups listen on a loopback address of the lab namespace (127.0.0.1:PORT), not %q", ErrNetwork, listen)
	}
	g, err := l.Groups(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := ListenInNamespace(nsPath(l.net.LabNS()), "tcp", listen)
	if err != nil {
		g.Close()
		return nil, err
	}
	s := &GroupService{groups: g, endpoint: "http://" + ln.Addr().String(), done: make(chan struct{}), net: l.net,
		srv: &http.Server{Handler: labcloud.Handler(g), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.cfg.Log.Warn("lab instance groups: serving stopped", "err", err)
		}
	}()
	l.step("instance groups (cloud adapter %q) at %s in namespace %s", labcloud.Name, s.endpoint, l.net.LabNS())
	return s, nil
}

// Endpoint is the URL a coordinator member in the lab namespace uses: the
// cloud spec's endpoint of a cluster whose MIG pools are the lab's.
func (s *GroupService) Endpoint() string { return s.endpoint }

// Groups is the provider served, for the process that owns it (tests set
// quota and stockout through it).
func (s *GroupService) Groups() *Groups { return s.groups }

// Client is a client of the service from this process, which may be
// outside the lab namespace: it dials from inside it.
func (s *GroupService) Client() (*labcloud.Client, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return s.net.DialContext(ctx, network, addr)
	}}}
	return labcloud.New(labcloud.Config{Endpoint: s.endpoint, HTTPClient: hc})
}

// Close stops serving and the groups' workers. The instances' hosts keep
// running (Down removes them); a later ServeGroups picks the book up.
func (s *GroupService) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.groups.Close()
	return err
}
