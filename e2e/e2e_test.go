//go:build e2e

package e2e

import (
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
	"github.com/stretchr/testify/require"
)

// The e2e's releases: the lab starts at the newer minor (the demo, `make
// demo`, runs the minor from 1.33.13 on the full lab and verifies it: its
// order, the cluster at the release, containerd changed on every host,
// operations once, the MIG pool's surge), and the faults come with the
// patches.
const (
	minorVersion = "1.34.3"
	patchVersion = "1.34.4"
)

// TestUpgradeEndToEnd is molt's whole job on real parts, with faults: the
// full lab topology (7 systemd hosts and a MIG pool of 2 instances, real
// kubelets and containerd, control plane in static pods), three
// coordinator members with Raft on disk, molt-agent on every host. It
// checks that bad upgrades are refused and change nothing, then upgrades
// a patch while killing the Raft leader once and one agent mid-operation,
// under a chaos smoke (chaos_smoke_test.go: four more faults and the
// invariant checks of docs/chaos.md), with the MIG pool blue/green rolled
// back while blue drains; then the patch again, started by the scheduler
// when the maintenance window opens; then a broken release, rolled back.
// The minor upgrade is the demo's (`make demo`, which verifies it with the
// same checks, verify.go).
func TestUpgradeEndToEnd(t *testing.T) {
	testenv.RequireRoot(t)
	builds := cachedir.Build()
	for _, v := range []string{minorVersion, patchVersion} {
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
	lcfg.Version = minorVersion
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
		Releases: []string{minorVersion, patchVersion}, DrainTimeout: 2 * time.Minute,
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
	t.Run("patch with a leader and an agent killed, under the chaos smoke, the MIG pool blue/green rolled back while draining", func(t *testing.T) {
		testPatchWithFaults(t, ctx, env)
	})
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
		bg := driveBlueGreen(ctx, env, api.PoolComplete)
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
	for _, v := range []string{"1.36.0", "1.32.9"} {
		rel := api.Release{Version: v, Components: api.ReleaseComponents{
			Kubelet: api.BinaryArtifact{URL: "/artifacts/none/kubelet", SHA256: strings.Repeat("0", 64)},
		}}
		_, err := c.Do(ctx, http.MethodPut, "/v1/releases/"+v, rel, nil)
		require.NoError(t, err)
	}
	before := snapshot(t, ctx, env)
	_, err := env.StartUpgrade(ctx, "1.36.0")
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
	started, err := env.StartUpgrade(ctx, patchVersion)
	require.NoError(t, err)
	require.Equal(t, api.UpgradePreflight, started.State)
	refused, err := env.Watch(ctx, started.ID, 4*time.Minute, nil)
	require.ErrorContains(t, err, "refused")
	require.Equal(t, api.UpgradeRefused, refused.State)
	require.Contains(t, refused.RefusedChecks, "agents-reporting")
	for _, n := range refused.Nodes {
		require.Equal(t, api.StepPending, n.State, "node %s touched by a refused upgrade", n.Node)
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

// testPatchWithFaults upgrades to the patch under faults. While a
// control-plane node is upgrading the Raft leader is SIGKILLed (and later
// restarted on its data directory); while a worker's agent runs an
// operation, the agent is killed with `systemctl kill -s KILL`; the chaos
// smoke adds its faults; and the MIG pool, blue/green, is rolled back while
// blue drains. The upgrade ends cancelled by the rollback, every other pool
// done in SPEC §4's order (the smoke's order check) and at the patch, blue
// serving at the old release, and every operation took effect once.
func testPatchWithFaults(t *testing.T, ctx context.Context, env *Env) {
	var (
		mu          sync.Mutex
		killedAt    time.Time
		killed      *Member
		failover    time.Duration
		newLeader   time.Duration
		agentKilled string
	)
	observe := func(u *api.Upgrade) {
		mu.Lock()
		defer mu.Unlock()
		if killedAt.IsZero() {
			if n, ok := u.Node("cp-2"); ok && n.State == api.StepRunning {
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
			if n, ok := u.Node("worker-1"); ok && n.State == api.StepRunning {
				if st := n.Step; strings.HasPrefix(st, string(api.NodeStepOperation)+":") {
					// --kill-who=main: the agent is one process, and nspawn
					// hosts cannot signal a whole cgroup (EIO on cgroup.kill).
					_, err := env.Lab.Exec(ctx, "worker-1", "systemctl", "kill", "--kill-who=main", "-s", "KILL", "molt-agent.service")
					require.NoError(t, err)
					agentKilled = st
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
	blue, rollback := startBlueGreenRollback(t, ctx, env)
	smoke := startChaosSmoke(t, ctx, env) // chaos_smoke_test.go: more faults, the invariant checks
	t0 := time.Now()
	probes := env.StartProbes(ctx)
	started, err := env.StartUpgrade(ctx, patchVersion)
	require.NoError(t, err)
	u, err := env.Watch(ctx, started.ID, 40*time.Minute, observe)
	reports := probes.Stop()
	require.ErrorContains(t, err, "ended cancelled", "the MIG pool's rollback cancels the upgrade")
	t.Logf("MEASURED patch under faults, the MIG pool rolled back: %s\n%s%s", time.Since(t0).Round(time.Second), Summary(u), MIGSummary(u))
	requireProbed(t, patchVersion+" (faults; the MIG pool rolled back)", probes, reports)
	smoke.finish(t, ctx, EndHalted)
	require.Equal(t, "1", restarts(), "systemd restarted the killed agent once")
	mu.Lock()
	require.False(t, killedAt.IsZero(), "the leader was never killed")
	require.NotZero(t, failover, "no step after the leader kill")
	require.NotEmpty(t, agentKilled, "worker-1's agent was never killed mid-operation")
	t.Logf("MEASURED leader kill → new leader %s, → next dispatched step %s", newLeader.Round(time.Millisecond), failover.Round(time.Millisecond))
	mu.Unlock()

	requireOperationsOnce(t, ctx, env)
	requireRolledBack(t, ctx, env, u, started.ID, rollback, blue)
	// The rest of the cluster is at the patch; the MIG pool's blue nodes
	// at the release they started at.
	others := map[string]string{}
	for _, n := range blue {
		others[n] = minorVersion
	}
	require.NoError(t, VerifyClusterAt(ctx, env, u, patchVersion, others))
}

// firstAfter is the earliest step or node-step start after t.
func firstAfter(u *api.Upgrade, t time.Time) time.Time {
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

// requireProbed logs what the workload probes saw during the upgrade to v
// (the figures the closing notes report; failures are measured, not
// asserted: a drain of a Deployment with 2 replicas and a PDB should cost
// none, and this is where it shows if it does not) and checks each probe
// really ran.
func requireProbed(t *testing.T, v string, probes *Probes, reports []lab.ProbeReport) {
	t.Helper()
	require.NotEmpty(t, reports)
	for _, r := range reports {
		t.Logf("MEASURED probe during the upgrade to %s: %s", v, probes.Describe(r))
		require.Greater(t, r.Sent, 0, r.Name)
	}
}

// requireOrder: VerifyOrder (verify.go), SPEC §4 from the step history.
func requireOrder(t *testing.T, u *api.Upgrade) {
	t.Helper()
	require.NoError(t, VerifyOrder(u))
}

// requireClusterAt: VerifyClusterAt (verify.go), every host at v.
func requireClusterAt(t *testing.T, ctx context.Context, env *Env, u *api.Upgrade, v string) {
	t.Helper()
	require.NoError(t, VerifyClusterAt(ctx, env, u, v, nil))
}

// requireOperationsOnce: VerifyOperationsOnce (verify.go), also on the
// host whose agent was killed mid-operation.
func requireOperationsOnce(t *testing.T, ctx context.Context, env *Env) {
	t.Helper()
	n, err := VerifyOperationsOnce(ctx, env)
	require.NoError(t, err)
	t.Logf("MEASURED %d operations, each finished once", n)
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
