package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/lab"
)

// labUpgrade is the lab's upgrade as the coordinator answers GET
// .../upgrade right after it started: the full topology's pools, v1.33.13
// → v1.34.3, the current step layout. testdata/lab-upgrade.json holds it
// (the engine's NewUpgrade for lab.FullTopology, converted for the wire);
// the tests read it as any client of the API would.
func labUpgrade(t *testing.T) *api.Upgrade {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "lab-upgrade.json"))
	require.NoError(t, err)
	var u api.Upgrade
	require.NoError(t, json.Unmarshal(b, &u))
	return &u
}

func labHosts() []string {
	var out []string
	for _, h := range lab.FullTopology().Hosts {
		out = append(out, h.Name)
	}
	return out
}

func TestScheduleIsTheSeeds(t *testing.T) {
	u := labUpgrade(t)
	a := Schedule(42, u, FullProfile(), labHosts())
	require.Equal(t, a, Schedule(42, u, FullProfile(), labHosts()), "one seed, one schedule")
	require.NotEqual(t, a, Schedule(43, u, FullProfile(), labHosts()))

	kinds := map[FaultKind]int{}
	bad := 0
	for seed := range uint64(200) {
		s := Schedule(seed, u, FullProfile(), labHosts())
		seen := map[FaultKind]bool{}
		for _, f := range s {
			require.False(t, seen[f.Kind], "seed %d draws %s twice", seed, f.Kind)
			seen[f.Kind] = true
			kinds[f.Kind]++
			if f.Trigger.StepID == "" {
				n, ok := u.Node(f.Trigger.Node)
				require.True(t, ok, f.Trigger.Node)
				p, _ := u.Pool(n.Pool)
				require.Less(t, f.Trigger.Cursor, len(p.NodeSteps))
				require.Equal(t, p.NodeSteps[f.Trigger.Cursor].String(), f.Trigger.Step)
				switch f.Kind {
				case FaultAgentKill:
					require.Equal(t, api.NodeStepOperation, p.NodeSteps[f.Trigger.Cursor].Kind, "an agent is killed while it runs an operation")
					require.Equal(t, f.Trigger.Node, f.Host)
					require.Positive(t, f.Trigger.Delay)
				case FaultBadArtifact:
					next := p.NodeSteps[f.Trigger.Cursor+1]
					require.Equal(t, api.OpUpgradeBinary, next.Op.Kind, "a wrong checksum is served just before a binary download")
					require.Equal(t, next.Op.Component, f.Component)
				}
			} else {
				require.NotContains(t, []FaultKind{FaultAgentKill, FaultLinkCut, FaultBadArtifact}, f.Kind, "host faults need a trigger node")
			}
			switch f.Kind {
			case FaultLinkCut:
				require.Greater(t, f.Duration, 30*time.Second, "longer than the coordinator's liveness timeout")
			case FaultAPILBDown:
				require.Equal(t, 30*time.Second, f.Duration)
				require.Contains(t, []string{"frozen", "host"}, f.Variant)
			case FaultPartition:
				require.Contains(t, []string{"leader", "follower"}, f.Variant)
			}
		}
		require.GreaterOrEqual(t, len(s), 5)
		if seen[FaultBadArtifact] {
			bad++
		}
	}
	for _, k := range FullProfile().Kinds {
		require.Greater(t, kinds[k], 80, "%s drawn in about 5 of 8 runs", k)
	}
	require.InDelta(t, 50, bad, 25, "a wrong checksum in about one run in four")
}

