package coordinator

import (
	"fmt"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// The capability gate (Nomad's minimum server version): the leader writes
// a command, a field, a snapshot format or a step layout only once every
// member reads it. A member that met an entry it cannot read would halt
// (docs/mixed-versions.md); the gate keeps the leader from writing one
// while such a member is in the cluster. It is checked where the leader
// proposes: apply for the coordinator's commands, and raftstore's hook
// (Store.SetGate) for its own.

// RuleMemberCannotRead names the gate's refusal (409).
const RuleMemberCannotRead = "member-cannot-read"

// need is what an entry needs of every member.
type need struct {
	version     string
	command     command.Type // a coordinator command number, 0 for none
	raftCommand command.Type // a raftstore command number, 0 for none
	stepLayout  int
}

// needOf is what a coordinator command's entry needs.
func needOf(cmd statemachine.Command) need {
	r := statemachine.RequirementOf(cmd)
	return need{version: r.Version, command: r.Command, stepLayout: r.StepLayout}
}

// lack says what caps lacks to read n; "" when it reads it.
func lack(caps api.MemberCapabilities, n need) string {
	if n.version != "" {
		below, ok := command.VersionBelow(caps.Version, n.version)
		if below || !ok {
			return fmt.Sprintf("it needs molt ≥ %s", n.version)
		}
	}
	switch {
	case n.command != 0 && int(n.command) > caps.Command:
		return fmt.Sprintf("command %s is newer than it reads (up to %d)", n.command, caps.Command)
	case n.raftCommand != 0 && int(n.raftCommand) > caps.RaftCommand:
		return fmt.Sprintf("store command %s is newer than it reads (up to %d)", n.raftCommand, caps.RaftCommand)
	case n.stepLayout > caps.StepLayout:
		return fmt.Sprintf("step layout %d is newer than it knows (up to %d)", n.stepLayout, caps.StepLayout)
	}
	return ""
}

// gateBypassed lets every entry through the gate: false in a release.
// The test build of gatebypass.go (build tag gatebypass) sets it, so that
// a test can give a member an entry it cannot read and watch it halt
// (package mixed).
var gateBypassed bool

// checkReadable refuses (409, member-cannot-read) an entry that some
// member cannot read, naming the member and what it lacks; nothing is
// written. What molt 0.1.0 reads every member reads: such an entry
// passes without looking at the members, so the gate costs nothing to
// the commands of today.
func (c *Coordinator) checkReadable(n need) error {
	if gateBypassed || lack(Baseline, n) == "" {
		return nil
	}
	ms, err := c.store.Members()
	if err != nil {
		return err
	}
	for _, m := range ms {
		caps, from, _ := c.capsOf(m.ID)
		l := lack(caps, n)
		if l == "" {
			continue
		}
		runs := "runs molt " + caps.Version
		if from == fromAssumed {
			runs = "did not say which molt it runs (" + Baseline.Version + " assumed)"
		}
		return &RuleError{Rule: RuleMemberCannotRead,
			Detail: fmt.Sprintf("member %s %s and cannot read this change: %s; upgrade it first, or wait for the leader to hear from it (docs/mixed-versions.md)", m.ID, runs, l),
			Err:    ErrConflict}
	}
	return nil
}

// gateInternal is raftstore's hook (Store.SetGate): the gate for the
// store's own commands, which the coordinator does not propose through
// apply.
func (c *Coordinator) gateInternal(cmd raftstore.Command, minVersion string) error {
	if !cmd.Type().Internal() {
		return nil // apply checked it, with the command's own fields
	}
	return c.checkReadable(need{version: minVersion, raftCommand: cmd.Type()})
}
