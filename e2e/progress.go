package e2e

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// progress prints what changed between two looks at an upgrade: a step
// starting or finishing, a node moving to its next step. Times are from the
// upgrade's creation, as the replicated record has them.
type progress struct {
	out   io.Writer
	rev   uint64
	steps map[string]api.StepState
	nodes map[string]string
}

func newProgress(out io.Writer) *progress {
	return &progress{out: out, steps: map[string]api.StepState{}, nodes: map[string]string{}}
}

func (p *progress) show(u *api.Upgrade) {
	// Reads go to any member; a follower may briefly be a few entries
	// behind the leader. Never print an older revision after a newer one.
	if u.Revision < p.rev {
		return
	}
	p.rev = u.Revision
	at := func(t time.Time) string {
		if t.IsZero() {
			return "       "
		}
		return fmt.Sprintf("%6.1fs", t.Sub(u.CreatedAt).Seconds())
	}
	for _, s := range u.Steps {
		if p.steps[s.ID] == s.State {
			continue
		}
		p.steps[s.ID] = s.State
		t := s.StartedAt
		if s.State == api.StepDone || s.State == api.StepFailed {
			t = s.FinishedAt
		}
		if s.State == api.StepPending {
			continue
		}
		msg := ""
		if s.Message != "" {
			msg = " — " + s.Message
		}
		fmt.Fprintf(p.out, "%s  step %-14s %s%s\n", at(t), s.ID, s.State, msg)
	}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		desc := string(n.State)
		t := n.StepStartedAt
		if n.State == api.StepRunning {
			if n.Step != "" { // the coordinator's reading of the cursor
				desc = fmt.Sprintf("%s (%d/%d)", n.Step, n.Cursor+1, poolSteps(u, n))
			}
		}
		if n.State == api.StepDone {
			t = n.FinishedAt
			desc = fmt.Sprintf("done at v%s in %s", n.Version, n.FinishedAt.Sub(n.StartedAt).Round(100*time.Millisecond))
			if len(n.LeftBehind) > 0 {
				desc += fmt.Sprintf(", %d pod(s) left behind by the drain", len(n.LeftBehind))
			}
		}
		if n.State == api.StepFailed {
			desc = "FAILED: " + n.Error
		}
		if n.Attempt > 0 {
			desc += fmt.Sprintf(" [attempt %d]", n.Attempt+1)
		}
		if p.nodes[n.Node] == desc || n.State == api.StepPending {
			continue
		}
		p.nodes[n.Node] = desc
		fmt.Fprintf(p.out, "%s    node %-10s %s\n", at(t), n.Node, desc)
	}
}

func poolSteps(u *api.Upgrade, n *api.NodeTask) int {
	if p, ok := u.Pool(n.Pool); ok {
		return len(p.StepsOf(n))
	}
	return 0
}

// Summary is the end-of-upgrade report: the order steps ran in, each
// node's time, and the pods drains left behind.
func Summary(u *api.Upgrade) string {
	var b strings.Builder
	fmt.Fprintf(&b, "upgrade %s: v%s → v%s, %s in %s\n", u.ID, u.From, u.To, u.State, u.FinishedAt.Sub(u.CreatedAt).Round(100*time.Millisecond))
	b.WriteString("order of steps:\n")
	for i, s := range StepsInOrder(u) {
		fmt.Fprintf(&b, "  %d. %-14s %6.1fs → %6.1fs  (%s)\n", i+1, s.ID,
			s.StartedAt.Sub(u.CreatedAt).Seconds(), s.FinishedAt.Sub(u.CreatedAt).Seconds(), s.FinishedAt.Sub(s.StartedAt).Round(100*time.Millisecond))
	}
	b.WriteString("time per node:\n")
	for _, n := range u.Nodes {
		fmt.Fprintf(&b, "  %-10s %-8s %8s  v%s\n", n.Node, n.Pool, n.FinishedAt.Sub(n.StartedAt).Round(100*time.Millisecond), n.Version)
	}
	b.WriteString("pods left behind by drains:\n")
	left := 0
	for _, n := range u.Nodes {
		for _, p := range n.LeftBehind {
			left++
			fmt.Fprintf(&b, "  %-10s %s/%s: %s\n", n.Node, p.Namespace, p.Name, p.Reason)
		}
	}
	if left == 0 {
		b.WriteString("  none\n")
	}
	return b.String()
}

// StepsInOrder returns the steps that ran, by start time (ties by finish).
func StepsInOrder(u *api.Upgrade) []api.Step {
	var out []api.Step
	for _, s := range u.Steps {
		if !s.StartedAt.IsZero() {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b api.Step) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return a.FinishedAt.Compare(b.FinishedAt)
	})
	return out
}
