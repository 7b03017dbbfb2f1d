//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/phases"
	"github.com/stretchr/testify/require"
)

// The upgrade path: a minor, then a patch of the newer minor.
const (
	fromVersion  = "1.33.13"
	minorVersion = "1.34.3"
	patchVersion = "1.34.4"
)

// TestUpgradeEndToEnd is molt's whole job on real parts: the full lab
// topology (7 systemd hosts, real kubelets and containerd, control plane in
// static pods), three coordinator members with Raft on disk, molt-agent on
// every host. It checks that bad upgrades are refused and change nothing,
// then upgrades a minor while killing the Raft leader once and one agent
// mid-operation, under a chaos smoke (chaos_smoke_test.go: four more
// faults and the invariant checks of docs/chaos.md), then a patch that
// the scheduler starts by itself when the maintenance window opens.
func TestUpgradeEndToEnd(t *testing.T) {
	testenv.RequireRoot(t)
	builds := cachedir.Build()
	for _, v := range []string{fromVersion, minorVersion, patchVersion} {
		testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(builds, v), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(v).Command()+")")
	}
	testenv.RequireFile(t, filepath.Join(builds, "etcd", "v3.6.4", "bin", "etcd"), "etcd (build/k8s/etcd.sh)")
	testenv.RequireFile(t, filepath.Join(builds, "containerd", "v"+lab.BuiltContainerdVersion, "bin", "containerd"), "containerd (build/containerd/build.sh)")
	testenv.RequireBinary(t, "systemd-nspawn")

	root := moduleRoot(t)
	bin := buildBinaries(t, root)
	lcfg := lab.DefaultConfig()
	lcfg.Cache = cachedir.Lab()
	lcfg.BuildCache = builds
	lcfg.Version = fromVersion
	lcfg.StateDir = filepath.Join(t.TempDir(), "lab")
	lcfg.ModuleDir = root
	lcfg.Prefix = "mlabe-"
	lcfg.Log = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lcfg.Out = tlog{t}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	// A run that was killed leaves its lab: remove it (hosts are found by
	// name and namespace, members die with the lab's namespace).
	stale, err := lab.New(lcfg)
	require.NoError(t, err)
	require.NoError(t, stale.Down(ctx))
	work := t.TempDir()
	var env *Env
	env, err = Up(ctx, Config{
		Lab: lcfg, BinDir: bin, WorkDir: work, BasePort: 7180,
		Releases: []string{fromVersion, minorVersion, patchVersion}, DrainTimeout: 2 * time.Minute,
		Out: tlog{t}, AlertFor: 10 * time.Second, GateInterval: 3 * time.Second, AgentHealthTimeout: time.Minute,
		MIG: DefaultMIGPool(), ConcurrentWorkerPools: 2,
	})
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, env, work)
		}
		if env != nil {
			require.NoError(t, env.Down(context.Background()))
			requireNothingLeft(t, lcfg.Prefix)
		}
	})
	require.NoError(t, err)

	t.Run("refusals change nothing", func(t *testing.T) { testRefusals(t, ctx, env) })
	if t.Failed() {
		return
	}
	t.Run("minor upgrade with a leader and an agent killed", func(t *testing.T) {
		mig := watchMIG(t, ctx, env)
		u := testMinorWithFaults(t, ctx, env)
		mig.requireSurge(t, ctx, u, minorVersion)
	})
	if t.Failed() {
		return
	}
	t.Run("patch with the MIG pool blue/green, rolled back while draining", func(t *testing.T) { testBlueGreenRollback(t, ctx, env) })
	if t.Failed() {
		return
	}
	// The patch again, automatic: nobody starts it (auto_test.go; the
	// path of `molt-lab demo --auto`). A red PromQL gate holds its first
	// worker (health_test.go) while the window it started in closes; the
	// MIG pool goes blue/green after the workers, completed while it soaks.
	t.Run("automatic patch upgrade in its maintenance window, held by a red gate, the MIG pool completed in its soak", func(t *testing.T) {
		blue, err := env.PoolNodes(ctx, env.MIG().Name)
		require.NoError(t, err)
		bg := driveBlueGreen(ctx, env, phases.PoolComplete)
		gate := startGateHold(t, ctx, env)
		defer func() { t.Logf("gate %s held %s", gateName, gate.Wait(t)) }()
		u := testAutomaticPatch(t, ctx, env, patchVersion)
		requireBlueGreenCompleted(t, ctx, env, bg, blue, u, patchVersion)
	})
	if t.Failed() {
		return
	}
	// Last: it leaves the cluster failed and mixed (health_test.go).
	t.Run("broken kubelet: budget, rollback, alert", func(t *testing.T) { testBrokenKubelet(t, ctx, env) })
}