func TestSmokeProfileKeepsToItsNodes(t *testing.T) {
	u := labUpgrade(t)
	for seed := range uint64(100) {
		s := Schedule(seed, u, SmokeProfile(), labHosts())
		require.Len(t, s, 4)
		for _, f := range s {
			require.NotContains(t, []FaultKind{FaultLeaderKill, FaultAgentKill, FaultBadArtifact}, f.Kind)
			if f.Trigger.StepID != "" {
				require.Equal(t, api.StepIDAddons, f.Trigger.StepID)
			} else {
				require.Contains(t, SmokeProfile().Nodes, f.Trigger.Node)
			}
		}
	}
	require.Empty(t, Schedule(1, u, NoFaults(), labHosts()))
	_, err := ProfileByName("nope")
	require.ErrorContains(t, err, "unknown chaos profile")
}

func TestTriggerAtOrPastItsStep(t *testing.T) {
	u := labUpgrade(t)
	n, _ := u.Node("cp-2")
	tr := Trigger{Node: "cp-2", Cursor: 3}
	require.False(t, triggered(u, tr))
	n.State, n.Cursor = api.StepRunning, 2
	require.False(t, triggered(u, tr))
	n.Cursor = 4
	require.True(t, triggered(u, tr), "a step the follower did not see still triggers")
	n.State = api.StepDone
	require.True(t, triggered(u, tr))
	s, _ := u.Step(api.StepIDAddons)
	require.False(t, triggered(u, Trigger{StepID: api.StepIDAddons}))
	s.StartedAt = time.Unix(1, 0)
	require.True(t, triggered(u, Trigger{StepID: api.StepIDAddons}))
}

// ranInOrder fills u's steps and nodes as a run that kept SPEC §4: each
// step after its dependencies, control-plane nodes one at a time.
func ranInOrder(u *api.Upgrade) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	span := map[string][2]int{"pool/cplb": {0, 10}, "pool/cp": {10, 100}, "addons": {100, 120}, "pool/lb": {100, 130}, "pool/workers": {130, 190}, "health": {190, 195}}
	for i := range u.Steps {
		s := &u.Steps[i]
		sp := span[s.ID]
		s.State, s.StartedAt, s.FinishedAt = api.StepDone, at(sp[0]), at(sp[1])
	}
	nodes := map[string][2]int{"cplb-1": {0, 10}, "cp-1": {10, 40}, "cp-2": {40, 70}, "cp-3": {70, 100}, "lb-1": {100, 130}, "worker-1": {130, 160}, "worker-2": {160, 190}}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		sp := nodes[n.Node]
		n.State, n.StartedAt, n.FinishedAt, n.Version = api.StepDone, at(sp[0]), at(sp[1]), u.To
	}
	u.State, u.CreatedAt, u.FinishedAt = api.UpgradeDone, t0, at(195)
}

func TestOrderFindsEveryBreakOfSection4(t *testing.T) {
	u := labUpgrade(t)
	ranInOrder(u)
	require.Empty(t, checkOrder(u))

	w, _ := u.Step("pool/workers")
	w.StartedAt = w.StartedAt.Add(-5 * time.Second) // before lb finished; add-ons are no predecessor
	require.Equal(t, []string{"order: pool/workers started " + w.StartedAt.Format("15:04:05.000") + " before pool/lb finished (done)"}, checkOrder(u))
	ranInOrder(u)

	cp2, _ := u.Node("cp-2")
	cp2.StartedAt = cp2.StartedAt.Add(-time.Second)
	require.Equal(t, []string{"order: control-plane node cp-2 started while cp-1 was upgrading"}, checkOrder(u))
	ranInOrder(u)

	// A halted upgrade: the cp pool failed, nothing after it started.
	cp, _ := u.Step("pool/cp")
	cp.State = api.StepFailed
	for _, id := range []string{"addons", "pool/lb", "pool/workers", "health"} {
		s, _ := u.Step(id)
		s.State, s.StartedAt, s.FinishedAt = api.StepCancelled, time.Time{}, time.Time{}
	}
	require.Empty(t, checkOrder(u))
	a, _ := u.Step("addons")
	a.StartedAt = cp.FinishedAt.Add(time.Second)
	require.Len(t, checkOrder(u), 1, "nothing may start after a failed control plane")
}

