package preflight_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func hostNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("host-%04d", i)
	}
	return out
}

func addrsOf(nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		out[n] = n + ":7443"
	}
	return out
}

// probedBy inverts ProbeTargets: who probes each node.
func probedBy(targets map[string][]string) map[string][]string {
	out := map[string][]string{}
	for from, to := range targets {
		for _, n := range to {
			out[n] = append(out[n], from)
		}
	}
	return out
}

// TestProbeTargetsAllAddressed checks every cluster size from 1 to 300
// with every agent addressed: each host probes at most ProbeFanout peers,
// never itself, and is probed by exactly min(ProbeFanout, N-1) others, so
// by at least one whenever N > 1; and the same input gives the same
// targets, whatever the order or repetition of the names.
func TestProbeTargetsAllAddressed(t *testing.T) {
	for n := 1; n <= 300; n++ {
		nodes := hostNames(n)
		addrs := addrsOf(nodes)
		targets := preflight.ProbeTargets("lab-1", nodes, addrs)
		require.Len(t, targets, n)
		by := probedBy(targets)
		want := min(preflight.ProbeFanout, n-1)
		for _, node := range nodes {
			to := targets[node]
			require.Len(t, to, want, "N=%d: %s probes %v", n, node, to)
			require.NotContains(t, to, node, "N=%d: %s probes itself", n, node)
			require.True(t, slices.IsSorted(to))
			require.Len(t, slices.Compact(slices.Clone(to)), len(to), "N=%d: %s probes a peer twice", n, node)
			require.Len(t, by[node], want, "N=%d: %s probed by %v", n, node, by[node])
		}
		shuffled := slices.Clone(nodes)
		slices.Reverse(shuffled)
		shuffled = append(shuffled, nodes[0])
		require.Equal(t, targets, preflight.ProbeTargets("lab-1", shuffled, addrs), "N=%d: depends on input order", n)
	}
}

// TestProbeTargetsProperties draws clusters of up to 200 hosts in which
// any agent may lack an address, and checks: at most ProbeFanout targets,
// never the host itself, only addressed peers, as many as there are (up to
// ProbeFanout); every addressed host probed by another whenever N > 1; any
// split of the addressed hosts into two groups crossed by a probe both
// ways (a cut-off group is seen); determinism.
func TestProbeTargetsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := hostNames(rapid.IntRange(1, 200).Draw(t, "n"))
		addrs := map[string]string{}
		for _, n := range nodes {
			if rapid.Float64Range(0, 1).Draw(t, "addressed") < 0.8 {
				addrs[n] = n + ":7443"
			}
		}
		runID := rapid.StringMatching(`[a-z0-9-]{1,12}`).Draw(t, "run")
		targets := preflight.ProbeTargets(runID, nodes, addrs)
		require.Len(t, targets, len(nodes))
		for _, node := range nodes {
			to := targets[node]
			require.LessOrEqual(t, len(to), preflight.ProbeFanout)
			require.NotContains(t, to, node)
			for _, p := range to {
				require.NotEmpty(t, addrs[p], "%s probes %s, which has no address", node, p)
			}
			others := len(addrs)
			if addrs[node] != "" {
				others--
			}
			require.Len(t, to, min(preflight.ProbeFanout, others), "%s probes fewer peers than it could", node)
		}
		by := probedBy(targets)
		if len(nodes) > 1 {
			for n := range addrs {
				require.NotEmpty(t, by[n], "%s is probed by nobody", n)
			}
		}
		addressed := slices.Sorted(maps.Keys(addrs))
		if len(addressed) >= 2 {
			side := map[string]bool{}
			for _, n := range addressed {
				side[n] = rapid.Bool().Draw(t, "side")
			}
			side[addressed[0]], side[addressed[len(addressed)-1]] = true, false
			crossed := map[bool]bool{}
			for _, from := range addressed {
				for _, to := range targets[from] {
					if side[from] != side[to] {
						crossed[side[from]] = true
					}
				}
			}
			require.True(t, crossed[true] && crossed[false], "a split of the hosts is not crossed both ways")
		}
		require.Equal(t, targets, preflight.ProbeTargets(runID, nodes, addrs))
	})
}

// TestProbeTargetsVaryByRun: another run shuffles the ring, so repeated
// preflights probe other pairs.
func TestProbeTargetsVaryByRun(t *testing.T) {
	nodes := hostNames(100)
	a := preflight.ProbeTargets("c-1", nodes, addrsOf(nodes))
	b := preflight.ProbeTargets("c-2", nodes, addrsOf(nodes))
	require.NotEqual(t, a, b)
}

// TestHostOperationsGrowLinearly: with 5,000 hosts every ProbePeers lists
// at most ProbeFanout agents plus the API endpoint, so the whole set of
// operations (one Raft entry) stays O(N·k): well under 1 KiB of JSON a
// host here (about 790 bytes, most of it the artifact list), where
// listing every peer took about 85 KB a host, 425 MB in all.
func TestHostOperationsGrowLinearly(t *testing.T) {
	nodes := hostNames(5000)
	in := goodInput()
	in.Cluster.Pools = []phases.Pool{{Name: "w", Role: phases.RoleWorker}}
	for _, n := range nodes {
		in.Cluster.Pools[0].Nodes = append(in.Cluster.Pools[0].Nodes, phases.Node{Name: n})
	}
	ops := hostOperations("big-1", in, "10.0.0.1:6443", addrsOf(nodes))
	require.Len(t, ops, len(nodes))
	for _, n := range nodes {
		peers := ops[n][1].ProbePeers.Addresses
		require.Len(t, peers, preflight.ProbeFanout+1)
		require.Equal(t, "10.0.0.1:6443", peers[len(peers)-1], "every host probes the API endpoint")
		require.NotContains(t, peers, n+":7443")
	}
	b, err := json.Marshal(ops)
	require.NoError(t, err)
	require.Less(t, len(b), len(nodes)*1024, "%d bytes for %d hosts", len(b), len(nodes))
	t.Logf("%d bytes for %d hosts", len(b), len(nodes))
}
