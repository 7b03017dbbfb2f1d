package raftstore

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"

	"github.com/moltproject/molt/raftstore/command"
)

// Member is one Raft member as this replica sees it.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	// HTTPAddr is the member's REST address from replicated metadata; ""
	// until the member's metadata has been committed.
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// memberMeta is the replicated metadata kept per node ID. Raft's own
// configuration knows only IDs and Raft addresses; the HTTP address is what
// followers need to forward writes to the leader.
type memberMeta struct {
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// setMemberBody is the body of cmdSetMember.
type setMemberBody struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// removeMemberBody is the body of cmdRemoveMember.
type removeMemberBody struct {
	ID string `json:"id"`
}

// applySetMember is the internal handler of cmdSetMember. Internal bodies are
// written by this package only, so one that does not parse means the log is
// corrupt: panic, like an undecodable entry. A field this release does not
// know (a newer release wrote it) halts the replica instead, as domain
// commands' do (decodeMemberBody).
func (f *fsm) applySetMember(index uint64, body []byte) (any, error) {
	var b setMemberBody
	if err := decodeMemberBody(index, body, &b); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.members[b.ID] = memberMeta{RaftAddr: b.RaftAddr, HTTPAddr: b.HTTPAddr}
	f.mu.Unlock()
	return nil, nil
}

// applyRemoveMember is the internal handler of cmdRemoveMember.
func (f *fsm) applyRemoveMember(index uint64, body []byte) (any, error) {
	var b removeMemberBody
	if err := decodeMemberBody(index, body, &b); err != nil {
		return nil, err
	}
	f.mu.Lock()
	delete(f.members, b.ID)
	f.mu.Unlock()
	return nil, nil
}

// decodeMemberBody decodes an internal body strictly: an unknown field is
// returned, and halts the replica (a newer release wrote it); any other
// error panics (the log is corrupt).
func decodeMemberBody(index uint64, body []byte, v Command) error {
	err := command.DecodeBody(body, v)
	if err != nil && !errors.Is(err, ErrUnknownField) {
		panic(fmt.Sprintf("raftstore: entry %d: bad %s body: %v", index, v.Type(), err))
	}
	return err
}

// member returns the metadata of one node ID.
func (f *fsm) member(id string) (memberMeta, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m, ok := f.members[id]
	return m, ok
}

// memberSnapshot returns a copy of all member metadata.
func (f *fsm) memberSnapshot() map[string]memberMeta {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.members)
}

// isMemberHost reports whether ip is the host of a member's Raft address
// in the replicated metadata. The Raft listener lets members' addresses
// start handshakes beyond its bound, so that a flood from elsewhere cannot
// keep a member from reconnecting. Addresses given as names do not match:
// resolving them on every accept during a flood would cost more than the
// exemption is worth.
func (f *fsm) isMemberHost(ip netip.Addr) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, m := range f.members {
		host, _, err := net.SplitHostPort(m.RaftAddr)
		if err != nil {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil && a.Unmap() == ip {
			return true
		}
	}
	return false
}
