package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// A chaos run upgrades the lab while a seeded schedule injects faults
// (chaos_faults.go) at step boundaries and mid-step; afterwards the
// invariants (chaos_check.go) are checked. This file draws the schedule:
// a pure function of the seed and the upgrade's plan, so a seed repeats a
// run's faults (their timing still follows the real upgrade).

// FaultKind names a fault the chaos runs inject.
type FaultKind string

// The faults.
const (
	// FaultLeaderKill SIGKILLs the Raft leader and restarts it on its
	// data directory after Duration.
	FaultLeaderKill FaultKind = "leader-kill"
	// FaultFollowerKill does the same to a follower.
	FaultFollowerKill FaultKind = "follower-kill"
	// FaultLeaderFreeze SIGSTOPs the leader for Duration, then SIGCONTs
	// it: a gray failure (its kernel still accepts connections).
	FaultLeaderFreeze FaultKind = "leader-freeze"
	// FaultFollowerFreeze freezes a follower.
	FaultFollowerFreeze FaultKind = "follower-freeze"
	// FaultPartition cuts a member (Variant "leader" or "follower") off
	// from the other members for Duration with nftables in the lab's
	// namespace; agents still reach it.
	FaultPartition FaultKind = "member-partition"
	// FaultAgentKill SIGKILLs the agent of the trigger node while it runs
	// an operation (systemd restarts it).
	FaultAgentKill FaultKind = "agent-kill"
	// FaultLinkCut cuts the trigger node's host off from every member for
	// Duration, longer than the coordinator's liveness timeout (30 s).
	FaultLinkCut FaultKind = "link-cut"
	// FaultAPILBDown takes the kube-apiserver load balancer away for
	// Duration: its proxy frozen (Variant "frozen"), or the whole cplb
	// host unreachable (Variant "host").
	FaultAPILBDown FaultKind = "apiserver-lb-down"
	// FaultBadArtifact serves the artifact of the trigger node's next
	// binary upgrade with a wrong checksum for Duration. A node that
	// downloads it then must fail naming the mismatch: the upgrade halts
	// with a reason.
	FaultBadArtifact FaultKind = "bad-artifact"
)

// ofLeader reports whether f strikes the member that leads (killed,
// frozen, or cut off from the others).
func (f Fault) ofLeader() bool {
	return f.Kind == FaultLeaderKill || f.Kind == FaultLeaderFreeze || (f.Kind == FaultPartition && f.Variant == "leader")
}

// memberFault reports whether k acts on a coordinator member; those are
// injected one at a time, so a quorum stays (two members down at once
// only stalls the upgrade, which proves nothing).
func (k FaultKind) memberFault() bool {
	switch k {
	case FaultLeaderKill, FaultFollowerKill, FaultLeaderFreeze, FaultFollowerFreeze, FaultPartition:
		return true
	}
	return false
}

// Trigger is when a fault fires: when Node is first seen at node step
// Cursor (or past it), or when upgrade step StepID starts, plus Delay (0:
// at the boundary; more: mid-step).
type Trigger struct {
	Node   string
	Cursor int
	// Step describes the node step at Cursor ("drain",
	// "operation:UpgradeBinary:kubelet").
	Step   string
	StepID string
	Delay  time.Duration
}

func (t Trigger) String() string {
	at := "at"
	if t.Delay > 0 {
		at = fmt.Sprintf("+%.1fs into", t.Delay.Seconds())
	}
	if t.StepID != "" {
		return fmt.Sprintf("%s step %s", at, t.StepID)
	}
	return fmt.Sprintf("%s %s %d:%s", at, t.Node, t.Cursor, t.Step)
}

