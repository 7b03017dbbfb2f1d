package agent

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// freezingProxy relays TCP to a coordinator member; frozen, it still
// accepts connections but moves no byte either way, as a member whose
// process is stopped (SIGSTOP) or whose packets are dropped.
type freezingProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	thawed chan struct{} // closed while not frozen
}

func newFreezingProxy(t *testing.T, upstream string) *freezingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezingProxy{ln: ln, thawed: make(chan struct{})}
	close(p.thawed)
	var conns sync.WaitGroup
	var open []net.Conn
	t.Cleanup(func() {
		p.thaw()
		ln.Close()
		// Idle kept connections (the enrollment client's, say) would
		// hold the relays until their idle timeout.
		p.mu.Lock()
		for _, c := range open {
			c.Close()
		}
		p.mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			open = append(open, c, u)
			p.mu.Unlock()
			conns.Add(2)
			go func() { defer conns.Done(); p.relay(u, c) }()
			go func() { defer conns.Done(); p.relay(c, u) }()
		}
	}()
	return p
}

func (p *freezingProxy) addr() string { return p.ln.Addr().String() }

func (p *freezingProxy) freeze() {
	p.mu.Lock()
	p.thawed = make(chan struct{})
	p.mu.Unlock()
}

func (p *freezingProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *freezingProxy) wait() {
	p.mu.Lock()
	ch := p.thawed
	p.mu.Unlock()
	<-ch
}

// relay copies from src to dst, holding every chunk while frozen.
func (p *freezingProxy) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.wait()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestFrozenMemberIsLeftBehind: the member the agent talks to freezes
// while the agent waits in a long poll there (ten minutes asked); the
// agent notices within seconds (HTTP/2 pings, api/client.ConfigureTransport),
// moves to the next member, runs the operation that member offers and
// reports it there, heartbeats included — all while the first member
// stays frozen.
func TestFrozenMemberIsLeftBehind(t *testing.T) {
	coord := newFakeCoordinator(t)
	other := &fakeCoordinator{coord.Peer(t)}
	proxy := newFreezingProxy(t, coord.Listener.Addr().String())
	h := newFakeHostAt(t, "https://"+proxy.addr()+","+other.URL, coord)
	h.cfg.PollWait = 10 * time.Minute
	h.cfg.HeartbeatInterval = 200 * time.Millisecond
	h.startAtFirst(t)
	url, sum := h.serve("kubelet", kubeletScript("v1.34.0", false))
	runAgent(t, h.cfg)

	require.Eventually(t, func() bool { return coord.Registered() > 0 && len(coord.Heartbeats()) > 0 }, 30*time.Second, 10*time.Millisecond,
		"the agent registers and beats at the first member")
	proxy.freeze()
	frozen := time.Now()
	other.enqueue(upgradeOp("op-1", url, sum, "v1.34.0"))
	res := other.WaitResult(t, "op-1", 60*time.Second)
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	t.Logf("operation offered by the other member done %v after the freeze", time.Since(frozen))
	beats := len(other.Heartbeats())
	require.Eventually(t, func() bool { return len(other.Heartbeats()) > beats }, 30*time.Second, 10*time.Millisecond,
		"heartbeats go to the member that answers")
}
