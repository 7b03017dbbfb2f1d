package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// What a member says it reads comes from its binary: its release, the
// newest numbers its command registries hold, the snapshot formats and
// step layout it knows. Nothing is a hand-kept copy.
func TestCapabilitiesComeFromTheBinary(t *testing.T) {
	caps := coordinator.BinaryCapabilities()
	require.Equal(t, version.Version, caps.Version)
	var newest command.Type
	for typ := range statemachine.New().Handlers() {
		newest = max(newest, typ)
	}
	require.Equal(t, int(newest), caps.Command, "the newest registered coordinator command")
	require.Equal(t, int(raftstore.NewestInternalCommand()), caps.RaftCommand)
	require.Equal(t, 2, caps.RaftCommand, "set-member and remove-member")
	require.Equal(t, phases.CurrentStepLayout, caps.StepLayout)
	require.Equal(t, 1, caps.StateSnapshot)
	require.Equal(t, 1, caps.RaftSnapshot)
}

// The Baseline — what a member that says nothing (molt 0.1.0) is taken to
// read — is what 0.1.0 registered: every command number that names
// 0.1.0 as its release, and none after it.
func TestBaselineIsWhat010Reads(t *testing.T) {
	var newest command.Type
	for typ := range statemachine.New().Handlers() {
		if v, _ := statemachine.CommandSince(typ); v == command.BaselineVersion {
			newest = max(newest, typ)
		}
	}
	require.Equal(t, int(newest), coordinator.Baseline.Command)
	require.Equal(t, command.BaselineVersion, coordinator.Baseline.Version)
	require.Equal(t, phases.StepLayoutGates, coordinator.Baseline.StepLayout, "0.1.0's newest step layout (commit bb51d81)")
}

// Every member learns every member's release and capabilities: the
// leader asks each member, then records them in the replicated
// membership, which every member serves in GET /v1/members.
func TestMembersLearnEachOthersCapabilities(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	want := coordinator.BinaryCapabilities()
	for _, m := range tc.alive() {
		var ms []api.Member
		eventually(t, "member list of "+m.id+" with everyone's release", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ms = nil
			if _, err := m.client().Do(ctx, http.MethodGet, "/v1/members", nil, &ms); err != nil {
				return false
			}
			return len(ms) == 3 && !slices.ContainsFunc(ms, func(x api.Member) bool { return x.Capabilities == nil })
		})
		for _, x := range ms {
			require.Equal(t, version.Version, x.Version, "%s's view of %s", m.id, x.ID)
			require.Equal(t, want, *x.Capabilities, "%s's view of %s", m.id, x.ID)
			require.Empty(t, x.Reason)
			switch {
			case x.ID == m.id:
				require.Equal(t, "self", x.CapabilitiesFrom)
			case m.c.IsLeader():
				require.Equal(t, "member", x.CapabilitiesFrom, "the leader asked %s", x.ID)
			default:
				require.Equal(t, "record", x.CapabilitiesFrom, "%s read %s's from the replicated record", m.id, x.ID)
			}
		}
		require.Len(t, m.c.MemberRecords(), 3)
	}
}

// The gate: while a member reads only what molt 0.1.0 reads, the leader
// refuses a command of 0.2.0 (409 member-cannot-read, naming the member
// and what it lacks) and writes nothing; once that member says it reads
// the command, the same command is written. The record of members'
// capabilities is such a command: it names the old member only after
// its upgrade.
func TestGateWaitsForEveryMemberToReadACommand(t *testing.T) {
	tc := newTestCluster(t, 2, nil)
	old := coordinator.Baseline
	var caps atomic.Pointer[api.MemberCapabilities]
	caps.Store(&old)
	m3 := startMember(t, "m3", t.TempDir(), false, nil, "", func(cfg *coordinator.Config) {
		cfg.Capabilities = func() api.MemberCapabilities { return *caps.Load() }
	})
	tc.replace(append(tc.list(), m3))
	eventually(t, "join m3", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := tc.waitLeader().client().Do(ctx, http.MethodPost, "/v1/members", api.JoinRequest{ID: m3.id, RaftAddr: m3.c.Store().RaftAddr(), HTTPAddr: m3.addr}, nil)
		return err == nil
	})
	var l *member
	eventually(t, "the leader heard m3 runs 0.1.0", func() bool {
		l = tc.waitLeader()
		ms, err := l.c.Members()
		if err != nil {
			return false
		}
		i := slices.IndexFunc(ms, func(x api.Member) bool { return x.ID == "m3" })
		return i >= 0 && ms[i].Version == "0.1.0" && ms[i].CapabilitiesFrom == "member"
	})

	cmd := statemachine.SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": coordinator.BinaryCapabilities()}, Now: time.Now().UTC()}
	before := l.mark()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := l.c.ApplyForTest(ctx, cmd)
	var rule *coordinator.RuleError
	require.ErrorAs(t, err, &rule)
	require.Equal(t, coordinator.RuleMemberCannotRead, rule.Rule)
	require.True(t, errors.Is(err, coordinator.ErrConflict), "409")
	require.Contains(t, rule.Detail, "member m3 runs molt 0.1.0")
	require.Contains(t, rule.Detail, "needs molt ≥ 0.2.0")
	require.Equal(t, before, l.mark(), "nothing written")
	require.NotContains(t, l.c.MemberRecords(), "m3", "the record waits for m3")

	// m3 is upgraded: it says what this binary reads.
	upgraded := coordinator.BinaryCapabilities()
	caps.Store(&upgraded)
	l.c.AskMembersNow()
	eventually(t, "the leader recorded m3's capabilities", func() bool {
		for _, m := range tc.alive() {
			if _, ok := m.c.MemberRecords()["m3"]; !ok {
				return false
			}
		}
		return true
	})
	_, err = tc.waitLeader().c.ApplyForTest(ctx, cmd)
	require.NoError(t, err, "every member reads it now")
}

