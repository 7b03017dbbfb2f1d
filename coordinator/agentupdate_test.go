package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// agentRelease is release v naming molt-agent agent.
func agentRelease(v, agent string) api.Release {
	r := release(v)
	r.Agent = &api.AgentArtifact{Version: agent, URL: "/artifacts/molt-agent-" + agent, SHA256: sum}
	return r
}

// moltLab is one member on a manual clock with cluster lab at 1.33.6 and
// release 1.34.4 naming molt-agent 0.2.0, and simulated agents that
// answer as decided by edit.
func moltLab(t *testing.T, edit func(*simAgent)) (*member, *testCluster, *clock.Manual, map[string]*simAgent) {
	ops := newFakeOps()
	clk := clock.NewManual(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clk)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", agentRelease("1.34.4", "0.2.0"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	agents := map[string]*simAgent{}
	for i, n := range nodeNames(spec) {
		a := newSimAgent("lab", n)
		if edit != nil {
			edit(a)
		}
		agents[n] = a
		go a.run(t.Context(), tc, i)
	}
	waitAgents(t, tc, "lab", 7)
	return m, tc, clk, agents
}

// An upgrade to a release that names another molt-agent starts with the
// molt step: every host's agent is replaced, pool by pool in step order,
// before any Kubernetes operation reaches a host, and each node's status
// shows the release its agent now runs.
func TestMoltStepUpdatesAgentsBeforeKubernetes(t *testing.T) {
	var mu sync.Mutex
	var order []string // operation kinds and nodes, in the order hosts ran them
	m, _, _, _ := moltLab(t, func(a *simAgent) {
		a.onExecute = func(node string, op api.Operation) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, string(op.Kind)+" "+node)
		}
	})
	_, err := m.client().Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "upgrade done", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeDone
	})
	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, phases.CurrentStepLayout, u.Options.StepLayout)
	require.Equal(t, phases.StepIDMolt, u.Steps[0].ID)
	require.Equal(t, phases.StateDone, u.Steps[0].State)
	require.Len(t, u.Agents, 7)
	for _, a := range u.Agents {
		require.Equal(t, phases.StateDone, a.State, a.Node)
		require.Equal(t, "0.2.0", a.Version)
		require.Equal(t, "0.2.0-dev", a.From)
	}
	mu.Lock()
	defer mu.Unlock()
	firstKube := slices.IndexFunc(order, func(s string) bool { return !strings.HasPrefix(s, string(api.OpUpdateAgent)) })
	require.Equal(t, 7, firstKube, "every agent first: %v", order)
	var hosts []string
	for _, s := range order[:7] {
		hosts = append(hosts, strings.TrimPrefix(s, string(api.OpUpdateAgent)+" "))
	}
	require.Equal(t, []string{"cplb-1", "cp-1", "cp-2", "cp-3", "lb-1", "worker-1", "worker-2"}, hosts, "pool by pool in step order")
	eventually(t, "nodes show their agent's new release", func() bool {
		c, err := m.c.Cluster("lab")
		if err != nil {
			return false
		}
		for _, a := range c.Status.Agents {
			if a.AgentVersion != "0.2.0" {
				return false
			}
		}
		return len(c.Status.Agents) == 7
	})
}

// A host whose new agent does not report within the agent timeout fails
// the molt step with that reason, and the upgrade with it, before any
// Kubernetes operation: the deadline is the leader's clock's.
func TestMoltStepDeadline(t *testing.T) {
	m, tc, clk, agents := moltLab(t, func(a *simAgent) {
		a.silent = func(node string, op api.Operation) bool { return node == "cplb-1" && op.UpdateAgent != nil }
	})
	_, err := m.client().Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "cplb-1's agent replacement running", func() bool {
		u, err := m.c.Upgrade("lab")
		if err != nil || len(u.Agents) == 0 {
			return false
		}
		a, _ := u.Agent("cplb-1")
		return a.State == phases.StateRunning
	})
	u, _ := m.c.Upgrade("lab")
	require.Equal(t, phases.UpgradeRunning, u.State, "not failed before the deadline")
	clk.Advance(coordinator.DefaultAgentTimeout)
	eventually(t, "upgrade failed", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeFailed
	})
	u, err = m.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, "step molt: agent of cplb-1: molt-agent 0.2.0 did not report within 5m0s (agent timeout)", u.Reason)
	for _, a := range u.Agents[1:] {
		require.Equal(t, phases.StatePending, a.State, "%s never started", a.Node)
	}
	for _, a := range agents {
		for id := range a.executions() {
			require.Contains(t, id, "/molt/", "no Kubernetes operation reached %s", a.node)
		}
	}
	require.False(t, tc.ops.called("cordon"), "nothing was cordoned")
}

// A host whose agent reports that the new release was rolled back fails
// the molt step with the agent's reason.
func TestMoltStepFailureReason(t *testing.T) {
	const why = "molt-agent 0.2.0 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent 0.2.0-dev was put back"
	m, _, _, _ := moltLab(t, func(a *simAgent) {
		a.fail = func(node string, op api.Operation) string {
			if node == "cp-2" && op.UpdateAgent != nil {
				return why
			}
			return ""
		}
	})
	_, err := m.client().Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "upgrade failed", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeFailed
	})
	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, "step molt: agent of cp-2: "+why, u.Reason)
	a, _ := u.Agent("cp-2")
	require.Equal(t, "0.2.0-dev", a.Version, "the agent that reported runs the kept release")
	done, _ := u.Agent("cp-1")
	require.Equal(t, phases.StateDone, done.State)
	pending, _ := u.Agent("cp-3")
	require.Equal(t, phases.StatePending, pending.State)
}

// The skew policy: an agent of a release this coordinator does not serve
// is refused at registration, naming the rule; served ones register.
func TestAgentOutsideTheSkewPolicyIsRefused(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.waitLeader()
	put(t, m.client(), "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	for _, v := range []string{"0.3.0", "0.0.9", "1.2.0"} {
		_, err := m.c.Register(context.Background(), api.RegisterRequest{Cluster: "lab", Node: "cp-1", AgentVersion: v})
		var re *coordinator.RuleError
		require.True(t, errors.As(err, &re), "%s: %v", v, err)
		require.Equal(t, coordinator.RuleAgentVersionSkew, re.Rule, v)
		require.Contains(t, re.Detail, "molt-agent 0.1.x to 0.2.x", v)
	}
	for _, v := range []string{"", "0.1.0", "0.2.0", "0.2.7-rc.1"} {
		_, err := m.c.Register(context.Background(), api.RegisterRequest{Cluster: "lab", Node: "cp-1", AgentVersion: v})
		require.NoError(t, err, v)
	}
}
