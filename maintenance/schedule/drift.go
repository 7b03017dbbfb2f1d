package schedule

import (
	"fmt"
	"maps"
	"slices"
)

// driftHold: a cluster with a node whose observed versions differ from
// molt's record (Cluster.Drift) is not upgraded automatically. Each such
// node is a block of its own, named by the node, until its versions agree
// again (the node put back by hand) or the operator upgrades by hand. It
// has no Until: only a change on the hosts ends it.
func (e *evaluator) driftHold(s *step) hold {
	if len(s.c.Drift) == 0 {
		return hold{}
	}
	var blocks []Block
	for _, node := range slices.Sorted(maps.Keys(s.c.Drift)) {
		blocks = append(blocks, Block{Kind: BlockDrift, Name: node,
			Detail: fmt.Sprintf("node %s runs other versions than molt recorded: %s", node, s.c.Drift[node])})
	}
	return hold{state: StateBlockedByRule, blocks: blocks}
}
