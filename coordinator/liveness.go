package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/raftstore"
)

// liveness keeps agents' last heartbeats in the leader's memory. 15,000
// agents beating every 10 s would be 1,500 Raft writes a second if every
// beat were committed; instead only changes are: registered, missing, back,
// healthy ↔ unhealthy, component versions.
//
// Beside the beats it keeps their deadlines (deadlines): a tick looks only
// at agents whose last beat is older than MissingAfter, not at every agent
// (SPEC's 15,000 nodes would cost a copy and walk of every agent record
// each tick).
type liveness struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	since time.Time // when this member started leading
	due   deadlines
	// seeded: due holds every agent the replica has registered and not
	// missing. A term starts unseeded (agents registered under an earlier
	// leader have not beaten here); its first sweep walks the agents once.
	seeded bool
	// versions is the molt release each agent last said it runs (its
	// registration and beats), shown per node; kept across terms, it is
	// as old as the last beat this member served.
	versions map[string]string
}

func newLiveness() *liveness {
	return &liveness{seen: map[string]time.Time{}, due: newDeadlines(), versions: map[string]string{}}
}

// noteVersion records the release agent key says it runs ("" says
// nothing: an agent before 0.2.0 sent its own build's, or none).
func (l *liveness) noteVersion(key, v string) {
	if v == "" {
		return
	}
	l.mu.Lock()
	l.versions[key] = v
	l.mu.Unlock()
}

// version is the release agent key last said it runs.
func (l *liveness) version(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions[key]
}

// reset starts a leadership term: every agent gets a full MissingAfter of
// grace from now, since beats sent to the old leader are not known here.
func (l *liveness) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = map[string]time.Time{}
	l.since = now
	l.due = newDeadlines()
	l.seeded = false
}