// testRefusals: a skipped minor and a downgrade are refused with the rule
// they broke, changing nothing; an upgrade whose preflight fails (one agent
// stopped) ends refused by its own run, naming the check, with the
// cluster's spec and status as they were and no node touched.
func testRefusals(t *testing.T, ctx context.Context, env *Env) {
	c := env.API()
	for _, v := range []string{"1.35.0", "1.32.9"} {
		rel := api.Release{Version: v, Components: api.ReleaseComponents{
			Kubelet: api.BinaryArtifact{URL: "/artifacts/none/kubelet", SHA256: strings.Repeat("0", 64)},
		}}
		_, err := c.Do(ctx, http.MethodPut, "/v1/releases/"+v, rel, nil)
		require.NoError(t, err)
	}
	before := snapshot(t, ctx, env)
	_, err := env.StartUpgrade(ctx, "1.35.0")
	require.True(t, api.IsProblem(err, "version-skip-minor"), "skipped minor: %v", err)
	_, err = env.StartUpgrade(ctx, "1.32.9")
	require.True(t, api.IsProblem(err, "version-downgrade"), "downgrade: %v", err)
	require.Equal(t, before, snapshot(t, ctx, env))

	// One agent stopped: preflight's agents-reporting check blocks.
	_, err = env.Lab.Exec(ctx, "worker-2", "systemctl", "stop", "molt-agent.service")
	require.NoError(t, err)
	require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
		cl, err := env.Cluster(ctx)
		if err != nil {
			return false, nil
		}
		for _, a := range cl.Status.Agents {
			if a.Node == "worker-2" {
				return a.Missing, nil
			}
		}
		return false, nil
	}), "worker-2's agent never counted missing")
	// The upgrade is accepted in state preflight and its own run refuses
	// it; nothing of the cluster changed.
	before = snapshot(t, ctx, env)
	started, err := env.StartUpgrade(ctx, minorVersion)
	require.NoError(t, err)
	require.Equal(t, phases.UpgradePreflight, started.State)
	refused, err := env.Watch(ctx, started.ID, 4*time.Minute, nil)
	require.ErrorContains(t, err, "refused")
	require.Equal(t, phases.UpgradeRefused, refused.State)
	require.Contains(t, refused.RefusedChecks, "agents-reporting")
	for _, n := range refused.Nodes {
		require.Equal(t, phases.StatePending, n.State, "node %s touched by a refused upgrade", n.Node)
	}
	after := snapshot(t, ctx, env)
	require.Equal(t, before.spec, after.spec)
	require.Equal(t, before.version, after.version)

	_, err = env.Lab.Exec(ctx, "worker-2", "systemctl", "start", "molt-agent.service")
	require.NoError(t, err)
	require.NoError(t, env.WaitAgents(ctx, 2*time.Minute))
}

type clusterSnapshot struct {
	spec    string
	version string
	upgrade string
}

func snapshot(t *testing.T, ctx context.Context, env *Env) clusterSnapshot {
	t.Helper()
	cl, err := env.Cluster(ctx)
	require.NoError(t, err)
	spec, _ := json.Marshal(cl.Spec)
	up := ""
	if u, err := env.Upgrade(ctx); err == nil {
		b, _ := json.Marshal(u)
		up = string(b)
	}
	return clusterSnapshot{spec: string(spec), version: cl.Status.Version, upgrade: up}
}

