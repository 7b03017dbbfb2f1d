package coordinator

import "github.com/moltproject/molt/raftstore"

// Halted reports whether this member stopped applying the replicated log
// because it met an entry or a snapshot its release cannot read (written
// by a newer molt: raftstore.HaltInfo), and where and why. A halted member
// keeps its place in Raft (its vote and its copy of the log keep the
// quorum), hands leadership over, answers /readyz 503 with the reason,
// exports molt_member_halted, and serves reads of the state it stopped at
// only to clients that ask for no newer index. Its binary replaced by a
// release that reads the entry, it replays its log from its last snapshot
// at start (docs/mixed-versions.md).
func (c *Coordinator) Halted() (raftstore.HaltInfo, bool) { return c.store.Halted() }
