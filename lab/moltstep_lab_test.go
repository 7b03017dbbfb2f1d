//go:build lab

// The molt step of a real cluster upgrade on the lab. An external test
// package: it brings the lab up with a coordinator and agents through
// package e2e's environment, which imports package lab.
package lab_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/e2e"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/prevrelease"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/lab"
)

// TestMoltStepInLabUpgrade runs the molt step of cluster upgrades on the
// small lab (cplb-1, cp-1, worker-1: three pools; real systemd hosts,
// kubelets and containerd) with one coordinator member of the current
// build. Every host's molt-agent is the one pinned in
// build/previous-agent-release (a build of this repository's history
// that can update itself, stamped with an earlier version; docs/agent.md),
// installed by that commit's install.sh with that commit's unit.
//
//   - A release whose molt-agent exits at start: the first host of the
//     molt step (cplb-1: the control-plane LB pool goes first, one host at
//     a time) gets it, systemd starts it twice, the guard puts the kept
//     agent back, and the step fails with that host's reason before any
//     Kubernetes operation. The other hosts were never offered it: every
//     host runs and reports the previous agent.
//   - The same release naming the current molt-agent: the molt step
//     replaces every host's agent, pool by pool, and the API
//     (status.agents[].agentVersion) and moltctl show the new release.
//     The hosts' operation journals show every UpdateAgent finished
//     before the first Kubernetes operation started, and the first pool
//     step's operations, done by cplb-1's new agent, succeeded. The test
//     stops there: the rest of the upgrade is the demo's and the e2e
//     test's.
//
// The broken release comes first so that one Kubernetes upgrade serves
// both: a molt step that fails leaves no node at the target, so the same
// target can be upgraded to again.
func TestMoltStepInLabUpgrade(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"systemd-nspawn", "ip", "nsenter", "debootstrap", "go", "git"} {
		testenv.RequireBinary(t, b)
	}
	const from, to = "1.34.3", "1.34.4"
	builds := cachedir.Build()
	for _, v := range []string{from, to} {
		testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(builds, v), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(v).Command()+")")
	}
	testenv.RequireFile(t, filepath.Join(builds, "etcd", "v3.6.4", "bin", "etcd"), "etcd (build/k8s/etcd.sh)")
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := repoRoot(t)

	// The previous agent, and the current build stamped as a release is.
	pin, err := prevrelease.Read(root, filepath.Join("build", "previous-agent-release"))
	require.NoError(t, err)
	prev, built, took, err := prevrelease.Build(root, pin, "molt-agent")
	require.NoError(t, err)
	t.Logf("previous agent: molt-agent %s (%s), built %v in %s", pin.Version, pin.Commit[:12], built, took.Round(time.Millisecond))
	script, err := prevrelease.File(root, pin, "systemd/install.sh")
	require.NoError(t, err)
	_, err = prevrelease.File(root, pin, "systemd/molt-agent.service") // beside install.sh, which installs it
	require.NoError(t, err)
	vb, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	current := strings.TrimSpace(string(vb))
	require.NotEqual(t, pin.Version, current)
	t0 := time.Now()
	bin := buildCurrent(t, root, current)
	t.Logf("current build (molt %s): %s", current, time.Since(t0).Round(time.Millisecond))

	lcfg := lab.DefaultConfig()
	lcfg.Topology = lab.SmallTopology()
	lcfg.Version = from
	lcfg.Cache = cachedir.Lab()
	lcfg.BuildCache = builds
	lcfg.StateDir = filepath.Join(t.TempDir(), "lab")
	lcfg.ModuleDir = root
	lcfg.Prefix = "mlabm-"
	lcfg.Log = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lcfg.Out = tlog{t}
	stale, err := lab.New(lcfg)
	require.NoError(t, err)
	require.NoError(t, stale.Down(ctx))
	work := t.TempDir()
	t0 = time.Now()
	env, err := e2e.Up(ctx, e2e.Config{
		Lab: lcfg, BinDir: bin, WorkDir: work, Members: 1, BasePort: 7280,
		Releases: []string{to}, DrainTimeout: time.Minute, Out: tlog{t}, NoPrometheus: true,
		AgentBinary: prev["molt-agent"], AgentInstallScript: script,
	})
	t.Cleanup(func() {
		if env == nil {
			return
		}
		if t.Failed() {
			dumpMoltStep(t, env, work)
		}
		require.NoError(t, env.Down(context.Background()))
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		require.NoError(t, err)
		require.NotContains(t, string(out), lcfg.Prefix, "the lab's namespaces are gone")
	})
	require.NoError(t, err)
	t.Logf("lab up with coordinator and agents: %s", time.Since(t0).Round(time.Millisecond))
	hosts := []string{"cplb-1", "cp-1", "worker-1"}
	waitAgentVersions(t, ctx, env, pin.Version, hosts)
	requireBinaries(t, ctx, env, pin.Version, hosts)

	// The release names a molt-agent that exits at start.
	broken := []byte("#!/bin/sh\necho 'molt-agent 0.2.1: exits at start' >&2\nexit 1\n")
	putAgent(t, ctx, env, work, to, "0.2.1", broken)
	t1 := time.Now()
	up, err := env.StartUpgrade(ctx, to)
	require.NoError(t, err)
	u := waitUpgrade(t, ctx, env, up.ID, "the upgrade ends", func(u *api.Upgrade) bool { return !u.InProgress })
	t.Logf("the broken agent: upgrade %s %s after %s: %s", u.ID, u.State, time.Since(t1).Round(time.Millisecond), u.Reason)
	why := fmt.Sprintf("molt-agent 0.2.1 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent %s was put back", pin.Version)
	require.Equal(t, api.UpgradeFailed, u.State)
	require.Equal(t, "step molt: agent of cplb-1: "+why, u.Reason)
	require.Equal(t, "molt", u.Steps[0].ID)
	require.Equal(t, api.StepFailed, u.Steps[0].State)
	for _, s := range u.Steps[1:] {
		require.Equal(t, api.StepPending, s.State, "step %s never started", s.ID)
	}
	for _, n := range u.Nodes {
		require.Equal(t, api.StepPending, n.State, "node %s untouched", n.Node)
	}
	require.Equal(t, hosts, agentNodes(u), "pool by pool in step order")
	for _, a := range u.Agents {
		require.Equal(t, pin.Version, a.From, a.Node)
		if a.Node == "cplb-1" {
			require.Equal(t, api.StepFailed, a.State)
			require.Equal(t, why, a.Error)
			require.Equal(t, pin.Version, a.Version, "the agent that reported runs the kept release")
			continue
		}
		require.Equal(t, api.StepPending, a.State, "%s was never offered the broken agent", a.Node)
	}
	cplb, err := env.Lab.Exec(ctx, "cplb-1", "journalctl", "--no-pager", "-u", "molt-agent.service")
	require.NoError(t, err)
	require.Contains(t, string(cplb), "molt-agent 0.2.1: exits at start", "the broken release did start on cplb-1")
	require.Contains(t, string(cplb), "molt-agent guard: molt-agent 0.2.1 did not come up", "the guard put the kept agent back")
	waitAgentVersions(t, ctx, env, pin.Version, hosts)
	requireBinaries(t, ctx, env, pin.Version, hosts)
	for _, h := range hosts {
		for _, op := range readJournal(t, ctx, env, h) {
			if strings.HasPrefix(op.id, u.ID+"/") {
				require.Equal(t, api.OpUpdateAgent, op.kind, "%s: only the molt step's operation reached a host: %s", h, op.id)
			}
		}
	}

	// The release names the current molt-agent: the same target again.
	cur, err := os.ReadFile(filepath.Join(bin, "molt-agent"))
	require.NoError(t, err)
	putAgent(t, ctx, env, work, to, current, cur)
	t2 := time.Now()
	up, err = env.StartUpgrade(ctx, to)
	require.NoError(t, err)
	firstPool := ""
	u = waitUpgrade(t, ctx, env, up.ID, "the molt step done and the first pool step done", func(u *api.Upgrade) bool {
		if !u.InProgress {
			return true
		}
		for _, s := range u.Steps {
			if s.Kind == api.StepKindPool {
				firstPool = s.ID
				return s.State == api.StepDone
			}
		}
		return false
	})
	t.Logf("the current agent: molt step and pool step %s of upgrade %s done after %s", firstPool, u.ID, time.Since(t2).Round(time.Millisecond))
	require.Equal(t, api.UpgradeRunning, u.State, u.Reason)
	require.Equal(t, 4, u.Options.StepLayout)
	require.Equal(t, current, u.Options.AgentVersion)
	require.Equal(t, "molt", u.Steps[0].ID)
	require.Equal(t, api.StepDone, u.Steps[0].State)
	require.Equal(t, hosts, agentNodes(u), "pool by pool in step order")
	for _, a := range u.Agents {
		require.Equal(t, api.StepDone, a.State, a.Node)
		require.Equal(t, pin.Version, a.From, a.Node)
		require.Equal(t, current, a.Version, a.Node)
		require.False(t, a.FinishedAt.After(u.Steps[0].FinishedAt), a.Node)
	}
	waitAgentVersions(t, ctx, env, current, hosts)
	requireBinaries(t, ctx, env, current, hosts)
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", env.Lab.Network().LabNS(),
		filepath.Join(bin, "moltctl"), "--config", env.MoltctlConfig(), "cluster", "get", e2e.ClusterName).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("moltctl cluster get %s:\n%s", e2e.ClusterName, out)
	for _, h := range hosts {
		require.Regexp(t, `(?m)^\s+agent `+h+`\s+healthy\s+molt `+strings.ReplaceAll(current, ".", `\.`)+` `, string(out))
	}

	// The order, from the hosts' journals: on each host its UpdateAgent
	// comes before any Kubernetes operation (the journal's order), and
	// across hosts the last UpdateAgent finished before the first
	// Kubernetes operation started (the hosts share this machine's clock).
	var lastAgent, firstKube time.Time
	firstKubeOp, cplbKube := "", 0
	for _, h := range hosts {
		ops := readJournal(t, ctx, env, h)
		seenAgent := false
		for _, op := range ops {
			if !strings.HasPrefix(op.id, u.ID+"/") {
				continue
			}
			if op.kind == api.OpUpdateAgent {
				require.NotNil(t, op.result, "%s: %s finished", h, op.id)
				require.Equal(t, api.OpSucceeded, op.result.State, "%s: %s", h, op.id)
				require.Equal(t, current, op.result.Details[api.DetailAgentVersion], h)
				seenAgent = true
				if op.result.FinishedAt.After(lastAgent) {
					lastAgent = op.result.FinishedAt
				}
				continue
			}
			require.True(t, seenAgent, "%s: Kubernetes operation %s (%s) before the host's UpdateAgent", h, op.id, op.kind)
			if firstKube.IsZero() || op.started.Before(firstKube) {
				firstKube, firstKubeOp = op.started, h+" "+op.id+" ("+string(op.kind)+")"
			}
			if h == "cplb-1" { // the first pool's, done: by the new agent
				require.NotNil(t, op.result, "%s: %s (%s) finished", h, op.id, op.kind)
				require.Equal(t, api.OpSucceeded, op.result.State, "%s: %s (%s): %s", h, op.id, op.kind, op.result.Message)
				cplbKube++
			}
		}
		require.True(t, seenAgent, "%s's agent was replaced", h)
	}
	require.False(t, firstKube.IsZero(), "a Kubernetes operation ran")
	require.True(t, lastAgent.Before(firstKube), "last UpdateAgent finished %s, first Kubernetes operation %s started %s",
		lastAgent.Format(time.RFC3339Nano), firstKubeOp, firstKube.Format(time.RFC3339Nano))
	require.Positive(t, cplbKube, "cplb-1's new agent ran its pool step's Kubernetes operations")
	t.Logf("last UpdateAgent finished %s before the first Kubernetes operation (%s) started",
		firstKube.Sub(lastAgent).Round(time.Millisecond), firstKubeOp)
	t.Logf("test body: %s", time.Since(began).Round(time.Millisecond))
}

