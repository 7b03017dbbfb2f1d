package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"
)

// Join adds a member as a voter and commits its metadata. Leader only
// (ErrNotLeader elsewhere). Idempotent: joining again with the same ID and
// Raft address changes nothing but the HTTP address if that differs. A node
// that comes back under the same ID at a new Raft address, or a new ID at an
// old address, replaces the stale entry first.
func (s *Store) Join(ctx context.Context, id, raftAddr, httpAddr string) error {
	if id == "" || raftAddr == "" {
		return errors.New("raftstore: join: id and raft address are required")
	}
	if err := s.checkServing(); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	conf, err := s.configuration(ctx)
	if err != nil {
		return fmt.Errorf("raftstore: join %s: %w", id, err)
	}
	add := true
	for _, srv := range conf.Servers {
		sameID, sameAddr := srv.ID == raft.ServerID(id), srv.Address == raft.ServerAddress(raftAddr)
		switch {
		case sameID && sameAddr && srv.Suffrage == raft.Voter:
			add = false
		case sameID || sameAddr:
			if string(srv.ID) == s.cfg.NodeID {
				return fmt.Errorf("raftstore: join %s at %s: conflicts with the leader itself", id, raftAddr)
			}
			s.log.Info("removing stale member before join", "id", srv.ID, "raft_addr", srv.Address)
			if err := s.wait(ctx, s.raft.RemoveServer(srv.ID, 0, remaining(ctx))); err != nil {
				return fmt.Errorf("raftstore: join %s: remove stale %s: %w", id, srv.ID, err)
			}
		}
	}
	if add {
		if err := s.wait(ctx, s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, remaining(ctx))); err != nil {
			return fmt.Errorf("raftstore: join %s: add voter: %w", id, err)
		}
		s.log.Info("member joined", "id", id, "raft_addr", raftAddr, "http_addr", httpAddr)
	}
	if err := s.ensureMember(ctx, id, memberMeta{RaftAddr: raftAddr, HTTPAddr: httpAddr}); err != nil {
		return fmt.Errorf("raftstore: join %s: record metadata: %w", id, err)
	}
	return nil
}

// Remove takes a member out of the cluster and forgets its metadata. Leader
// only. An ID that is neither in the configuration nor in the metadata is
// ErrUnknownMember, and changes nothing (so a member half removed, still
// in the metadata, can be removed again). The leader may remove itself:
// its metadata goes first, while it can still commit, then it steps down.
func (s *Store) Remove(ctx context.Context, id string) error {
	if err := s.checkServing(); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	conf, err := s.configuration(ctx)
	if err != nil {
		return fmt.Errorf("raftstore: remove %s: %w", id, err)
	}
	inConf := false
	for _, srv := range conf.Servers {
		if srv.ID == raft.ServerID(id) {
			inConf = true
		}
	}
	_, hasMeta := s.fsm.member(id)
	if !inConf && !hasMeta {
		return fmt.Errorf("raftstore: remove %s: %w", id, ErrUnknownMember)
	}
	forget := func() error {
		if !hasMeta {
			return nil
		}
		_, err := s.propose(ctx, removeMemberBody{ID: id})
		return err
	}
	if id == s.cfg.NodeID {
		if err := forget(); err != nil {
			return fmt.Errorf("raftstore: remove %s: %w", id, err)
		}
	}
	if inConf {
		if err := s.wait(ctx, s.raft.RemoveServer(raft.ServerID(id), 0, remaining(ctx))); err != nil {
			return fmt.Errorf("raftstore: remove %s: %w", id, err)
		}
		s.log.Info("member removed", "id", id)
	}
	if id != s.cfg.NodeID {
		if err := forget(); err != nil {
			return fmt.Errorf("raftstore: remove %s: forget metadata: %w", id, err)
		}
	}
	return nil
}

// Members lists the members in this replica's latest Raft configuration,
// with their HTTP addresses from the replicated metadata, sorted by ID.
// Works on any member.
func (s *Store) Members() ([]Member, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raftstore: members: %w", mapRaftErr(err))
	}
	_, leaderID := s.raft.LeaderWithID()
	meta := s.fsm.memberSnapshot()
	var out []Member
	for _, srv := range f.Configuration().Servers {
		out = append(out, Member{
			ID:       string(srv.ID),
			RaftAddr: string(srv.Address),
			HTTPAddr: meta[string(srv.ID)].HTTPAddr,
			Voter:    srv.Suffrage == raft.Voter,
			Leader:   srv.ID == leaderID,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ensureMember commits id's metadata unless the applied state already holds
// exactly want. The barrier first brings this leader's FSM up to date, so
// the comparison does not run against a replica still replaying its log.
func (s *Store) ensureMember(ctx context.Context, id string, want memberMeta) error {
	if err := s.Barrier(ctx); err != nil {
		return err
	}
	if cur, ok := s.fsm.member(id); ok && cur == want {
		return nil
	}
	_, err := s.propose(ctx, setMemberBody{ID: id, RaftAddr: want.RaftAddr, HTTPAddr: want.HTTPAddr})
	return err
}

// configuration reads the latest Raft configuration.
func (s *Store) configuration(ctx context.Context) (raft.Configuration, error) {
	f := s.raft.GetConfiguration()
	if err := s.wait(ctx, f); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// numPeers counts the other servers in the latest configuration.
func (s *Store) numPeers() int {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	n := 0
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) != s.cfg.NodeID {
			n++
		}
	}
	return n
}

// TransferLeadership hands leadership to the most up-to-date voter and
// waits until this member has stepped down (it stays up, as a follower).
// Leader only (ErrNotLeader elsewhere); fails when there is no other voter
// or the chosen one did not take over within an election timeout.
func (s *Store) TransferLeadership(ctx context.Context) error {
	if err := s.checkLeader(); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.wait(ctx, s.raft.LeadershipTransfer()); err != nil {
		return fmt.Errorf("raftstore: leadership transfer: %w", err)
	}
	return nil
}
