//go:build mixed

package mixed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/moltproject/molt/raftstore/command"
)

// currentBuilds are the current tree's binaries every test here needs:
// molt-coordinator as a release of the VERSION file builds it, and moltctl.
func currentBuilds(t *testing.T, root string, more ...build) map[string]string {
	t.Helper()
	ld := releaseLdflags(t, root, "")
	return buildCurrent(t, root, append([]build{
		{name: "molt-coordinator", pkg: "./cmd/molt-coordinator", ldflags: ld},
		{name: "moltctl", pkg: "./cmd/moltctl", ldflags: ld},
	}, more...)...)
}

// releaseLdflags set the version of the VERSION file (or v) and HEAD's
// commit, as make release does.
func releaseLdflags(t *testing.T, root, v string) string {
	t.Helper()
	if v == "" {
		v = strings.TrimSpace(readFile(t, filepath.Join(root, "VERSION")))
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	// -s -w as make build: a smaller binary links sooner.
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPkg, v, versionPkg, strings.TrimSpace(string(head)))
}

// memberCheck runs `moltctl member check` against the coordinator.
func (c *coordinator) memberCheck(moltctl string) (string, error) {
	cmd := exec.Command(moltctl, "--server", strings.Join(c.endpoints(), ","), "--ca-file", c.caFile,
		"--token-file", c.tokenFile, "--config", c.moltctlConfig, "member", "check")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitSafe waits until `moltctl member check` says it is safe to go on.
func (c *coordinator) waitSafe(moltctl string) string {
	c.t.Helper()
	var out string
	waitFor(c.t, "moltctl member check: safe to go on", 2*time.Minute, func() bool {
		var err error
		out, err = c.memberCheck(moltctl)
		return err == nil
	})
	return out
}

// writer writes releases through any member and records every write the
// coordinator acknowledged (2xx).
type writer struct {
	mu    sync.Mutex
	acked []string
	lost  int // writes without an answer: their outcome is unknown
}

func (w *writer) run(ctx context.Context, c *coordinator) {
	cl := c.client()
	for key := 1; ctx.Err() == nil; key++ {
		r := writeRelease(key)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Do(cctx, http.MethodPut, "/v1/releases/"+r.Version, r, nil)
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acked = append(w.acked, r.Version)
		} else {
			w.lost++
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// firstEntryOf is the index of the first entry of command type typ in a
// stopped member's Raft log (DataDir/wal, raftstore/logstore.go), and the
// log's first and last index.
func firstEntryOf(t *testing.T, dataDir string, typ command.Type) (at, first, last uint64) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dataDir, "wal"), wal.WithMetaStore(meta))
	require.NoError(t, err)
	defer func() { _ = w.Close(); _ = meta.Close() }()
	first, err = w.FirstIndex()
	require.NoError(t, err)
	last, err = w.LastIndex()
	require.NoError(t, err)
	for i := first; i <= last; i++ {
		var l raft.Log
		if w.GetLog(i, &l) != nil || l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		if ct, _, err := command.Decode(l.Data); err == nil && ct.Base() == typ {
			return i, first, last
		}
	}
	return 0, first, last
}