// repoRoot is the module's root: this file's directory's parent.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// buildCurrent builds this tree's molt-coordinator, moltctl and molt-agent
// stamped with version, as a release build stamps them (the agent static:
// it runs in the lab's hosts), into a temporary directory.
func buildCurrent(t *testing.T, root, version string) string {
	t.Helper()
	dir := t.TempDir()
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	ldflags := fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s", prevrelease.VersionPkg, version, prevrelease.VersionPkg, strings.TrimSpace(string(head)))
	for _, b := range []struct {
		env  string
		pkgs []string
	}{{"CGO_ENABLED=0", []string{"./cmd/molt-agent"}}, {"", []string{"./cmd/molt-coordinator", "./cmd/moltctl"}}} {
		cmd := exec.Command("go", append([]string{"build", "-ldflags", ldflags, "-o", dir + "/"}, b.pkgs...)...)
		cmd.Dir = root
		if b.env != "" {
			cmd.Env = append(os.Environ(), b.env)
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", strings.Join(b.pkgs, " "), out)
	}
	return dir
}

// putAgent publishes molt-agent version (its bytes) at the coordinator's
// /artifacts/ and registers release rel again, naming it.
func putAgent(t *testing.T, ctx context.Context, env *e2e.Env, work, rel, version string, b []byte) {
	t.Helper()
	name := "molt-agent-" + version
	require.NoError(t, os.WriteFile(filepath.Join(work, "artifacts", name), b, 0o755))
	sum := sha256.Sum256(b)
	var r api.Release
	_, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+rel, nil, &r)
	require.NoError(t, err)
	r.Agent = &api.AgentArtifact{Version: version, URL: "/artifacts/" + name, SHA256: hex.EncodeToString(sum[:])}
	_, err = env.API().Do(ctx, http.MethodPut, "/v1/releases/"+rel, r, nil)
	require.NoError(t, err)
}

