package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// `moltctl member list` says which molt each member runs and what it
// reads; a member nobody knows is 0.1.0 assumed; a halted one says why.
func TestMemberListShowsVersions(t *testing.T) {
	caps := &api.MemberCapabilities{Version: "0.2.0", Commit: "0123456789abcdef", Command: 42, RaftCommand: 2, StateSnapshot: 1, RaftSnapshot: 1, StepLayout: 3}
	var b bytes.Buffer
	renderMembers(&b, []api.Member{
		{ID: "m1", RaftAddr: "10.0.0.1:7081", HTTPAddr: "10.0.0.1:7080", Voter: true, Leader: true, Version: "0.2.0", Capabilities: caps, CapabilitiesFrom: "self"},
		{ID: "m2", RaftAddr: "10.0.0.2:7081", Voter: true, CapabilitiesFrom: "assumed"},
		{ID: "m3", RaftAddr: "10.0.0.3:7081", HTTPAddr: "10.0.0.3:7080", Voter: true, Version: "0.2.0", Capabilities: caps, Reason: "needs molt ≥ 0.3.0"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, []string{"ID", "ROLE", "VERSION", "COMMIT", "READS", "RAFT", "HTTP", "STATUS"}, strings.Fields(lines[0]))
	require.Regexp(t, `^m1\s+leader\s+0\.2\.0\s+0123456789ab\s+cmd 42/2 snap 1/1 layout 3\s+10\.0\.0\.1:7081\s+10\.0\.0\.1:7080\s+ok$`, lines[1])
	require.Regexp(t, `^m2\s+follower\s+unknown \(0\.1\.0 assumed\)\s+-\s+-\s+10\.0\.0\.2:7081\s+-\s+ok$`, lines[2])
	require.Regexp(t, `needs molt ≥ 0\.3\.0$`, lines[3])
}

// `moltctl cluster get` shows the molt release of every node's agent.
func TestClusterShowsAgentVersions(t *testing.T) {
	var b bytes.Buffer
	printCluster(&b, api.Cluster{Status: api.ClusterStatus{Agents: []api.AgentStatus{
		{Node: "w1", Registered: true, Healthy: true, AgentVersion: "0.2.0", Kubelet: "1.34.4"},
		{Node: "w2", Registered: true, Healthy: true},
	}}})
	require.Contains(t, b.String(), "agent w1           healthy   molt 0.2.0 kubelet 1.34.4")
	require.Contains(t, b.String(), "agent w2           healthy   molt - kubelet")
}
