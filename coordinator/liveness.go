package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// liveness keeps agents' last heartbeats in the leader's memory. 15,000
// agents beating every 10 s would be 1,500 Raft writes a second if every
// beat were committed; instead only changes are: registered, missing, back,
// healthy ↔ unhealthy, component versions.
type liveness struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	since time.Time // when this member started leading
}

func newLiveness() *liveness { return &liveness{seen: map[string]time.Time{}} }

// reset starts a leadership term: every agent gets a full MissingAfter of
// grace from now, since beats sent to the old leader are not known here.
func (l *liveness) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = map[string]time.Time{}
	l.since = now
}

func (l *liveness) beat(key string, now time.Time) {
	l.mu.Lock()
	l.seen[key] = now
	l.mu.Unlock()
}

func (l *liveness) lastSeen(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[key]
	return t, ok
}

// awaiting reports whether this term is still waiting for the first beat
// of agent key: it has not beaten here, and its grace since the term began
// (MissingAfter) has not run out — after which it beats or is declared
// missing.
func (l *liveness) awaiting(key string, now time.Time, grace time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, seen := l.seen[key]
	return !seen && now.Sub(l.since) <= grace
}

// sweep commits "missing" for registered agents that stopped beating.
func (l *liveness) sweep(ctx context.Context, c *Coordinator, now time.Time) {
	var gone []statemachine.AgentHealthCmd
	agents := c.sm.Agents()
	l.mu.Lock()
	for _, a := range agents {
		if !a.Registered || a.Missing {
			continue
		}
		last, ok := l.seen[nodeKey(a.Cluster, a.Node)]
		if !ok {
			last = l.since
		}
		if now.Sub(last) > c.cfg.MissingAfter {
			gone = append(gone, statemachine.AgentHealthCmd{Cluster: a.Cluster, Node: a.Node, Missing: true, Healthy: false, Now: now})
		}
	}
	l.mu.Unlock()
	for _, cmd := range gone {
		c.log.Warn("agent missing", "cluster", cmd.Cluster, "node", cmd.Node)
		if _, err := c.apply(ctx, statemachine.CmdAgentHealth, cmd); err != nil {
			c.log.Warn("commit agent missing", "err", err)
		}
	}
}

// Register admits an agent for a node the cluster lists. The HTTP layer
// has checked that the caller's certificate names that node.
func (c *Coordinator) Register(ctx context.Context, r api.RegisterRequest) (api.RegisterResponse, error) {
	now := c.cfg.Clock.Now()
	if len(r.Address) > MaxAgentStringLen || len(r.AgentVersion) > MaxAgentStringLen {
		return api.RegisterResponse{}, limitErr("agent-register", "address and agentVersion are at most %d bytes", MaxAgentStringLen)
	}
	cmd := statemachine.AgentRegisterCmd{Cluster: r.Cluster, Node: r.Node, Address: r.Address, Now: now}
	if err := c.sm.Precheck(cmd); err != nil {
		return api.RegisterResponse{}, err
	}
	if _, err := c.apply(ctx, statemachine.CmdAgentRegister, cmd); err != nil {
		return api.RegisterResponse{}, err
	}
	c.live.beat(nodeKey(r.Cluster, r.Node), now)
	return api.RegisterResponse{Cluster: r.Cluster, Node: r.Node, HeartbeatIntervalSeconds: int(c.cfg.HeartbeatInterval / time.Second)}, nil
}

func (c *Coordinator) checkAgent(cluster, node string) error {
	if a, ok := c.sm.Agent(cluster, node); !ok || !a.Registered {
		return fmt.Errorf("agent %s/%s is not registered: %w", cluster, node, ErrNotFound)
	}
	return nil
}

// Heartbeat notes a beat in memory and commits only a change of health.
func (c *Coordinator) Heartbeat(ctx context.Context, h api.AgentHealth) error {
	if err := checkHeartbeatLimits(h); err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	healthy := h.Kubelet.Healthy && h.Containerd.Healthy
	a, ok := c.sm.Agent(h.Cluster, h.Node)
	if !ok || !a.Registered {
		return fmt.Errorf("agent %s/%s is not registered: %w", h.Cluster, h.Node, ErrNotFound)
	}
	changed := a.Missing || a.Healthy != healthy || a.Kubelet != h.Kubelet.Version || a.Containerd != h.Containerd.Version
	c.live.beat(nodeKey(h.Cluster, h.Node), now)
	if !changed {
		return nil
	}
	_, err := c.apply(ctx, statemachine.CmdAgentHealth, statemachine.AgentHealthCmd{Cluster: h.Cluster, Node: h.Node, Healthy: healthy,
		Kubelet: h.Kubelet.Version, Containerd: h.Containerd.Version, Now: now})
	return err
}
