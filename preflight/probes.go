package preflight

import (
	"cmp"
	"hash/fnv"
	"slices"
	"sort"
)

// ProbeFanout is k, the most peer agents one host probes in a preflight
// run. Probing every peer made a run's Raft entry O(N²) — 25 million
// addresses at 5,000 hosts — and had every agent dial every other; with k
// successors on a ring (see ProbeTargets) the entry is O(N·k) and each host
// makes at most k dials, while every host is still probed by min(k, N-1)
// others and any split of the hosts into two groups is crossed by a probe.
// Eight tolerates seven broken probers per host before one goes unprobed.
const ProbeFanout = 8

// ProbeTargets decides which peers each node probes in run runID. Nodes are
// placed on a ring in the order of a hash of (runID, name), and each node
// probes the next ProbeFanout nodes after it on the ring that have an agent
// address in agentAddrs (never itself). So:
//   - every node has at most ProbeFanout targets, each with an address;
//   - with N > 1 nodes, every node with an address is probed by another
//     node (its predecessor on the ring);
//   - with every node addressed, each is probed by exactly
//     min(ProbeFanout, N-1) others;
//   - the result is a function of its arguments: a new leader rebuilding a
//     run gets the same targets, while another run (another ID) shuffles
//     the ring and so probes other pairs.
//
// A node without an address cannot be probed (agents-reporting already
// fails for it) but still probes. Each node's targets are sorted by name;
// duplicate names count once.
func ProbeTargets(runID string, nodes []string, agentAddrs map[string]string) map[string][]string {
	type slot struct {
		name string
		key  uint64
	}
	names := slices.Compact(slices.Sorted(slices.Values(nodes)))
	ring := make([]slot, len(names))
	for i, n := range names {
		h := fnv.New64a()
		h.Write([]byte(runID))
		h.Write([]byte{0})
		h.Write([]byte(n))
		ring[i] = slot{n, h.Sum64()}
	}
	slices.SortFunc(ring, func(a, b slot) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.name, b.name))
	})
	// addressed holds the ring positions of the nodes that can be probed.
	var addressed []int
	for i, s := range ring {
		if agentAddrs[s.name] != "" {
			addressed = append(addressed, i)
		}
	}
	out := make(map[string][]string, len(ring))
	for i, s := range ring {
		targets := []string{}
		if m := len(addressed); m > 0 {
			// The first addressed position after i, wrapping around.
			first := sort.SearchInts(addressed, i+1) % m
			for j := 0; j < m && len(targets) < ProbeFanout; j++ {
				if p := addressed[(first+j)%m]; p != i {
					targets = append(targets, ring[p].name)
				}
			}
		}
		slices.Sort(targets)
		out[s.name] = targets
	}
	return out
}
