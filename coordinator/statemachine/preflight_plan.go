package statemachine

import (
	"fmt"

	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore/command"
)

// A preflight run's host operations are O(hosts·ProbeFanout) addresses
// plus each host's copy of the release's artifact list: 9 MB in one entry
// at 15,000 hosts. A run whose HostPlan is set carries none of them in its
// entry: every member derives them when it applies the entry, from its
// own replicated state at that index (the cluster's nodes, the target's
// release, the agents' addresses), with the plan the entry names. The
// entry is then a few hundred bytes whatever the cluster's size, and
// every member derives the same operations, since they apply the same
// state with the same function.
//
// A plan is a function frozen by its number: HostPlanRing is
// preflight.HostOperations as molt 0.2.0 has it (TestHostPlanRingIsPinned
// holds its output). A release that changes what a run's hosts do takes a
// new number, and keeps this one for the entries already written.

// Host plans.
const (
	// HostPlanNone: the entry carries the operations (molt 0.1.0's form).
	HostPlanNone = 0
	// HostPlanRing: preflight.HostOperations with no API endpoint, over
	// the cluster's spec at its status version, the target's release in
	// the catalog and the registered agents' addresses.
	HostPlanRing = 1
)

// SinceHostPlan is the release that introduced PreflightRun.HostPlan.
const SinceHostPlan = "0.2.0"

// checkHostPlan says whether this release knows plan p: an entry naming a
// plan it does not know was written by a newer release.
func checkHostPlan(p int) error {
	if p < HostPlanNone || p > HostPlanRing {
		return fmt.Errorf("preflight host plan %d: %w", p, command.ErrCannotRead)
	}
	return nil
}

// hostOperations derives the operations of run under its plan from the
// state this entry applies to. The caller holds the write lock.
func (s *state) hostOperations(r *ClusterRecord, run *PreflightRun) {
	if run.HostPlan == HostPlanNone {
		return
	}
	in := s.preflightInput(r, run.Target)
	addrs := make(map[string]string, len(r.Agents))
	for n, a := range r.Agents {
		addrs[n] = a.Address
	}
	run.Operations = convert.PreflightOperationsToAPI(preflight.HostOperations(run.ID, in, "", addrs))
	// The plan is an instruction of the entry, not a property of the run:
	// the stored run holds its operations, as a 0.1.0 run does, and a
	// snapshot writes it in the form every reader knows.
	run.HostPlan = HostPlanNone
}