// Every agent says which molt it runs (its registration and beats), and
// a cluster's status shows it per node.
func TestAgentsVersionsShownPerNode(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	cl := tc.waitLeader().client()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	startAgents(ctx, tc, "lab", nodeNames(spec), true)
	eventually(t, "every node's agent version", func() bool {
		var got api.Cluster
		if _, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &got); err != nil {
			return false
		}
		if len(got.Status.Agents) != len(nodeNames(spec)) {
			return false
		}
		for _, a := range got.Status.Agents {
			if a.AgentVersion != version.Version {
				return false
			}
		}
		return true
	})
}

// A member that does not answer the leader's question (a release before
// 0.2.0 has no such route: 404) is shown as unknown, 0.1.0 assumed, and
// the gate refuses what 0.1.0 cannot read, saying the member did not say
// which molt it runs; the record of members waits for it.
func TestMemberThatDoesNotAnswerIsAssumed010(t *testing.T) {
	var silent atomic.Pointer[string]
	none := ""
	silent.Store(&none)
	tc := newTestCluster(t, 2, nil, func(cfg *coordinator.Config) {
		ask := cfg.ProbeMember
		cfg.ProbeMember = func(ctx context.Context, addr string) (api.MemberSelf, error) {
			if addr == *silent.Load() {
				return api.MemberSelf{}, errors.New("capabilities of member at " + addr + ": 404 Not Found")
			}
			return ask(ctx, addr)
		}
	})
	m3 := startMember(t, "m3", t.TempDir(), false, nil, "")
	silent.Store(&m3.addr)
	tc.replace(append(tc.list(), m3))
	eventually(t, "join m3", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := tc.waitLeader().client().Do(ctx, http.MethodPost, "/v1/members", api.JoinRequest{ID: m3.id, RaftAddr: m3.c.Store().RaftAddr(), HTTPAddr: m3.addr}, nil)
		return err == nil
	})
	var l *member
	var got api.Member
	eventually(t, "the leader lists m3 as unknown", func() bool {
		l = tc.waitLeader()
		l.c.AskMembersNow()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var ms []api.Member
		if _, err := l.client().Do(ctx, http.MethodGet, "/v1/members", nil, &ms); err != nil {
			return false
		}
		i := slices.IndexFunc(ms, func(x api.Member) bool { return x.ID == "m3" })
		if i < 0 {
			return false
		}
		got = ms[i]
		return got.CapabilitiesFrom == "assumed"
	})
	require.Empty(t, got.Version, "unknown, not a guess")
	require.Nil(t, got.Capabilities)
	require.Empty(t, got.Reason)

	cmd := statemachine.SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": coordinator.BinaryCapabilities()}, Now: time.Now().UTC()}
	before := l.mark()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := l.c.ApplyForTest(ctx, cmd)
	var rule *coordinator.RuleError
	require.ErrorAs(t, err, &rule)
	require.Equal(t, coordinator.RuleMemberCannotRead, rule.Rule)
	require.Contains(t, rule.Detail, "member m3 did not say which molt it runs (0.1.0 assumed)")
	require.Equal(t, before, l.mark(), "nothing written")
	require.NotContains(t, l.c.MemberRecords(), "m3", "the record waits for m3")
}
