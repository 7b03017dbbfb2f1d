package coordinator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator"
)

// TestStartedMemberHasMadeItsStartupWrites checks the harness itself: when
// startMember returns a bootstrapping member, the entries it writes by
// itself once it leads are applied, so a test that counts log entries
// from there (requireOnlyAuditRecord, FuzzAPI) sees only its own. The
// member restarts at another HTTP address: the token is replayed from the
// log before the leader rewrites its metadata, and that write is held in
// the FSM, so a harness that waited for the token alone returns first.
func TestStartedMemberHasMadeItsStartupWrites(t *testing.T) {
	var applies atomic.Int64
	count := func(c *coordinator.Config) { c.Raft.ApplyHook = func() { applies.Add(1) } }
	dir := t.TempDir()
	first := startMember(t, "m1", dir, true, nil, "", count)
	raftAddr := first.c.Store().RaftAddr()
	first.stop(false)
	replayed := applies.Load() // every command of the first life, replayed on restart

	var again atomic.Int64
	hold := func(c *coordinator.Config) {
		c.Raft.ApplyHook = func() {
			if again.Add(1) == replayed+1 {
				// The first new entry, the metadata at the new address:
				// a slow apply, as on a loaded machine. Not a wait for
				// anything: a harness that polls for the write passes
				// however long it takes; one that does not returns
				// while it is held.
				time.Sleep(time.Second)
			}
		}
	}
	m := startMemberAt(t, "m1", dir, true, nil, "", raftAddr, nil, hold)
	require.NotEqual(t, first.addr, m.addr)
	ms, err := m.c.Members()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, m.addr, ms[0].HTTPAddr, "the member's own metadata write was still to come when the harness returned")
}
