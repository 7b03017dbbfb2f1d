package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// What a member lacks to read an entry: a newer release, command number,
// store command number or step layout; a pre-release reads what its
// release reads; a version that is not one reads nothing new.
func TestGateSaysWhatAMemberLacks(t *testing.T) {
	old := Baseline
	for _, tc := range []struct {
		name string
		n    need
		want string
	}{
		{"what 0.1.0 reads", need{version: "0.1.0", command: statemachine.CmdAudited, raftCommand: 2, stepLayout: phases.StepLayoutGates}, ""},
		{"a newer release", need{version: "0.2.0", command: statemachine.CmdPutRelease}, "it needs molt ≥ 0.2.0"},
		{"a newer command number", need{command: 48}, "command 48 is newer than it reads (up to 47)"},
		{"a newer store command", need{raftCommand: 3}, "store command 3 is newer than it reads (up to 2)"},
		{"a newer step layout", need{stepLayout: phases.StepLayoutGates + 1}, "step layout 4 is newer than it knows (up to 3)"},
	} {
		require.Equal(t, tc.want, lack(old, tc.n), tc.name)
	}
	dev := Baseline
	dev.Version = "0.2.0-dev"
	require.Empty(t, lack(dev, need{version: "0.2.0"}), "a build between releases reads what its release reads")
	bad := Baseline
	bad.Version = "dev"
	require.NotEmpty(t, lack(bad, need{version: "0.2.0"}), "a version that is not one")

	// What a command needs: its release, its number (the one inside an
	// audited envelope), the step layout of an upgrade it starts.
	require.Equal(t, need{version: statemachine.SinceMembers, command: statemachine.CmdSetMembers}, needOf(statemachine.SetMembersCmd{}))
	start := statemachine.StartUpgradeCmd{Options: phases.Options{StepLayout: 4}}
	require.Equal(t, need{version: "0.1.0", command: statemachine.CmdStartUpgrade, stepLayout: 4}, needOf(start))
	audited, err := statemachine.NewAudited(statemachine.AuditRecord{}, statemachine.AuditRetention{}, statemachine.SetMembersCmd{})
	require.NoError(t, err)
	require.Equal(t, need{version: statemachine.SinceMembers, command: statemachine.CmdSetMembers}, needOf(audited))
}

// BenchmarkGateOnA010Command is what the gate costs every command molt
// 0.1.0 reads: it passes without looking at the members.
func BenchmarkGateOnA010Command(b *testing.B) {
	c := &Coordinator{}
	cmd := statemachine.AgentHealthCmd{Cluster: "c", Node: "n"}
	for b.Loop() {
		if err := c.checkReadable(needOf(cmd)); err != nil {
			b.Fatal(err)
		}
	}
}