// Fault is one scheduled fault.
type Fault struct {
	Kind    FaultKind
	Trigger Trigger
	// Duration is how long the fault lasts (for a kill: until the member
	// is restarted).
	Duration time.Duration
	// Variant refines the kind (FaultPartition: "leader" or "follower";
	// FaultAPILBDown: "frozen" or "host").
	Variant string
	// Pick chooses among candidates known only when the fault fires (the
	// followers, by ID).
	Pick int
	// Host is the lab host a host fault acts on; Component the artifact
	// FaultBadArtifact corrupts (kubelet, containerd).
	Host      string
	Component string
}

// ChaosProfile says which faults a schedule draws and where.
type ChaosProfile struct {
	Name string
	// Kinds are drawn without repetition, Count of them (or all, when
	// fewer).
	Kinds []FaultKind
	Count int
	// BadArtifact is the probability that a FaultBadArtifact is added.
	BadArtifact float64
	// Nodes, when set, restricts triggers to these nodes and StepIDs to
	// these upgrade steps; empty: any node or step of the upgrade.
	Nodes   []string
	StepIDs []string
}

// FullProfile is `make chaos`: five of the eight kinds in every run, and
// a wrong checksum in about one run in four.
func FullProfile() ChaosProfile {
	return ChaosProfile{
		Name: "full",
		Kinds: []FaultKind{FaultLeaderKill, FaultFollowerKill, FaultLeaderFreeze, FaultFollowerFreeze,
			FaultPartition, FaultAgentKill, FaultLinkCut, FaultAPILBDown},
		Count:       5,
		BadArtifact: 0.25,
	}
}

// SmokeProfile is the chaos in the end-to-end test's minor upgrade, which
// already kills the leader at cp-2 and worker-1's agent: four of the
// faults that do not repeat those, on the nodes and steps around them.
func SmokeProfile() ChaosProfile {
	return ChaosProfile{
		Name:    "smoke",
		Kinds:   []FaultKind{FaultFollowerKill, FaultLeaderFreeze, FaultFollowerFreeze, FaultPartition, FaultLinkCut, FaultAPILBDown},
		Count:   4,
		Nodes:   []string{"cplb-1", "lb-1", "worker-2"},
		StepIDs: []string{api.StepIDAddons},
	}
}

// NoFaults is a chaos-free run: the invariants and the lower bound only.
func NoFaults() ChaosProfile { return ChaosProfile{Name: "none"} }

// ProfileByName returns the profile called name.
func ProfileByName(name string) (ChaosProfile, error) {
	for _, p := range []ChaosProfile{FullProfile(), SmokeProfile(), NoFaults()} {
		if p.Name == name {
			return p, nil
		}
	}
	return ChaosProfile{}, fmt.Errorf("unknown chaos profile %q (full, smoke, none)", name)
}

// Schedule draws the faults of one run from seed, for upgrade u (its
// pools, node steps and nodes; MIG pools join like any other). hosts are
// the nodes that are lab hosts: only they take agent and host faults.
func Schedule(seed uint64, u *api.Upgrade, prof ChaosProfile, hosts []string) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f6c74))
	kinds := slices.Clone(prof.Kinds)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	kinds = kinds[:min(prof.Count, len(kinds))]
	// Drawn even when unused, so adding a kind to a profile does not
	// shift every later draw.
	if rng.Float64() < prof.BadArtifact {
		kinds = append(kinds, FaultBadArtifact)
	}
	var out []Fault
	for _, k := range kinds {
		f, ok := drawFault(rng, k, u, prof, hosts)
		if ok {
			out = append(out, f)
		}
	}
	return out
}

// candidate is a node step a fault can be triggered at.
type candidate struct {
	node   string
	cursor int
	step   api.NodeStep
	next   *api.NodeStep
}

