package statemachine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// registrationSim is a machine with releases 1.33.4 and 1.34.2 and
// channel regular targeting 1.34.2, at a Monday noon.
func registrationSim(t *testing.T) (*yearSim, phases.ClusterSpec) {
	t.Helper()
	s := &yearSim{t: t, m: New(), now: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC), clusters: map[string]*yearCluster{}}
	s.must(PutReleaseCmd{Release: yearRelease("1.33.4", time.Date(2027, 9, 1, 0, 0, 0, 0, time.UTC)), Now: s.now})
	s.must(PutReleaseCmd{Release: yearRelease("1.34.2", time.Time{}), Now: s.now})
	s.must(PutChannelCmd{Channel: "regular", AutoUpgradeTarget: phases.MustParseVersion("1.34.2"), Now: s.now})
	spec := phases.ClusterSpec{Name: "shop", Kind: phases.KindStandalone, Channel: "regular", Version: phases.MustParseVersion("1.33.4"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "shop-cp"}}}}}
	return s, spec
}

func (s *yearSim) status(cluster string) schedule.Status {
	s.t.Helper()
	st, err := s.m.UpgradeStatus(cluster, s.now, schedule.Limits{})
	require.NoError(s.t, err)
	return st
}

// TestRegistrationCarriesItsPolicy: a policy given with the registration
// is stored by the same entry and rules the first scheduler pass (a
// cluster registered during a no_upgrades exclusion starts nothing), and
// it gets no hold; the hold the leader offered is ignored.
func TestRegistrationCarriesItsPolicy(t *testing.T) {
	s, spec := registrationSim(t)
	freeze := maintenance.Policy{Exclusions: []maintenance.Exclusion{{Name: "sale", Start: s.now.Add(-time.Hour), End: s.now.Add(5 * 24 * time.Hour)}}}
	s.must(PutClusterCmd{Spec: spec, Policy: &freeze, HoldUntil: s.now.Add(24 * time.Hour), Now: s.now})

	r, err := s.m.Cluster("shop")
	require.NoError(t, err)
	require.NotNil(t, r.Policy)
	require.Equal(t, maintenance.ScopeNoUpgrades, r.Policy.Exclusions[0].Scope, "stored in its normal form")
	require.True(t, r.Auto.HeldUntil.IsZero(), "a registration with a policy is not held")
	p := schedule.Evaluate(s.m.SchedulerFleet(schedule.Limits{}), s.now)
	require.Empty(t, p.Starts())
	st := s.status("shop")
	require.Equal(t, schedule.StateBlockedExclusion, st.State, st.Message)
	require.Equal(t, "sale", st.BlockedBy[0].Name)
	require.Equal(t, s.now.Add(5*24*time.Hour), st.NextOpportunity)

	// Registering again without a policy keeps it and sets no hold;
	// with one, replaces it.
	s.must(PutClusterCmd{Spec: spec, HoldUntil: s.now.Add(24 * time.Hour), Now: s.now})
	r, _ = s.m.Cluster("shop")
	require.Len(t, r.Policy.Exclusions, 1)
	require.True(t, r.Auto.HeldUntil.IsZero(), "only a new cluster is held")
	s.must(PutClusterCmd{Spec: spec, Policy: &maintenance.Policy{}, Now: s.now})
	r, _ = s.m.Cluster("shop")
	require.Empty(t, r.Policy.Exclusions)
	require.Equal(t, schedule.StateStarting, s.status("shop").State)
}

