package coordinator_test

import (
	"sync"
	"sync/atomic"
	"testing"

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

	// The first new entry, the metadata at the new address, is held (a
	// slow apply, as on a loaded machine) until the harness has looked
	// for it and found it missing: a harness that polls for the write
	// then sees it applied; one that does not wait for it never looks,
	// and returns while it is held.
	var again atomic.Int64
	held, release := make(chan struct{}), make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // before the cleanups stop the member, whose apply waits
	hold := func(c *coordinator.Config) {
		c.Raft.ApplyHook = func() {
			if again.Add(1) == replayed+1 {
				heldOnce.Do(func() { close(held) })
				<-release
			}
		}
	}
	startupChecked = func(done bool) {
		select {
		case <-held:
			if !done {
				free()
			}
		default:
		}
	}
	t.Cleanup(func() { startupChecked = nil })
	m := startMemberAt(t, "m1", dir, true, nil, "", raftAddr, nil, hold)
	require.NotEqual(t, first.addr, m.addr)
	ms, err := m.c.Members()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, m.addr, ms[0].HTTPAddr, "the member's own metadata write was still to come when the harness returned")
}
