package preflight

import (
	"fmt"
	"strings"
	"time"
)

// checkPDBs warns about budgets that allow no disruption now. It does not
// block: drains are best effort and go on after their timeout (SPEC §6),
// leaving those pods behind, which the operator should know beforehand.
func checkPDBs(in Input) Result {
	if g := in.gap(SourcePDBs); g != "" {
		return missing(g)
	}
	if len(in.BlockingPDBs) == 0 {
		return pass("no PodDisruptionBudget blocks a drain", nil)
	}
	data := map[string]string{}
	names := make([]string, 0, len(in.BlockingPDBs))
	for _, p := range in.BlockingPDBs {
		key := p.Namespace + "/" + p.Name
		names = append(names, key)
		data[key] = "nodes " + strings.Join(p.Nodes, ",")
	}
	return warn(fmt.Sprintf("%s no disruption now; drains of their nodes will wait and may leave pods behind: %s",
		plural(len(names), "PodDisruptionBudget allows", "PodDisruptionBudgets allow"), nameList(names)), data)
}

// checkProtectedPods warns about safe-to-evict=false pods (SPEC §8):
// automatic upgrades do their nodes last and wait until each pod's date;
// manual upgrades evict them.
func checkProtectedPods(in Input) Result {
	if g := in.gap(SourceProtectedPods); g != "" {
		return missing(g)
	}
	if len(in.ProtectedPods) == 0 {
		return pass("no pod is protected from eviction", nil)
	}
	data := map[string]string{}
	parts := make([]string, 0, len(in.ProtectedPods))
	for _, p := range in.ProtectedPods {
		key := p.Namespace + "/" + p.Name
		at := p.EvictableAt.UTC().Format(time.RFC3339)
		data[key] = p.Node + " " + at
		parts = append(parts, fmt.Sprintf("%s on %s until %s", key, p.Node, at))
	}
	return warn(fmt.Sprintf("%s out of eviction (safe-to-evict=false); automatic upgrades do their nodes last and wait until: %s",
		plural(len(parts), "pod opts", "pods opt"), nameList(parts)), data)
}
