package raftstore

import (
	"time"

	"github.com/moltproject/molt/internal/tlsaccept"
)

// Stats is a point-in-time view of this member's Raft state, for metrics and
// the raft-members API.
type Stats struct {
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State string `json:"state"`
	// Term is the current Raft term.
	Term uint64 `json:"term"`
	// LastLogIndex is the index of the last entry in the local log.
	LastLogIndex uint64 `json:"last_log_index"`
	// CommitIndex is the highest index known to be committed.
	CommitIndex uint64 `json:"commit_index"`
	// AppliedIndex is Raft's applied index: the last entry of any kind
	// (command, no-op, configuration) handed to the FSM.
	AppliedIndex uint64 `json:"applied_index"`
	// FSMIndex is the index of the last command the FSM applied; see
	// Store.AppliedIndex.
	FSMIndex uint64 `json:"fsm_index"`
	// LastContact is when a follower last heard from the leader; zero on
	// the leader and before any contact.
	LastContact time.Time `json:"last_contact"`
	// NumPeers counts the other members in the configuration.
	NumPeers int `json:"num_peers"`
	// LeaderID is the leader's node ID, "" when unknown.
	LeaderID string `json:"leader_id"`
}

// Stats returns this member's Raft state.
func (s *Store) Stats() Stats {
	_, leader := s.raft.LeaderWithID()
	st := Stats{
		State:        s.raft.State().String(),
		Term:         s.raft.CurrentTerm(),
		LastLogIndex: s.raft.LastIndex(),
		CommitIndex:  s.raft.CommitIndex(),
		AppliedIndex: s.raft.AppliedIndex(),
		FSMIndex:     s.fsm.applied.Load(),
		LastContact:  s.raft.LastContact(),
		LeaderID:     string(leader),
	}
	if !s.closed.Load() {
		st.NumPeers = s.numPeers()
	}
	return st
}

// FSMCall is the number of the call Raft's FSM goroutine is making into
// the state machine now (Apply, Snapshot or Restore), 0 when it is between
// calls: waiting for committed entries, or with none to apply. Calls are
// numbered from 1 in the order they start, so a caller that sees the same
// non-zero number at two moments knows the apply loop made no progress in
// between (coordinator's watchdog).
func (s *Store) FSMCall() uint64 { return s.fsm.inCall.Load() }

// HandshakeStats reports the Raft listener's handshakes in progress and the
// connections it closed before they reached Raft; zero without TLS.
func (s *Store) HandshakeStats() tlsaccept.Stats {
	if s.stream == nil {
		return tlsaccept.Stats{}
	}
	return s.stream.Stats()
}