// testMinorWithFaults upgrades to the next minor. While a control-plane
// node is upgrading the Raft leader is SIGKILLed (and later restarted on
// its data directory); while a worker's agent runs an operation, the agent
// is killed with `systemctl kill -s KILL`. The upgrade completes, in SPEC
// §4's order, and every operation took effect once.
func testMinorWithFaults(t *testing.T, ctx context.Context, env *Env) *phases.Upgrade {
	var (
		mu          sync.Mutex
		killedAt    time.Time
		killed      *Member
		failover    time.Duration
		newLeader   time.Duration
		agentKilled string
	)
	observe := func(u *phases.Upgrade) {
		mu.Lock()
		defer mu.Unlock()
		if killedAt.IsZero() {
			if n, ok := u.Node("cp-2"); ok && n.State == phases.StateRunning {
				m, err := env.Leader(ctx)
				require.NoError(t, err)
				killedAt = time.Now()
				m.Kill()
				killed = m
				t.Logf("killed Raft leader %s while cp-2 is at step %d", m.ID, n.Cursor)
				go func() {
					if poll(ctx, time.Minute, func() (bool, error) { _, err := env.Leader(ctx); return err == nil, nil }) == nil {
						mu.Lock()
						newLeader = time.Since(killedAt)
						mu.Unlock()
					}
				}()
			}
		} else if failover == 0 {
			// The first transition the new leader commits after the kill.
			if next := firstAfter(u, killedAt); !next.IsZero() {
				failover = next.Sub(killedAt)
				t.Logf("leader kill → next step dispatched by the new leader: %s", failover.Round(time.Millisecond))
				require.NoError(t, killed.start(filepath.Join(env.cfg.BinDir, "molt-coordinator"), env.Lab.Network().LabNS()))
			}
		}
		if agentKilled == "" {
			if n, ok := u.Node("worker-1"); ok && n.State == phases.StateRunning {
				if st, ok := u.CurrentStep(n); ok && st.Kind == phases.NodeOperation {
					// --kill-who=main: the agent is one process, and nspawn
					// hosts cannot signal a whole cgroup (EIO on cgroup.kill).
					_, err := env.Lab.Exec(ctx, "worker-1", "systemctl", "kill", "--kill-who=main", "-s", "KILL", "molt-agent.service")
					require.NoError(t, err)
					agentKilled = st.String()
					t.Logf("killed worker-1's molt-agent during %s", agentKilled)
				}
			}
		}
	}
	restarts := func() string {
		out, err := env.Lab.Exec(ctx, "worker-1", "systemctl", "show", "-p", "NRestarts", "--value", "molt-agent.service")
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "0", restarts())
	ctrdBefore, err := env.Lab.ContainerdVersions(ctx)
	require.NoError(t, err)
	smoke := startChaosSmoke(t, ctx, env) // chaos_smoke_test.go: more faults, the invariant checks
	u := upgradeTo(t, ctx, env, minorVersion, observe)
	smoke.finish(t, ctx)
	require.Equal(t, "1", restarts(), "systemd restarted the killed agent once")
	mu.Lock()
	require.False(t, killedAt.IsZero(), "the leader was never killed")
	require.NotZero(t, failover, "no step after the leader kill")
	require.NotEmpty(t, agentKilled, "worker-1's agent was never killed mid-operation")
	t.Logf("MEASURED leader kill → new leader %s, → next dispatched step %s", newLeader.Round(time.Millisecond), failover.Round(time.Millisecond))
	mu.Unlock()

	requireOrder(t, u)
	requireClusterAt(t, ctx, env, u, minorVersion)
	requireOperationsOnce(t, ctx, env)
	// The minor release ships a newer containerd line (lab.containerdFor):
	// every host's daemon changed, and requireClusterAt found the pods
	// serving after it.
	ctrdAfter, err := env.Lab.ContainerdVersions(ctx)
	require.NoError(t, err)
	for host, was := range ctrdBefore {
		require.NotEqual(t, was, ctrdAfter[host], "containerd on %s", host)
	}
	t.Logf("MEASURED containerd before → after the minor: %v → %v", ctrdBefore, ctrdAfter)
	return u
}

// firstAfter is the earliest step or node-step start after t.
func firstAfter(u *phases.Upgrade, t time.Time) time.Time {
	var first time.Time
	consider := func(x time.Time) {
		if x.After(t) && (first.IsZero() || x.Before(first)) {
			first = x
		}
	}
	for _, n := range u.Nodes {
		consider(n.StepStartedAt)
		consider(n.StartedAt)
	}
	for _, s := range u.Steps {
		consider(s.StartedAt)
	}
	return first
}

func upgradeTo(t *testing.T, ctx context.Context, env *Env, v string, observe func(*phases.Upgrade)) *phases.Upgrade {
	t.Helper()
	t0 := time.Now()
	probes := env.StartProbes(ctx)
	started, err := env.StartUpgrade(ctx, v)
	require.NoError(t, err)
	u, err := env.Watch(ctx, started.ID, 40*time.Minute, observe)
	require.NoError(t, err)
	require.NoError(t, env.WaitVersion(ctx, v, time.Minute))
	t.Logf("MEASURED upgrade to %s: %s\n%s", v, time.Since(t0).Round(time.Second), Summary(u))
	requireProbed(t, v, probes.Stop())
	return u
}