func drawFault(rng *rand.Rand, k FaultKind, u *api.Upgrade, prof ChaosProfile, hosts []string) (Fault, bool) {
	f := Fault{Kind: k, Pick: rng.IntN(2)}
	isHost := func(n string) bool { return slices.Contains(hosts, n) }
	var cands []candidate
	for i := range u.Nodes {
		n := &u.Nodes[i]
		if len(prof.Nodes) > 0 && !slices.Contains(prof.Nodes, n.Node) {
			continue
		}
		p, ok := u.Pool(n.Pool)
		if !ok {
			continue
		}
		steps := p.NodeSteps
		for c, s := range steps {
			cd := candidate{node: n.Node, cursor: c, step: s}
			if c+1 < len(steps) {
				cd.next = &steps[c+1]
			}
			switch k {
			case FaultAgentKill:
				if !isHost(n.Node) || s.Kind != api.NodeStepOperation {
					continue
				}
			case FaultLinkCut:
				if !isHost(n.Node) {
					continue
				}
			case FaultBadArtifact:
				// Fires one step before a binary upgrade, so the
				// download falls inside the window.
				if cd.next == nil || cd.next.Op == nil || cd.next.Op.Kind != api.OpUpgradeBinary {
					continue
				}
			}
			cands = append(cands, cd)
		}
	}
	// Pool-level steps (add-ons, health) may trigger the faults that do
	// not act on the trigger node.
	var stepIDs []string
	switch k {
	case FaultAgentKill, FaultLinkCut, FaultBadArtifact:
	default:
		for _, s := range u.Steps {
			if s.Kind != api.StepKindPool && (len(prof.StepIDs) == 0 || slices.Contains(prof.StepIDs, s.ID)) {
				stepIDs = append(stepIDs, s.ID)
			}
		}
	}
	if len(cands) == 0 && len(stepIDs) == 0 {
		return f, false
	}
	// One draw in six goes to a pool-level step when there are any.
	if len(stepIDs) > 0 && (len(cands) == 0 || rng.IntN(6) == 0) {
		f.Trigger.StepID = stepIDs[rng.IntN(len(stepIDs))]
	} else {
		cd := cands[rng.IntN(len(cands))]
		f.Trigger.Node, f.Trigger.Cursor, f.Trigger.Step = cd.node, cd.cursor, cd.step.String()
		if k == FaultAgentKill || k == FaultLinkCut {
			f.Host = cd.node
		}
		if k == FaultBadArtifact {
			f.Host = cd.node
			f.Component = cd.next.Op.Component
		}
	}
	// Half at the boundary, half mid-step. An agent is killed while its
	// operation is surely in flight: soon after it starts.
	switch {
	case k == FaultAgentKill:
		f.Trigger.Delay = ms(rng, 300, 3000)
	case rng.IntN(2) == 1:
		f.Trigger.Delay = ms(rng, 1000, 8000)
	}
	switch k {
	case FaultLeaderKill, FaultFollowerKill:
		f.Duration = ms(rng, 3000, 20000)
	case FaultLeaderFreeze, FaultFollowerFreeze:
		f.Duration = ms(rng, 8000, 25000)
	case FaultPartition:
		f.Duration = ms(rng, 10000, 30000)
		f.Variant = []string{"leader", "follower"}[rng.IntN(2)]
	case FaultLinkCut:
		f.Duration = ms(rng, 35000, 60000)
	case FaultAPILBDown:
		f.Duration = 30 * time.Second
		f.Variant = []string{"frozen", "host"}[rng.IntN(2)]
	case FaultBadArtifact:
		f.Duration = 90 * time.Second
	}
	return f, true
}

// ms draws a duration uniformly in [lo, hi) milliseconds, rounded to 100 ms.
func ms(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond / (100 * time.Millisecond) * (100 * time.Millisecond)
}

// Describe is a fault's one-line description as a schedule lists it.
func (f Fault) Describe() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Variant != "" {
		b.WriteString(" (" + f.Variant + ")")
	}
	if f.Component != "" {
		b.WriteString(" " + f.Component)
	}
	fmt.Fprintf(&b, " %s, %s", f.Trigger, f.Duration.Round(100*time.Millisecond))
	return b.String()
}