// waitUpgrade polls upgrade id until done says so.
func waitUpgrade(t *testing.T, ctx context.Context, env *e2e.Env, id, what string, done func(*api.Upgrade) bool) *api.Upgrade {
	t.Helper()
	var last *api.Upgrade
	require.Eventually(t, func() bool {
		u, err := env.Upgrade(ctx)
		if err != nil || u.ID != id {
			return false
		}
		last = u
		return done(u)
	}, 5*time.Minute, 250*time.Millisecond, "%s (last seen: %+v)", what, last)
	return last
}

// agentNodes are the molt step's hosts in its order.
func agentNodes(u *api.Upgrade) []string {
	var out []string
	for _, a := range u.Agents {
		out = append(out, a.Node)
	}
	return out
}

// waitAgentVersions waits until the cluster's status shows every host's
// agent at version (status.agents[].agentVersion: what it reports).
func waitAgentVersions(t *testing.T, ctx context.Context, env *e2e.Env, version string, hosts []string) {
	t.Helper()
	var got map[string]string
	require.Eventually(t, func() bool {
		c, err := env.Cluster(ctx)
		if err != nil {
			return false
		}
		got = map[string]string{}
		for _, a := range c.Status.Agents {
			got[a.Node] = a.AgentVersion
		}
		for _, h := range hosts {
			if got[h] != version {
				return false
			}
		}
		return true
	}, 2*time.Minute, 250*time.Millisecond, "every agent reports molt-agent %s: %v", version, got)
}