// requireProbed logs what the workload probes saw during the upgrade to v
// (the figures the closing notes report; failures are measured, not
// asserted: a drain of a Deployment with 2 replicas and a PDB should cost
// none, and this is where it shows if it does not) and checks each probe
// really ran.
func requireProbed(t *testing.T, v string, reports []lab.ProbeReport) {
	t.Helper()
	require.NotEmpty(t, reports)
	for _, r := range reports {
		t.Logf("MEASURED probe during the upgrade to %s: %s", v, r)
		require.Greater(t, r.Sent, 0, r.Name)
	}
}

// requireOrder checks SPEC §4 from the recorded step history: control-plane
// LBs, then the control plane, then add-ons and the
// LB nodes, then the workers, then the final health checks; inside the
// control plane one node at a time.
func requireOrder(t *testing.T, u *phases.Upgrade) {
	t.Helper()
	step := func(id string) phases.Step {
		s, ok := u.Step(id)
		require.True(t, ok, id)
		require.Equal(t, phases.StateDone, s.State, id)
		return *s
	}
	after := func(later, earlier string) {
		require.False(t, step(later).StartedAt.Before(step(earlier).FinishedAt), "%s started before %s finished", later, earlier)
	}
	after("pool/cp", "pool/cplb")
	after("addons", "pool/cp")
	after("pool/lb", "pool/cp")
	after("pool/workers", "pool/lb")
	for _, s := range u.Steps {
		if s.ID != phases.StepIDHealth {
			after(phases.StepIDHealth, s.ID)
		}
	}
	p, ok := u.Pool("cp")
	require.True(t, ok)
	cps := u.PoolNodes(p)
	for i := 1; i < len(cps); i++ {
		require.False(t, cps[i].StartedAt.Before(cps[i-1].FinishedAt), "%s overlapped %s", cps[i].Node, cps[i-1].Node)
	}
	for _, n := range u.Nodes {
		require.Equal(t, phases.StateDone, n.State, n.Node)
		if migNodeUpgraded(u, &n) {
			require.Equal(t, u.To, n.Version, n.Node)
		}
	}
}

// requireClusterAt checks the real cluster: every Node Ready at v, the
// control-plane static pods on v's images, every host's containerd the
// release's, the add-ons at v (kube-proxy's pods on v's image, Ready on
// every node; CoreDNS rolled out; status.appliedManifestsVersion = v), the
// sample workload serving, by pod and by Service name.
func requireClusterAt(t *testing.T, ctx context.Context, env *Env, u *phases.Upgrade, v string) {
	t.Helper()
	nodes, err := env.Lab.Nodes(ctx)
	require.NoError(t, err)
	count, err := env.NodeCount(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, count, "a Node for every host and instance the cluster's pools list")
	for _, n := range nodes {
		require.True(t, n.Ready, n.Name)
		require.False(t, n.Unschedulable, n.Name)
		require.Equal(t, "v"+v, n.KubeletVersion, n.Name)
	}
	images, err := env.Lab.StaticPodImages(ctx)
	require.NoError(t, err)
	seen := 0
	for pod, image := range images {
		for _, comp := range lab.ControlPlaneComponents {
			if strings.HasPrefix(pod, comp+"-") {
				require.Equal(t, lab.ComponentImage(comp, v), image, pod)
				seen++
			}
		}
	}
	require.Equal(t, 3*len(env.Lab.Config().Topology.WithRole(lab.RoleControlPlane)), seen, "control-plane static pods: %v", images)
	// Every host's containerd, asked through its API, is the release's.
	var rel api.Release
	_, err = env.API().Do(ctx, http.MethodGet, "/v1/releases/"+v, nil, &rel)
	require.NoError(t, err)
	ctrd, err := env.Lab.ContainerdVersions(ctx)
	require.NoError(t, err)
	require.Len(t, ctrd, len(env.Lab.Config().Topology.Hosts))
	for host, got := range ctrd {
		require.Equal(t, rel.Components.Containerd.Version, got, "containerd on %s", host)
	}
	// The add-ons step applied the release's add-ons and they rolled out:
	// kube-proxy at v on every node, Ready; CoreDNS rolled out; the
	// cluster's status says so.
	require.Len(t, rel.Components.Addons, 2, "the release carries its add-ons")
	require.NoError(t, env.Lab.CheckAddons(ctx, v))
	cl, err := env.Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, v, cl.Status.AppliedManifestsVersion)
	addons, ok := u.Step(phases.StepIDAddons)
	require.True(t, ok)
	require.Equal(t, phases.StateDone, addons.State)
	require.NoError(t, env.Lab.CheckServing(ctx))
	require.NoError(t, env.Lab.CheckWorkloadPaths(ctx))
}

