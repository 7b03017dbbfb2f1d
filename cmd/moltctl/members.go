package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/moltproject/molt/api"
)

// renderMembers prints `moltctl member list`: one member a line, with the
// molt release it runs and what it reads (command numbers, snapshot
// formats, step layout), or "unknown (0.1.0 assumed)" when the member
// that answered does not know, and why a member cannot keep up.
func renderMembers(w io.Writer, ms []api.Member) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tVERSION\tCOMMIT\tREADS\tRAFT\tHTTP\tSTATUS")
	for _, m := range ms {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		if !m.Voter {
			role += " (non-voter)"
		}
		ver, commit, reads := "unknown (0.1.0 assumed)", "-", "-"
		if m.Capabilities != nil {
			c := m.Capabilities
			ver = c.Version
			if c.Commit != "" {
				commit = c.Commit[:min(len(c.Commit), 12)]
			}
			reads = fmt.Sprintf("cmd %d/%d snap %d/%d layout %d", c.Command, c.RaftCommand, c.StateSnapshot, c.RaftSnapshot, c.StepLayout)
		}
		status := "ok"
		if m.Reason != "" {
			status = m.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, role, ver, commit, reads, m.RaftAddr, dash(m.HTTPAddr), status)
	}
	_ = tw.Flush()
}
