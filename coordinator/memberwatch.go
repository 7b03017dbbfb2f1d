package coordinator

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// DefaultMemberProbeInterval is the default of Config.MemberProbeInterval.
const DefaultMemberProbeInterval = 30 * time.Second

// MemberProbeTimeout bounds the leader's question to one member.
const MemberProbeTimeout = 2 * time.Second

// Capability sources, as api.Member.CapabilitiesFrom names them.
const (
	fromSelf    = "self"
	fromMember  = "member"
	fromRecord  = "record"
	fromAssumed = "assumed"
)

// peerAnswer is the leader's latest answer from one member in this term.
type peerAnswer struct {
	self api.MemberSelf
	err  error // nil: it answered
}

// peers is what the leader learnt from each member in its term; reset
// when a term starts, so a new leader trusts only what it asked itself.
type peers struct {
	mu sync.Mutex
	m  map[string]peerAnswer
}

func (p *peers) reset() {
	p.mu.Lock()
	p.m = nil
	p.mu.Unlock()
}

func (p *peers) get(id string) (peerAnswer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.m[id]
	return a, ok
}

func (p *peers) set(m map[string]peerAnswer) {
	p.mu.Lock()
	p.m = m
	p.mu.Unlock()
}

// capsOf returns what member id reads as this member knows it, and
// where from: itself; on the leader, the member's answer in this term;
// the replicated record; else the Baseline, assumed. A member that does
// not answer the leader (down, restarting) is taken at its record: it
// reads what it said it reads until an answer says otherwise — a member
// brought back on an older release after that is a rollback, which
// halts it (docs/mixed-versions.md) — so one member down for a reboot
// does not hold back what every member recorded it reads. Without a
// record it is assumed to read only the Baseline.
func (c *Coordinator) capsOf(id string) (api.MemberCapabilities, string, string) {
	if id == c.cfg.Raft.NodeID {
		s := c.MemberSelf()
		return s.Capabilities, fromSelf, s.Reason
	}
	if a, ok := c.peers.get(id); ok && c.store.IsLeader() && a.err == nil {
		return a.self.Capabilities, fromMember, a.self.Reason
	}
	if r, ok := c.sm.MemberRecords()[id]; ok {
		return r, fromRecord, ""
	}
	return Baseline, fromAssumed, ""
}

// kickMembers makes the leader ask every member again now (a member
// joined or left).
func (c *Coordinator) kickMembers() {
	select {
	case c.membersKick <- struct{}{}:
	default:
	}
}

// watchMembers runs for a leadership term: it asks every member what it
// reads when the term starts, when a member joins or leaves, and every
// MemberProbeInterval; records the answers in the replicated membership
// once every member answered and reads that record; and sets the
// snapshot formats every member reads.
func (c *Coordinator) watchMembers(ctx context.Context) {
	c.peers.reset()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-c.membersKick:
		}
		c.probeMembers(ctx)
		c.recordMembers(ctx)
		c.refreshFormats()
		timer.Reset(c.cfg.MemberProbeInterval)
	}
}

// probeMembers asks every other member, at once, what it reads.
func (c *Coordinator) probeMembers(ctx context.Context) {
	ms, err := c.store.Members()
	if err != nil {
		return
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]peerAnswer{}
	)
	for _, m := range ms {
		if m.ID == c.cfg.Raft.NodeID {
			continue
		}
		if c.cfg.ProbeMember == nil || m.HTTPAddr == "" {
			out[m.ID] = peerAnswer{err: errors.New("no way to ask it")}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, MemberProbeTimeout)
			defer cancel()
			s, err := c.cfg.ProbeMember(pctx, m.HTTPAddr)
			if err == nil && s.ID != m.ID {
				err = errors.New("answered as member " + s.ID)
			}
			mu.Lock()
			out[m.ID] = peerAnswer{self: s, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	c.peers.set(out)
}

// recordMembers writes every member's capabilities into the replicated
// membership when they changed, once every member answered. The gate
// (apply) refuses the record while some member cannot read it (molt
// 0.1.0 has no such command): it is written once the last of them is
// upgraded.
func (c *Coordinator) recordMembers(ctx context.Context) {
	ms, err := c.store.Members()
	if err != nil {
		return
	}
	want := map[string]api.MemberCapabilities{}
	for _, m := range ms {
		caps, from, _ := c.capsOf(m.ID)
		if from != fromSelf && from != fromMember {
			return // someone did not answer: nothing to record yet
		}
		want[m.ID] = caps
	}
	if maps.Equal(want, c.sm.MemberRecords()) {
		return
	}
	_, err = c.apply(ctx, statemachine.SetMembersCmd{Members: want, Now: c.cfg.Clock.Now()})
	var rule *RuleError
	switch {
	case err == nil:
		c.log.Info("members' capabilities recorded", "members", len(want))
	case errors.As(err, &rule) && rule.Rule == RuleMemberCannotRead:
		c.log.Debug("members' capabilities not recorded yet", "err", err)
	case ctx.Err() == nil:
		c.log.Warn("recording members' capabilities failed", "err", err)
	}
}

// readableByAll returns the capabilities every member reads: the lowest
// of each member's (capsOf), field by field.
func (c *Coordinator) readableByAll() api.MemberCapabilities {
	low := c.Capabilities()
	ms, err := c.store.Members()
	if err != nil {
		return Baseline
	}
	for _, m := range ms {
		caps, _, _ := c.capsOf(m.ID)
		low.Command = min(low.Command, caps.Command)
		low.RaftCommand = min(low.RaftCommand, caps.RaftCommand)
		low.StateSnapshot = min(low.StateSnapshot, caps.StateSnapshot)
		low.RaftSnapshot = min(low.RaftSnapshot, caps.RaftSnapshot)
		low.StepLayout = min(low.StepLayout, caps.StepLayout)
	}
	return low
}

// refreshFormats makes this member write snapshots in the newest format
// every member reads: a snapshot may be sent to any of them.
func (c *Coordinator) refreshFormats() {
	low := c.readableByAll()
	c.sm.SetSnapshotFormat(low.StateSnapshot)
	c.store.SetSnapshotFormat(low.RaftSnapshot)
}

// stepLayout is the layout a new upgrade takes: the newest every member
// knows, so that no member reads an upgrade laid out in a layout it does
// not know.
func (c *Coordinator) stepLayout() int {
	return c.readableByAll().StepLayout
}