// requireOperationsOnce reads every agent's journal: each operation ID
// finished once, and no effect (binary renamed, manifests written, unit
// restarted) happened twice for one ID — also on the host whose agent was
// killed mid-operation.
func requireOperationsOnce(t *testing.T, ctx context.Context, env *Env) {
	t.Helper()
	for _, h := range env.Lab.Config().Topology.Hosts {
		out, err := env.Lab.Exec(ctx, h.Name, "cat", "/var/lib/molt-agent/journal.jsonl")
		require.NoError(t, err, h.Name)
		counts := map[string]map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var r struct {
				ID   string `json:"id"`
				Step string `json:"step"`
			}
			if json.Unmarshal(sc.Bytes(), &r) != nil || strings.HasPrefix(r.ID, "preflight-") {
				continue
			}
			if counts[r.ID] == nil {
				counts[r.ID] = map[string]int{}
			}
			counts[r.ID][r.Step]++
		}
		require.NotEmpty(t, counts, "%s ran no upgrade operation", h.Name)
		for id, steps := range counts {
			require.Equal(t, 1, steps["finished"], "%s: %s finished %d times", h.Name, id, steps["finished"])
			for _, effect := range []string{"renamed", "written", "restarted"} {
				require.LessOrEqual(t, steps[effect], 1, "%s: %s %s %d times", h.Name, id, effect, steps[effect])
			}
		}
	}
}

func buildBinaries(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/molt-coordinator", "./cmd/molt-agent", "./cmd/moltctl")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return dir
}

func moduleRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// requireNothingLeft: no namespace, mount or process of the lab remains.
func requireNothingLeft(t *testing.T, prefix string) {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	require.NoError(t, err)
	require.NotContains(t, string(out), prefix)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), prefix)
}

func dumpLogs(t *testing.T, env *Env, work string) {
	logs, _ := filepath.Glob(filepath.Join(work, "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		t.Logf("--- %s (tail)\n%s", l, b)
	}
	if env == nil || env.Lab == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// What the API server says of every Node: a node that never came back
	// Ready is the most common way an upgrade stops.
	nodes, err := env.Lab.Nodes(ctx)
	t.Logf("--- nodes (err %v)", err)
	for _, n := range nodes {
		t.Logf("    %s ready=%v kubelet=%s unschedulable=%v", n.Name, n.Ready, n.KubeletVersion, n.Unschedulable)
	}
	var hosts []string
	for _, h := range env.Lab.Config().Topology.Hosts {
		out, _ := env.Lab.Exec(ctx, h.Name, "journalctl", "-u", "molt-agent", "--no-pager", "-n", "60")
		t.Logf("--- %s molt-agent\n%s", h.Name, out)
		hosts = append(hosts, h.Name)
	}
	env.Lab.DescribeHosts(ctx, hosts)
	env.Lab.DescribePods(ctx, "kube-system", lab.DemoNamespace)
	logLastUpgrade(ctx, t, env)
}

// logLastUpgrade logs the cluster's last upgrade and what its preflight
// did not pass. It comes last in the dump so that it is among the log's
// last lines, the ones a CI summary keeps.
func logLastUpgrade(ctx context.Context, t *testing.T, env *Env) {
	u, err := env.Upgrade(ctx)
	if err != nil {
		t.Logf("--- last upgrade: %v", err)
		return
	}
	t.Logf("--- last upgrade %s to %s: %s; reason %q; refused by %v", u.ID, u.To, u.State, u.Reason, u.RefusedChecks)
	if u.Preflight == "" {
		return
	}
	var run api.PreflightRun
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/preflight/"+u.Preflight, nil, &run); err != nil || run.Report == nil {
		t.Logf("    preflight %s: no report (%v)", u.Preflight, err)
		return
	}
	for _, r := range run.Report.Results {
		if r.Status != "pass" {
			t.Logf("    preflight %s: %s %s (blocks %v): %s", u.Preflight, r.Check, r.Status, r.Blocks, r.Message)
		}
	}
}

// tlog sends lab and progress output to the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
