//go:build hidenewest

package statemachine

import "github.com/moltproject/molt/raftstore/command"

// The hidenewest build of the coordinator (go build -tags hidenewest,
// with the linker's version set below 0.2.0) plays a member of molt
// 0.1.0 that does not halt by panicking: its registry holds only the
// command numbers 0.1.0 had, so an entry of a newer command makes it halt
// as docs/mixed-versions.md says. molt 0.1.0 itself panics there (the
// defect 0.2.0 fixed). Only the tests of package mixed build it.
func init() {
	for t, since := range commandSince {
		if since != command.BaselineVersion {
			hiddenCommands = append(hiddenCommands, t)
		}
	}
}