// TestRegistrationHoldsAClusterWithoutPolicy: registered without a
// policy, a cluster whose channel's target is ahead is held until the
// hold the entry carries; a start decided anyway is refused as stale; an
// upgrade an operator starts (automatic or not) is not held; an empty
// policy ("any time") ends the hold.
func TestRegistrationHoldsAClusterWithoutPolicy(t *testing.T) {
	s, spec := registrationSim(t)
	until := s.now.Add(24 * time.Hour)
	s.must(PutClusterCmd{Spec: spec, HoldUntil: until, Now: s.now})

	require.Empty(t, schedule.Evaluate(s.m.SchedulerFleet(schedule.Limits{}), s.now).Starts())
	st := s.status("shop")
	require.Equal(t, schedule.StateBlockedByRule, st.State)
	require.Equal(t, schedule.RuleRegistrationHold, st.BlockedBy[0].Name)
	require.Equal(t, until, st.BlockedBy[0].Until)
	require.Equal(t, until, st.NextOpportunity)

	start := AutoStartCmd{Cluster: "shop", To: phases.MustParseVersion("1.34.2"), Kind: maintenance.KindMinor, Reason: "r",
		Preflight: &PreflightRun{ID: "shop-1", Cluster: "shop", Target: phases.MustParseVersion("1.34.2"), CreatedAt: s.now, Deadline: s.now.Add(time.Minute)}, Now: s.now}
	_, err := s.apply(start)
	require.ErrorIs(t, err, phases.ErrStale, "held")

	// An upgrade an operator asks for is not held.
	edge := spec
	edge.Name, edge.Pools = "edge", []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "edge-cp"}}}}
	s.must(PutClusterCmd{Spec: edge, HoldUntil: until, Now: s.now})
	s.must(StartUpgradeCmd{Cluster: "edge", To: phases.MustParseVersion("1.34.2"),
		Options: phases.Options{Automatic: true, StepLayout: phases.CurrentStepLayout}, Now: s.now})
	require.Equal(t, schedule.StateRunning, s.status("edge").State)

	s.must(SetPolicyCmd{Cluster: "shop", Policy: maintenance.Policy{}, Now: s.now})
	r, _ := s.m.Cluster("shop")
	require.True(t, r.Auto.HeldUntil.IsZero(), "any policy ends the hold")
	require.Equal(t, schedule.StateStarting, s.status("shop").State)
	s.must(start)
}

// TestRegistrationWithABadPolicyStoresNothing: an invalid policy refuses
// the whole entry, naming its rule: the cluster is not registered (and an
// existing one keeps its spec and policy).
func TestRegistrationWithABadPolicyStoresNothing(t *testing.T) {
	s, spec := registrationSim(t)
	bad := maintenance.Policy{Exclusions: []maintenance.Exclusion{{Name: "x", Start: s.now.Add(time.Hour), End: s.now}}}
	_, err := s.apply(PutClusterCmd{Spec: spec, Policy: &bad, Now: s.now})
	require.ErrorIs(t, err, ErrPolicyInvalid)
	var re *RuleError
	require.True(t, errors.As(err, &re))
	require.Equal(t, maintenance.RuleExclusionEndBeforeStart, re.Rule)
	_, err = s.m.Cluster("shop")
	require.ErrorIs(t, err, ErrNotFound, "nothing stored")

	// Judged on the spec it comes with: an exclusion past the end of
	// support of the minor it runs.
	late := maintenance.Policy{Exclusions: []maintenance.Exclusion{{Name: "late", Start: time.Date(2027, 8, 30, 0, 0, 0, 0, time.UTC),
		End: time.Date(2027, 9, 2, 0, 0, 0, 0, time.UTC)}}}
	_, err = s.apply(PutClusterCmd{Spec: spec, Policy: &late, Now: s.now})
	require.True(t, errors.As(err, &re))
	require.Equal(t, maintenance.RuleExclusionAfterEndOfSupport, re.Rule)

	s.must(PutClusterCmd{Spec: spec, Now: s.now})
	moved := spec
	moved.Channel = "stable"
	_, err = s.apply(PutClusterCmd{Spec: moved, Policy: &bad, Now: s.now})
	require.ErrorIs(t, err, ErrPolicyInvalid)
	r, _ := s.m.Cluster("shop")
	require.Equal(t, "regular", r.Spec.Channel, "the spec is not changed either")
	require.Nil(t, r.Policy)
}