// TestRollingUpgradeFromPreviousRelease: see the package documentation.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	began := time.Now()
	root := repoRoot(t)
	rel := readPreviousRelease(t, root)
	oldBin := buildPrevious(t, root, rel)
	bins := currentBuilds(t, root)
	newBin, moltctl := bins["molt-coordinator"], bins["moltctl"]
	cp := kubetest.Start(t)
	t.Logf("binaries and kube-apiserver ready at %v", time.Since(began).Round(time.Millisecond))

	c := startCoordinator(t, []string{oldBin, oldBin, oldBin})
	t.Logf("3 members of molt %s up at %v", rel.version, time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A cluster on simulated agents, whose upgrade is under way while the
	// coordinator is: each node's upgrade is let through after one more
	// member runs the current build, so the last finishes after the last.
	nodes := []string{"cp-1", "worker-1", "worker-2"}
	for _, n := range nodes {
		cp.CreateNode(t, n, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	}
	cl := c.client()
	for _, v := range []string{"1.33.6", "1.34.4"} {
		_, err := cl.Do(ctx, http.MethodPut, "/v1/releases/"+v, testRelease(v), nil)
		require.NoError(t, err)
	}
	spec := api.ClusterSpec{Kubeconfig: string(cp.Kubeconfig), Name: "real", Kind: api.ClusterStandalone, Version: "1.33.6",
		Pools: []api.Pool{
			{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-1"}}},
			{Name: "workers", Role: api.RoleWorker, Nodes: []api.Node{{Name: "worker-1"}, {Name: "worker-2"}}},
		}}
	_, err := cl.Do(ctx, http.MethodPut, "/v1/clusters/real", spec, nil)
	require.NoError(t, err)
	ag := startAgents(t, c, cp, "real", nodes)
	waitFor(t, "the agents registered", time.Minute, func() bool {
		var cluster api.Cluster
		if _, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/real", nil, &cluster); err != nil {
			return false
		}
		ok := 0
		for _, s := range cluster.Status.Agents {
			if s.Registered && s.Healthy && !s.Missing {
				ok++
			}
		}
		return ok == len(nodes)
	})
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/real/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)

	w := &writer{}
	wctx, stopWrites := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx, c) }()
	defer func() { stopWrites(); wg.Wait() }()

	// One member at a time, followers first, the leader last; the leader
	// (still the previous release) restarted after the first member.
	var lastBefore uint64 // the leader's index just before the last member started
	upgraded := map[string]bool{}
	for round := 1; round <= 3; round++ {
		out := c.waitSafe(moltctl)
		t.Logf("round %d at %v: moltctl member check:\n%s", round, time.Since(began).Round(time.Millisecond), out)
		leader := c.waitLeader()
		var target *member
		for _, m := range c.members {
			if !upgraded[m.id] && (m != leader || round == 3) {
				target = m
				break
			}
		}
		require.NotNil(t, target)
		t.Logf("round %d: upgrading %s (leader %s)", round, target.id, leader.id)
		target.stop(syscall.SIGTERM)
		// While it is down the check never says go on, and names it (an
		// answer may also be that no member could judge the token now:
		// the others are electing, or slow on a loaded machine).
		var safeWhileDown string
		waitFor(t, "moltctl member check naming "+target.id+" as down", time.Minute, func() bool {
			out, err := c.memberCheck(moltctl)
			if err == nil {
				safeWhileDown = out
				return true
			}
			return strings.Contains(out, "member "+target.id+" does not answer") && strings.Contains(out, "0 may be down with quorum kept")
		})
		require.Empty(t, safeWhileDown, "moltctl member check said go on with %s down", target.id)
		if round == 3 {
			// The leader's index just before the last member starts the
			// current build: command 42 must come after it. (Read after
			// the start, it may already cover the record on a loaded
			// machine, where the read waits on the others.)
			_, lastStartedAt, err := c.membersOf(c.waitLeader())
			require.NoError(t, err)
			lastBefore = lastStartedAt
		}
		require.NoError(t, target.start(newBin))
		c.waitReady(target)
		upgraded[target.id] = true
		// The cluster upgrade goes on under the mixed coordinator: the
		// next member waits until this round's node is upgraded.
		ag.release(nodes[round-1])
		waitFor(t, nodes[round-1]+"'s upgrade carried out", 2*time.Minute, func() bool { return ag.ranOn(nodes[round-1]) > 0 })
		if round == 1 {
			ms, _, err := c.membersOf(target)
			require.NoError(t, err)
			var b strings.Builder
			for _, m := range ms {
				fmt.Fprintf(&b, "  %s leader=%v version=%q from=%q\n", m.ID, m.Leader, m.Version, m.CapabilitiesFrom)
			}
			t.Logf("the member list of the upgraded %s in the mixed phase:\n%s", target.id, b.String())
			// The leader restart in the middle: the previous release's
			// leader, stopped and started again on its data directory.
			c.waitSafe(moltctl)
			l := c.waitLeader()
			t.Logf("restarting the leader %s (%s)", l.id, filepath.Base(filepath.Dir(l.bin)))
			l.stop(syscall.SIGTERM)
			require.NoError(t, l.start(l.bin))
			c.waitReady(l)
		}
	}

	// Once the last member runs the current build, the leader records
	// every member's capabilities (command 42): followers read it.
	want := strings.TrimSpace(readFile(t, filepath.Join(root, "VERSION")))
	waitFor(t, "the member record (command 42) on every member", 2*time.Minute, func() bool {
		for _, m := range c.members {
			ms, _, err := c.membersOf(m)
			if err != nil || len(ms) != 3 {
				return false
			}
			leads := isLeader(ms, m.id)
			for _, x := range ms {
				if x.Version != want || (!leads && x.ID != m.id && x.CapabilitiesFrom != "record") {
					return false
				}
			}
		}
		return true
	})
	var u api.Upgrade
	waitFor(t, "the cluster upgrade finished", 3*time.Minute, func() bool {
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/real/upgrade", nil, &u)
		return err == nil && (u.State == api.UpgradeDone || u.State == api.UpgradeFailed || u.State == api.UpgradeCancelled)
	})
	require.Equal(t, api.UpgradeDone, u.State, "%+v", u)
	stopWrites()
	wg.Wait()
	out := c.waitSafe(moltctl)
	t.Logf("after the upgrade: moltctl member check:\n%s", out)

	// No acknowledged write is lost, on any member.
	w.mu.Lock()
	acked, unknown := append([]string(nil), w.acked...), w.lost
	w.mu.Unlock()
	require.NotEmpty(t, acked)
	for _, m := range c.members {
		var missing []string
		waitFor(t, m.id+" holds every acknowledged write", time.Minute, func() bool {
			var rs []api.Release
			if _, err := c.clientOf(m).Do(ctx, http.MethodGet, "/v1/releases", nil, &rs); err != nil {
				return false
			}
			have := map[string]bool{}
			for _, r := range rs {
				have[r.Version] = true
			}
			missing = missing[:0]
			for _, v := range acked {
				if !have[v] {
					missing = append(missing, v)
				}
			}
			return len(missing) == 0
		})
	}
	t.Logf("%d writes acknowledged, none lost; %d without an answer", len(acked), unknown)
	for _, n := range nodes {
		require.Positive(t, ag.ranOn(n), "%s was upgraded by its agent", n)
	}

	// No member of the previous release stopped by itself: molt 0.1.0
	// panics on a command it does not know, so none met command 42.
	for _, m := range c.members {
		require.NoError(t, m.exitedByItself())
		require.NotContains(t, readFile(t, m.logPath), "panic:", "%s's log", m.id)
	}
	// The record is in every member's log, after the last member started
	// the current build.
	for _, m := range c.members {
		m.stop(syscall.SIGTERM)
	}
	for _, m := range c.members {
		at, first, last := firstEntryOf(t, m.dataDir, statemachine.CmdSetMembers)
		require.NotZero(t, at, "%s's log (%d..%d) holds command 42", m.id, first, last)
		require.Greater(t, at, lastBefore, "%s: command 42 at index %d, written after the last member started the current build (leader's index %d just before)", m.id, at, lastBefore)
		t.Logf("%s: command 42 first at index %d (log %d..%d; the leader was at %d just before the last member started)", m.id, at, first, last, lastBefore)
	}
	t.Logf("wall time %v", time.Since(began).Round(time.Millisecond))
}

func isLeader(ms []api.Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return m.Leader
		}
	}
	return false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