// note records agent (cluster, node)'s latest beat as at; l.mu held.
// Every agent has its grace from the term's start, a beat a follower
// received before it and relayed after too.
func (l *liveness) note(cluster, node string, at time.Time) {
	key := nodeKey(cluster, node)
	last, ok := l.seen[key]
	if !ok || at.After(last) {
		l.seen[key], last = at, at
	}
	l.due.set(cluster, node, later(last, l.since))
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

func (l *liveness) beat(cluster, node string, now time.Time) {
	l.mu.Lock()
	l.seen[nodeKey(cluster, node)] = now
	l.due.set(cluster, node, later(now, l.since))
	l.mu.Unlock()
}

// beatAt notes a beat received at, earlier than now, by a follower that
// relayed it: it keeps whichever beat of the agent is the later, since a
// relayed beat may arrive after one the agent sent here since.
func (l *liveness) beatAt(cluster, node string, at time.Time) {
	l.mu.Lock()
	l.note(cluster, node, at)
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

// agentSource is what expired asks of the replicated state: one agent's
// record, and (once a term) every agent's.
type agentSource interface {
	Agent(cluster, node string) (statemachine.AgentRecord, bool)
	Agents() []statemachine.NodeAgent
}

// expired returns the registered agents, not missing, whose last beat (or
// the term's start) is more than missingAfter before now: those to commit
// missing. They leave the deadlines; retry puts back one whose commit
// failed. Agents no longer registered, or already missing, leave them too:
// registering and beating (the only ways back) put them back. Its cost
// follows the deadlines passed, but for the term's first call, which
// walks every agent once.
func (l *liveness) expired(now time.Time, missingAfter time.Duration, agents agentSource) []deadline {
	var all []statemachine.NodeAgent
	l.mu.Lock()
	seeded := l.seeded
	l.mu.Unlock()
	if !seeded {
		all = agents.Agents() // outside l.mu: the FSM's lock is never taken under it
	}
	l.mu.Lock()
	if !l.seeded {
		for _, a := range all {
			if a.Registered && !a.Missing && !l.due.has(a.Cluster, a.Node) {
				last, ok := l.seen[nodeKey(a.Cluster, a.Node)]
				if !ok {
					last = l.since
				}
				l.due.set(a.Cluster, a.Node, later(last, l.since))
			}
		}
		l.seeded = true
	}
	var popped []deadline
	for d, ok := l.due.first(); ok && now.Sub(d.last) > missingAfter; d, ok = l.due.first() {
		l.due.remove(d.cluster, d.node)
		popped = append(popped, d)
	}
	l.mu.Unlock()
	gone := popped[:0]
	for _, d := range popped {
		if a, ok := agents.Agent(d.cluster, d.node); ok && a.Registered && !a.Missing {
			gone = append(gone, d)
		}
	}
	return gone
}

// retry puts back the deadline of an agent whose missing commit failed,
// so that the next tick tries again — unless it has beaten since.
func (l *liveness) retry(d deadline) {
	l.mu.Lock()
	if !l.due.has(d.cluster, d.node) {
		l.due.set(d.cluster, d.node, d.last)
	}
	l.mu.Unlock()
}

// sweep commits "missing" for registered agents that stopped beating:
// one entry for up to statemachine.MaxAgentsMissingBatch of them once
// every member reads it, else one entry each (a member before 0.2.0).
// After a leader change every agent the new leader has not heard from is
// due at once; one entry each then cost thousands of serial commits.
func (l *liveness) sweep(ctx context.Context, c *Coordinator, now time.Time) {
	gone := l.expired(now, c.cfg.MissingAfter, c.sm)
	if len(gone) == 0 {
		return
	}
	for _, d := range gone {
		c.log.Warn("agent missing", "cluster", d.cluster, "node", d.node)
	}
	if c.checkReadable(needOf(statemachine.AgentsMissingCmd{})) != nil {
		for _, d := range gone {
			cmd := statemachine.AgentHealthCmd{Cluster: d.cluster, Node: d.node, Missing: true, Healthy: false, Now: now}
			if _, err := c.apply(ctx, cmd); err != nil {
				c.log.Warn("commit agent missing", "err", err)
				l.retry(d)
			}
		}
		return
	}
	for len(gone) > 0 {
		batch := gone[:min(len(gone), statemachine.MaxAgentsMissingBatch)]
		gone = gone[len(batch):]
		cmd := statemachine.AgentsMissingCmd{Agents: make([]statemachine.AgentRef, len(batch)), Now: now}
		for i, d := range batch {
			cmd.Agents[i] = statemachine.AgentRef{Cluster: d.cluster, Node: d.node}
		}
		if _, err := c.apply(ctx, cmd); err != nil {
			c.log.Warn("commit agents missing", "agents", len(batch), "err", err)
			for _, d := range batch {
				l.retry(d)
			}
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
	if err := checkAgentVersion(r.AgentVersion); err != nil {
		return api.RegisterResponse{}, err
	}
	cmd := statemachine.AgentRegisterCmd{Cluster: r.Cluster, Node: r.Node, Address: r.Address, Now: now}
	if err := c.sm.Precheck(cmd); err != nil {
		return api.RegisterResponse{}, err
	}
	if _, err := c.apply(ctx, cmd); err != nil {
		return api.RegisterResponse{}, err
	}
	c.live.beat(r.Cluster, r.Node, now)
	c.live.noteVersion(nodeKey(r.Cluster, r.Node), r.AgentVersion)
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
	now := c.cfg.Clock.Now()
	return c.heartbeat(ctx, h, now, now)
}

// heartbeat notes h, received at (now, or earlier for a relayed beat), and
// commits a change of health at now.
func (c *Coordinator) heartbeat(ctx context.Context, h api.AgentHealth, now, at time.Time) error {
	if err := checkHeartbeatLimits(h); err != nil {
		return err
	}
	a, ok := c.sm.Agent(h.Cluster, h.Node)
	if !ok || !a.Registered {
		return fmt.Errorf("agent %s/%s is not registered: %w", h.Cluster, h.Node, ErrNotFound)
	}
	if at.Equal(now) {
		c.live.beat(h.Cluster, h.Node, now)
	} else { // relayed
		c.live.beatAt(h.Cluster, h.Node, at)
	}
	c.live.noteVersion(nodeKey(h.Cluster, h.Node), h.AgentVersion)
	if !c.beatChanges(a, h) {
		return nil
	}
	_, err := c.apply(ctx, c.healthCmd(h, now))
	return err
}

func beatHealthy(h api.AgentHealth) bool { return h.Kubelet.Healthy && h.Containerd.Healthy }

// RelayedBeat is an agent's heartbeat that a follower received and
// relays to the leader with others (httpapi's beat relay): Age is how
// long before the follower sent it on it received it, by its own clock,
// so that no two members' clocks are compared.
type RelayedBeat struct {
	Health api.AgentHealth
	Age    time.Duration
}

// BeatRelayable is what a follower asks of its replica before relaying
// beat h: the beat's limits (a refusal is the error), and whether the beat
// changes nothing the replica holds, so that the leader needs it for
// liveness only. A beat that changes the agent's record, or of an agent
// this replica does not know as registered (yet), is not relayable: it
// goes to the leader on its own and its commit (or refusal) answers it.
func (c *Coordinator) BeatRelayable(h api.AgentHealth) (bool, error) {
	if err := checkHeartbeatLimits(h); err != nil {
		return false, err
	}
	a, ok := c.sm.Agent(h.Cluster, h.Node)
	return ok && a.Registered && !c.beatChanges(a, h), nil
}

// RelayedHeartbeats notes the beats a follower relayed, each as received
// Age before now, as Heartbeat notes one beat: the leader checks each
// against its own state and commits a change of health the follower's
// replica did not show yet. It answers one error per beat (nil: noted), or
// raftstore.ErrNotLeader for the whole batch on a member that does not
// lead.
func (c *Coordinator) RelayedHeartbeats(ctx context.Context, beats []RelayedBeat) ([]error, error) {
	if !c.IsLeader() {
		return nil, raftstore.ErrNotLeader
	}
	now := c.cfg.Clock.Now()
	errs := make([]error, len(beats))
	var wg sync.WaitGroup
	for i, b := range beats {
		at := now.Add(-max(b.Age, 0))
		if checkHeartbeatLimits(b.Health) == nil {
			if a, ok := c.sm.Agent(b.Health.Cluster, b.Health.Node); ok && a.Registered && !c.beatChanges(a, b.Health) {
				c.live.beatAt(b.Health.Cluster, b.Health.Node, at)
				c.live.noteVersion(nodeKey(b.Health.Cluster, b.Health.Node), b.Health.AgentVersion)
				continue
			}
		}
		// A change to commit, or a refusal: commits wait for Raft, so
		// they run side by side, not one after another.
		wg.Go(func() { errs[i] = c.heartbeat(ctx, b.Health, now, at) })
	}
	wg.Wait()
	return errs, nil
}
