package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func threeMembers() []api.Member {
	return []api.Member{
		{ID: "m1", HTTPAddr: "10.0.0.1:7080", Voter: true, Leader: true},
		{ID: "m2", HTTPAddr: "10.0.0.2:7080", Voter: true},
		{ID: "m3", HTTPAddr: "10.0.0.3:7080", Voter: true},
	}
}

// Every member up, ready, naming the same leader and within the bound of
// its index: safe, and one of three voters may be down.
func TestMemberCheckSafeWhenAllCaughtUp(t *testing.T) {
	res := decideCheck(threeMembers(), map[string]memberProbe{
		"m1": {Applied: 500, Leader: "m1"},
		"m2": {Applied: 499, Leader: "m1"},
		"m3": {Applied: 420, Leader: "m1"},
	}, 100)
	require.True(t, res.Safe, "%v", res.Reasons)
	require.Equal(t, "m1", res.Leader)
	require.Equal(t, uint64(500), res.Index)
	require.Equal(t, 3, res.Voters)
	require.Equal(t, 2, res.Quorum)
	require.Equal(t, 1, res.Spare)
	var b bytes.Buffer
	renderCheck(&b, res)
	require.Contains(t, b.String(), "3 voters, quorum 2, 3 healthy: 1 may be down with quorum kept")
	require.Contains(t, b.String(), "safe to go on")
}

// Each thing that makes taking a member down unsafe is a reason of its
// own, and a member that is not healthy leaves no spare voter.
func TestMemberCheckRefusesWithTheReasons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes map[string]memberProbe
		list   func([]api.Member) []api.Member
		want   string
	}{
		{name: "halted", probes: map[string]memberProbe{
			"m1": {Applied: 500, Leader: "m1"}, "m2": {Applied: 500, Leader: "m1"},
			"m3": {NotReady: "503 member-halted: needs molt ≥ 0.2.0: stopped applying at entry 77"}},
			want: "member m3 is not ready: 503 member-halted: needs molt ≥ 0.2.0"},
		{name: "down", probes: map[string]memberProbe{
			"m1": {Applied: 500, Leader: "m1"}, "m2": {Applied: 500, Leader: "m1"},
			"m3": {Err: "connection refused"}},
			want: "member m3 does not answer: connection refused"},
		{name: "behind", probes: map[string]memberProbe{
			"m1": {Applied: 500, Leader: "m1"}, "m2": {Applied: 500, Leader: "m1"},
			"m3": {Applied: 399, Leader: "m1"}},
			want: "member m3 has applied index 399, 101 behind the leader's 500 (at most 100)"},
		{name: "two leaders", probes: map[string]memberProbe{
			"m1": {Applied: 500, Leader: "m1"}, "m2": {Applied: 500, Leader: "m1"},
			"m3": {Applied: 500, Leader: "m3"}},
			want: "the members do not agree on one leader: m1, m2 say m1; m3 say m3"},
		{name: "leaderless", probes: map[string]memberProbe{
			"m1": {Applied: 500}, "m2": {Applied: 500}, "m3": {Applied: 500}},
			want: "the members do not agree on one leader: m1, m2, m3 say no leader"},
		{name: "reason in the list", probes: map[string]memberProbe{
			"m1": {Applied: 500, Leader: "m1"}, "m2": {Applied: 500, Leader: "m1"}, "m3": {Applied: 500, Leader: "m1"}},
			list: func(ms []api.Member) []api.Member { ms[2].Reason = "needs molt ≥ 0.3.0"; return ms },
			want: "member m3 cannot keep up with the log: needs molt ≥ 0.3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := threeMembers()
			if tc.list != nil {
				list = tc.list(list)
			}
			res := decideCheck(list, tc.probes, 100)
			require.False(t, res.Safe)
			require.Contains(t, res.Reasons[0], tc.want)
			if tc.name != "two leaders" && tc.name != "leaderless" {
				require.Equal(t, 0, res.Spare)
				require.Contains(t, res.Reasons, "2 of 3 voters are healthy and a quorum is 2: taking one more down would stop the coordinator")
			}
			var b bytes.Buffer
			renderCheck(&b, res)
			require.Contains(t, b.String(), "not safe to go on:\n  - ")
		})
	}
}

// Five voters with one already down: one more may still go.
func TestMemberCheckCountsSpareVoters(t *testing.T) {
	list := append(threeMembers(), api.Member{ID: "m4", HTTPAddr: "a:1", Voter: true}, api.Member{ID: "m5", HTTPAddr: "b:1", Voter: true})
	probes := map[string]memberProbe{"m1": {Applied: 9, Leader: "m1"}, "m2": {Applied: 9, Leader: "m1"},
		"m3": {Applied: 9, Leader: "m1"}, "m4": {Applied: 9, Leader: "m1"}, "m5": {Err: "timeout"}}
	res := decideCheck(list, probes, 100)
	require.False(t, res.Safe, "a member down is a reason")
	require.Equal(t, 3, res.Quorum)
	require.Equal(t, 1, res.Spare)
}