// requireBinaries: every host's unit runs the molt-agent binary of version
// (what install.sh installed, or what the molt step put in its place).
func requireBinaries(t *testing.T, ctx context.Context, env *e2e.Env, version string, hosts []string) {
	t.Helper()
	for _, h := range hosts {
		out, err := env.Lab.Exec(ctx, h, "/usr/local/bin/molt-agent", "--version")
		require.NoError(t, err, "%s: %s", h, out)
		require.Contains(t, string(out), "molt "+version+" ", h)
		active, err := env.Lab.Exec(ctx, h, "systemctl", "is-active", "molt-agent.service")
		require.NoError(t, err, "%s: %s", h, active)
	}
}

// journalOp is one operation of a host's agent journal
// (/var/lib/molt-agent/journal.jsonl, agent/journal.go), in the order the
// journal first names them.
type journalOp struct {
	id      string
	kind    api.OperationKind
	started time.Time
	result  *api.OperationResult
}

func readJournal(t *testing.T, ctx context.Context, env *e2e.Env, host string) []journalOp {
	t.Helper()
	b, err := env.Lab.Exec(ctx, host, "cat", "/var/lib/molt-agent/journal.jsonl")
	require.NoError(t, err, host)
	var ops []journalOp
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r struct {
			Time      time.Time            `json:"time"`
			ID        string               `json:"id"`
			Operation *api.Operation       `json:"operation"`
			Result    *api.OperationResult `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &r), "%s: %s", host, line)
		i := slices.IndexFunc(ops, func(o journalOp) bool { return o.id == r.ID })
		if i < 0 {
			ops = append(ops, journalOp{id: r.ID, started: r.Time})
			i = len(ops) - 1
		}
		if r.Operation != nil {
			ops[i].kind = r.Operation.Kind
		}
		if r.Result != nil {
			ops[i].result = r.Result
		}
	}
	return ops
}

// dumpMoltStep logs what a failed run needs: the member's log and each
// host's agent journal.
func dumpMoltStep(t *testing.T, env *e2e.Env, work string) {
	for _, m := range env.Members {
		b, _ := os.ReadFile(m.LogPath)
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		t.Logf("member %s log (tail):\n%s", m.ID, b)
	}
	if u, err := env.Upgrade(context.Background()); err == nil {
		j, _ := json.MarshalIndent(u, "", "  ")
		t.Logf("upgrade:\n%s", j)
	}
	for _, h := range []string{"cplb-1", "cp-1", "worker-1"} {
		out, _ := env.Lab.Exec(context.Background(), h, "sh", "-c",
			"journalctl --no-pager -n 80 -u molt-agent.service; tail -c 4000 /var/lib/molt-agent/journal.jsonl; ls -la /usr/local/bin /var/lib/molt-agent")
		t.Logf("%s:\n%s", h, out)
	}
}

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
