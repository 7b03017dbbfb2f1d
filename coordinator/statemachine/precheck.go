package statemachine

import (
	"fmt"
	"maps"
)

// Precheck runs a command's apply function against a scratch copy of the
// state it touches, under the read lock, and returns what the function
// would answer now, changing nothing. The coordinator calls it before
// proposing, so a request the state machine would refuse never costs a
// log entry; the apply function still checks again when the entry lands
// (the state may have moved in between).
//
// It knows the commands that requests propose and that touch one cluster
// record: PutClusterCmd, DeleteClusterCmd, PoolCommandCmd, RetryNodeCmd,
// NodeStepResultCmd, AgentRegisterCmd, PutChannelCmd (on a copy of
// the channels), and PutSequenceCmd and SequenceOverrideCmd (on a copy of
// the sequences). Other commands are not checked (nil).
func (f *Machine) Precheck(cmd any) error {
	switch c := cmd.(type) {
	case PutClusterCmd:
		return f.precheck(c.Spec.Name, false, func(s *state) error { _, err := s.putCluster(c); return err })
	case DeleteClusterCmd:
		return f.precheck(c.Name, true, func(s *state) error { _, err := s.deleteCluster(c); return err })
	case PoolCommandCmd:
		return f.precheck(c.Cluster, true, func(s *state) error { _, err := s.poolCommand(c); return err })
	case RetryNodeCmd:
		return f.precheck(c.Cluster, true, func(s *state) error { _, err := s.retryNode(c); return err })
	case NodeStepResultCmd:
		return f.precheck(c.Cluster, true, func(s *state) error { _, err := s.nodeStepResult(c); return err })
	case AgentRegisterCmd:
		return f.precheck(c.Cluster, true, func(s *state) error { _, err := s.agentRegister(c); return err })
	case PutChannelCmd:
		f.mu.RLock()
		defer f.mu.RUnlock()
		_, err := (&state{Releases: f.st.Releases, Channels: maps.Clone(f.st.Channels)}).putChannel(c)
		return err
	case PutSequenceCmd:
		// putSequence replaces the map, or deletes from it: a copy.
		f.mu.RLock()
		defer f.mu.RUnlock()
		_, err := (&state{Clusters: f.st.Clusters, Sequences: maps.Clone(f.st.Sequences)}).putSequence(c)
		return err
	case SequenceOverrideCmd:
		// sequenceOverride appends to the record: a copy of it.
		f.mu.RLock()
		defer f.mu.RUnlock()
		seqs := maps.Clone(f.st.Sequences)
		if r := seqs[c.Sequence]; r != nil {
			cp := cloneSequence(r)
			seqs[c.Sequence] = &cp
		}
		_, err := (&state{Releases: f.st.Releases, Sequences: seqs}).sequenceOverride(c)
		return err
	}
	return nil
}

// precheck runs fn on a state whose cluster map is a copy of the real one
// with the named cluster's record copied (copyCluster, which shares no
// memory with the original), so fn may change that record and the map but
// nothing of the real state, and prechecks running at once under the read
// lock change nothing of each other's. Releases, tokens and the other
// clusters' records are shared: the commands above only read them. must
// says the cluster has to exist.
func (f *Machine) precheck(cluster string, must bool, fn func(*state) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &state{Clusters: maps.Clone(f.st.Clusters), Releases: f.st.Releases, Tokens: f.st.Tokens}
	if r, ok := f.st.Clusters[cluster]; ok {
		cp := copyCluster(r)
		s.Clusters[cluster] = &cp
	} else if must {
		return fmt.Errorf("cluster %q: %w", cluster, ErrNotFound)
	}
	return fn(s)
}

// KnownUpgrade reports whether id is the current or a past upgrade of the
// cluster: a stale result for one is acknowledged, a result for any
// other upgrade is refused as not found.
func (f *Machine) KnownUpgrade(cluster, id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Clusters[cluster]
	if !ok {
		return false
	}
	if r.Upgrade != nil && r.Upgrade.ID == id {
		return true
	}
	for _, h := range r.History {
		if h.ID == id {
			return true
		}
	}
	return false
}