func journalLines(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

func rec(t time.Time, id, step string) string {
	return fmt.Sprintf(`{"time":%q,"id":%q,"step":%q}`, t.Format(time.RFC3339Nano), id, step)
}

func TestJournalOperationsOnceAndInOrder(t *testing.T) {
	t0 := time.Unix(2000, 0).UTC()
	s := func(x int) time.Time { return t0.Add(time.Duration(x) * time.Second) }
	id := func(c int) string { return fmt.Sprintf("lab-1.34.3-1/worker-1/%d/a0", c) }
	good := journalLines(
		rec(s(0), "preflight-7/worker-1", "started"), rec(s(1), "preflight-7/worker-1", "finished"),
		// The backup step's etcd snapshot: a cluster step's operation.
		rec(s(1), "lab-1.34.3-1/run/backup/a0", "started"), rec(s(1), "lab-1.34.3-1/run/backup/a0", "finished"),
		// The agent was killed after id(3) restarted the kubelet: at start
		// it compacted its journal (every step of an operation once, at
		// the operation's start), then it went on.
		rec(s(2), id(2), "started"), rec(s(2), id(2), "imported"), rec(s(6), id(2), "finished"), rec(s(2), id(2), "reported"),
		rec(s(7), id(3), "started"), rec(s(7), id(3), "renamed"), rec(s(7), id(3), "restarted"),
		rec(s(11), id(3), "healthy"), rec(s(12), id(3), "finished"),
		rec(s(13), "lab-1.34.3-1/worker-1/rollback/3/a0", "started"), rec(s(14), "lab-1.34.3-1/worker-1/rollback/3/a0", "restored"), rec(s(15), "lab-1.34.3-1/worker-1/rollback/3/a0", "finished"),
		`{"time":"2026-11-2`, // torn by a crash
	)
	sum, v := checkJournal("worker-1", good)
	require.Empty(t, v)
	require.Equal(t, 3, sum.Operations)
	require.Equal(t, OpTimes{Started: s(7), Finished: s(12)}, sum.Ops[id(3)])

	_, v = checkJournal("worker-1", journalLines(
		rec(s(2), id(2), "started"), rec(s(3), id(2), "finished"),
		rec(s(4), id(3), "started"), rec(s(5), id(3), "renamed"), rec(s(6), id(3), "renamed"), rec(s(7), id(3), "finished"), rec(s(8), id(3), "finished"),
		rec(s(6), id(4), "started"), rec(s(9), id(4), "finished"),
		rec(s(9), "lab-1.34.3-1/cp-1/2/a0", "started"),
		rec(s(9), "junk", "started"),
	))
	require.Equal(t, []string{
		"ops-once: worker-1: lab-1.34.3-1/worker-1/3/a0 finished 2 times",
		"ops-once: worker-1: lab-1.34.3-1/worker-1/3/a0 renamed 2 times",
		"ops-once: worker-1 ran lab-1.34.3-1/cp-1/2/a0, an operation of node cp-1",
		"order: worker-1: operation at step 4 started " + s(6).Format("15:04:05.000") + " before the one at step 3 finished",
	}, withoutLine(v, "junk"))
	require.Len(t, v, 5, "and the ID that is not an operation's")
}

func withoutLine(v []string, sub string) []string {
	var out []string
	for _, x := range v {
		if !strings.Contains(x, sub) {
			out = append(out, x)
		}
	}
	return out
}

func TestHostFilesOldOrNewNeverTorn(t *testing.T) {
	old := "registry.k8s.io/kube-apiserver:v1.33.13"
	images := map[string]bool{old: true, "registry.k8s.io/kube-apiserver:v1.34.3": true}
	manifest := func(image string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\nspec:\n  containers:\n  - name: kube-apiserver\n    image: " + image + "\n")
	}
	f := HostFiles{Host: "cp-1", KubeletSHA256: "aaa", ContainerdSHA: "ccc", Manifests: map[string][]byte{"kube-apiserver.yaml": manifest(old)}}
	require.Empty(t, checkHostFiles(f, []string{"aaa", "bbb"}, []string{"ccc"}, images))
	require.Equal(t, []string{"kube-apiserver:v1.33.13"}, []string{strings.TrimPrefix(manifestImages(f)[0], "registry.k8s.io/")})

	f.KubeletSHA256 = "abc"
	f.Manifests["kube-apiserver.yaml"] = manifest("registry.k8s.io/kube-apiserver:v1.35.0")
	f.Manifests["etcd.yaml"] = []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: etc")
	f.Manifests["x.yaml"] = []byte("{{{")
	v := checkHostFiles(f, []string{"aaa", "bbb"}, []string{"ccc"}, images)
	require.Len(t, v, 4, "%v", v)
	require.Contains(t, v, "torn: cp-1: kubelet sha256 abc is neither release's")
	require.Contains(t, v, "torn: cp-1: manifest kube-apiserver.yaml runs registry.k8s.io/kube-apiserver:v1.35.0, neither the old nor the new release's image")
	require.Contains(t, v, "torn: cp-1: manifest etcd.yaml has no name or no containers")
}

func TestVersionSamplesKeepRule5(t *testing.T) {
	roles := map[string]api.Role{"cplb-1": api.RoleControlPlaneLB, "cp-1": api.RoleControlPlane, "cp-2": api.RoleControlPlane, "worker-1": api.RoleWorker}
	at := time.Unix(3000, 0)
	sample := func(kubelets map[string]string, apis ...string) VersionSample {
		s := VersionSample{At: at, Kubelets: kubelets, ControlPlane: map[string]string{}}
		for i, v := range apis {
			s.ControlPlane[fmt.Sprintf("kube-apiserver/cp-%d", i+1)] = v
			s.ControlPlane[fmt.Sprintf("kube-scheduler/cp-%d", i+1)] = v
		}
		return s
	}
	const from, to = "1.33.13", "1.34.3"
	ok := []VersionSample{
		sample(map[string]string{"cplb-1": from, "cp-1": from, "cp-2": from, "worker-1": from}, from, from),
		// The cplb pool goes first, kubelet included (SPEC §4).
		sample(map[string]string{"cplb-1": to, "cp-1": from, "cp-2": from, "worker-1": from}, from, from),
		sample(map[string]string{"cplb-1": to, "cp-1": to, "cp-2": from, "worker-1": from}, to, from),
		sample(map[string]string{"cplb-1": to, "cp-1": to, "cp-2": to, "worker-1": to}, to, to),
		{At: at, Err: "connection refused"},
	}
	n, v := checkVersionSamples(ok, from, to, roles)
	require.Empty(t, v)
	require.Equal(t, 4, n)

	_, v = checkVersionSamples([]VersionSample{
		sample(map[string]string{"cp-1": from, "cp-2": to, "worker-1": to}, to, from),
		sample(map[string]string{"cp-1": from, "cp-2": to, "worker-1": to}, to, from), // reported once
		sample(map[string]string{"cp-1": "1.32.9", "worker-1": from}, from, "1.35.0"),
	}, from, to, roles)
	require.Equal(t, []string{
		"version-rules: " + at.Format("15:04:05.0") + " kubelet of cp-2 at 1.34.3, newer than its kube-apiserver at 1.33.13",
		"version-rules: " + at.Format("15:04:05.0") + " kubelet of worker-1 at 1.34.3, newer than the control plane (a kube-apiserver at 1.33.13)",
		"version-rules: " + at.Format("15:04:05.0") + " kube-apiserver/cp-2 runs 1.35.0, neither 1.33.13 nor 1.34.3",
		"version-rules: " + at.Format("15:04:05.0") + " kube-scheduler/cp-2 runs 1.35.0, neither 1.33.13 nor 1.34.3",
		"version-rules: " + at.Format("15:04:05.0") + " kubelet of cp-1 is 1.32.9, neither 1.33.13 nor 1.34.3",
	}, sortedLike(v))
	require.Equal(t, "1.34.3", imageVersion("registry.k8s.io/kube-apiserver:v1.34.3"))
	require.Equal(t, "1.34.3", imageVersion("10.77.0.1:5000/kube-apiserver:v1.34.3"))
	require.Empty(t, imageVersion("10.77.0.1:5000/kube-apiserver"))
}

// sortedLike orders v's messages of one sample as checkVersionSamples
// emits them, apart from map order inside a kind.
func sortedLike(v []string) []string {
	var newer, cp, kubelet []string
	for _, x := range v {
		switch {
		case strings.Contains(x, "newer"):
			newer = append(newer, x)
		case strings.Contains(x, "kubelet of"):
			kubelet = append(kubelet, x)
		default:
			cp = append(cp, x)
		}
	}
	sortStrings(newer)
	sortStrings(cp)
	return append(append(newer, cp...), kubelet...)
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func TestEndingDoneHaltedOrWedged(t *testing.T) {
	u := labUpgrade(t)
	ranInOrder(u)
	e, _, v := checkEnding(u, "1.34.3", false)
	require.Equal(t, EndCompleted, e)
	require.Empty(t, v)
	e, _, v = checkEnding(u, "1.33.13", false)
	require.Equal(t, EndWedged, e)
	require.NotEmpty(t, v)

	u.State, u.Reason = api.UpgradeFailed, "pool workers: 1 of 2 nodes failed: worker-1 (operation:UpgradeBinary:kubelet: checksum mismatch: …)"
	e, detail, v := checkEnding(u, "1.33.13", false)
	require.Equal(t, EndHalted, e)
	require.Contains(t, detail, "checksum mismatch")
	require.Empty(t, v)
	u.Reason = ""
	e, _, _ = checkEnding(u, "1.33.13", false)
	require.Equal(t, EndWedged, e, "failed without a reason")

	u.State = api.UpgradeRunning
	w, _ := u.Node("worker-1")
	w.State, w.Cursor = api.StepRunning, 3
	e, _, v = checkEnding(u, "1.33.13", true)
	require.Equal(t, EndWedged, e)
	require.Contains(t, v[0], "worker-1 at 3:")
	w.Waiting = "gate probe-errors red: 3"
	e, detail, v = checkEnding(u, "1.33.13", true)
	require.Equal(t, EndHalted, e)
	require.Equal(t, "waiting: worker-1 waits: gate probe-errors red: 3", detail)
	require.Empty(t, v)
}

func TestHaltExplainedOnlyByAWrongChecksumThatFired(t *testing.T) {
	u := labUpgrade(t)
	u.State, u.Reason = api.UpgradeFailed, "pool workers: 1 of 2 nodes failed"
	w, _ := u.Node("worker-1")
	w.State, w.Error = api.StepFailed, "operation:UpgradeBinary:kubelet: checksum mismatch: /artifacts/v1.34.3/kubelet"
	fired := []FaultRecord{{Fault: Fault{Kind: FaultBadArtifact}, Fired: true}}
	require.True(t, haltExplained(u, fired))
	require.False(t, haltExplained(u, []FaultRecord{{Fault: Fault{Kind: FaultBadArtifact}}}), "it never fired")
	w.Error = "operation:UpgradeBinary:kubelet: download failed: i/o timeout"
	require.False(t, haltExplained(u, fired), "a download that failed during a link cut is no reason to halt")
}

func TestLowerBoundTakesDispatchOutOfOperationSteps(t *testing.T) {
	u := labUpgrade(t)
	ranInOrder(u)
	starts := map[string]map[int]time.Time{}
	ops := map[string]OpTimes{}
	// Every node: its step 2 (ImportImages) seen from +2 s to +6 s of its
	// start, the agent's operation 1 s of it.
	for i := range u.Nodes {
		n := &u.Nodes[i]
		starts[n.Node] = map[int]time.Time{2: n.StartedAt.Add(2 * time.Second), 3: n.StartedAt.Add(6 * time.Second)}
		ops[operationID(u, n.Node, 2, 0)] = OpTimes{Started: n.StartedAt.Add(2500 * time.Millisecond), Finished: n.StartedAt.Add(3500 * time.Millisecond)}
	}
	b, err := LowerBound(u, starts, ops)
	require.NoError(t, err)
	require.Equal(t, 195*time.Second, b.Wall)
	require.Equal(t, 7*3*time.Second, b.Overhead)
	// cplb 10-3, cp 3×(30-3), then max(add-ons 20, lb 30-3), workers 2×(30-3) at width 1, health 5.
	require.Equal(t, (7+81+27+54+5)*time.Second, b.Bound)
	require.InDelta(t, 195.0/174, b.Ratio(), 1e-9)
	require.Contains(t, b.String(), "wall 195s vs bound 174s: 1.12×")

	u.State = api.UpgradeFailed
	_, err = LowerBound(u, starts, ops)
	require.Error(t, err)
}

func TestSummaryLine(t *testing.T) {
	u := labUpgrade(t)
	ranInOrder(u)
	done := &ChaosReport{Seed: 7, Upgrade: u, Ending: EndCompleted, Explained: true,
		Faults: []FaultRecord{{Fault: Fault{Kind: FaultLeaderFreeze}, Fired: true, Target: "c1 (leader)", Next: 2 * time.Second}, {Fault: Fault{Kind: FaultLinkCut}}},
		Checks: []CheckResult{{Name: "ending", Detail: "done"}}}
	halted := &ChaosReport{Seed: 8, Upgrade: u, Ending: EndHalted, EndDetail: "failed: checksum mismatch", Explained: true,
		Checks: []CheckResult{{Name: "order", Violations: []string{"order: x"}}}}
	odd := &ChaosReport{Seed: 9, Upgrade: u, Ending: EndHalted, EndDetail: "failed: download failed", Explained: false}
	s := ChaosSummary([]*ChaosReport{done, halted, odd, nil}, []error{nil, nil, nil, errors.New("lab up: boom")})
	require.Contains(t, s, "runs 3, completed 1, halted-with-reason 2 (1 unexplained), violations 1 (1 more did not run to their checks)")
	require.Contains(t, s, "| 4 | — | lab up: boom |")
	require.Contains(t, s, "UNEXPLAINED halted: failed: download failed")
	tab := done.Table()
	require.Contains(t, tab, "next step +2.0s")
	require.Contains(t, tab, "(not reached)")
	require.Contains(t, tab, "ok   ending")
	require.Contains(t, halted.Table(), "FAIL order")
}

// TestNextCountsJournaledOperations: a transition the record no longer
// shows (read from a member cut off from the others) is found in the
// agents' journals; faults that are not the leader's get no figure.
func TestNextCountsJournaledOperations(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	faults := []FaultRecord{
		{Fault: Fault{Kind: FaultPartition, Variant: "leader"}, Fired: true, at: t0},
		{Fault: Fault{Kind: FaultLeaderKill}, Fired: true, at: t0.Add(time.Minute)},
		{Fault: Fault{Kind: FaultFollowerKill}, Fired: true, at: t0},
		{Fault: Fault{Kind: FaultLeaderFreeze}, at: t0},
	}
	transitions := []time.Time{t0.Add(-time.Second), t0.Add(14 * time.Second), t0.Add(63 * time.Second)}
	ops := map[string]OpTimes{
		"u/lb-1/3/a1":     {Started: t0.Add(3 * time.Second), Finished: t0.Add(5 * time.Second)},
		"u/worker-1/0/a1": {Finished: t0.Add(2 * time.Second)}, // no start journaled
	}
	faults[0].NewLeader = 2 * time.Second
	setNext(faults, transitions, ops)
	require.Equal(t, 3*time.Second, faults[0].Next, "the journaled start, not the record's later transition")
	require.Equal(t, time.Second, faults[0].Held, "from the new leader (no operation was in flight)")
	require.Equal(t, 3*time.Second, faults[1].Next)
	require.Zero(t, faults[2].Next, "a follower's fault")
	require.Zero(t, faults[3].Next, "a fault that did not fire")
}

// TestHeldCountsFromTheFirstOperationInFlightToEnd: an operation that
// began before the fault holds its node's next step until it ends, fault
// or not; Held counts from the first such end after the election, and
// from the election when none ended before the next step.
func TestHeldCountsFromTheFirstOperationInFlightToEnd(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 36, 25, 700_000_000, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	faults := []FaultRecord{
		{Fault: Fault{Kind: FaultPartition, Variant: "leader"}, Fired: true, at: t0, NewLeader: 4 * time.Second},
		{Fault: Fault{Kind: FaultLeaderKill}, Fired: true, at: at(60_000), NewLeader: 2 * time.Second},
	}
	ops := map[string]OpTimes{
		// Seed 103: lb-1 imported images from before the fault to +14.5 s.
		"u/lb-1/2/a0": {Started: at(-3000), Finished: at(14_500)},
		"u/lb-1/3/a0": {Started: at(14_600), Finished: at(14_700)},
		"u/cp-1/2/a0": {Started: at(-60_000), Finished: at(-50_000)},
		// The kill: two operations in flight, the later ends after the
		// next step, which followed 0.3 s after the election.
		"u/w-1/2/a0": {Started: at(59_000), Finished: at(80_000)},
		"u/w-2/2/a0": {Started: at(59_500), Finished: at(90_000)},
	}
	setNext(faults, []time.Time{at(62_300)}, ops)
	require.Equal(t, 14600*time.Millisecond, faults[0].Next)
	require.Equal(t, 100*time.Millisecond, faults[0].Held, "from lb-1's import's end")
	require.Equal(t, 2300*time.Millisecond, faults[1].Next)
	require.Equal(t, 300*time.Millisecond, faults[1].Held, "from the election: no operation in flight ended before the next step")
}

// TestHeldIsZeroWhenTheNewLeaderActedBeforeThePollSawIt: seed 211's leader
// freeze. The record showed a transition at +2.0 s, before the poll saw
// the new leader at +2.1 s, and the next at +9.9 s (a drain). The frozen
// leader committed nothing, so the +2.0 s transition was the new
// leader's, and the fault held nothing past the election; a journaled
// start in that gap (an operation dispatched before the fault) is no such
// evidence.
func TestHeldIsZeroWhenTheNewLeaderActedBeforeThePollSawIt(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 15, 10, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	faults := []FaultRecord{
		{Fault: Fault{Kind: FaultLeaderFreeze}, Fired: true, at: t0, NewLeader: 2100 * time.Millisecond},
		{Fault: Fault{Kind: FaultLeaderKill}, Fired: true, at: at(60_000), NewLeader: 2100 * time.Millisecond},
	}
	transitions := []time.Time{at(-500), at(2000), at(9900), at(69_900)}
	ops := map[string]OpTimes{
		"u/w-1/4/a0": {Started: at(62_000), Finished: at(65_000)}, // started by its agent, not committed
	}
	setNext(faults, transitions, ops)
	require.Equal(t, 2*time.Second, faults[0].Next)
	require.Zero(t, faults[0].Held, "the record's transition at +2.0 s was the new leader's")
	require.Equal(t, 2*time.Second, faults[1].Next, "the journaled start")
	require.Equal(t, 7800*time.Millisecond, faults[1].Held, "a journaled start before the poll is not the new leader's act")
}
