package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// `moltctl member check`: may the next member be taken down (a rolling
// upgrade of the coordinator, docs/upgrade-molt.md)? It asks every member
// itself, with the routes molt 0.1.0 already serves, so it works while
// members of two releases run side by side: GET /readyz (a halted member
// answers 503 member-halted) and GET /v1/members (the answer names the
// index the member has applied, X-Molt-Index, and whom it takes for the
// leader). The decision (decideCheck) is pure; probeMember is the I/O.

// DefaultMaxLag is how many entries a member may be behind the leader's
// applied index and still count as caught up: a member that keeps up
// with a steady flow of writes is a few entries behind at any moment.
const DefaultMaxLag = 100

// memberProbe is what one member answered.
type memberProbe struct {
	// Err is set when the member could not be asked at all.
	Err string `json:"error,omitempty"`
	// NotReady is /readyz's refusal ("" when it answered 200).
	NotReady string `json:"notReady,omitempty"`
	// Applied is the index its own answer reflects (api.IndexHeader).
	Applied uint64 `json:"applied"`
	// Leader is the member it takes for the leader ("" for none).
	Leader string `json:"leader,omitempty"`
}

// checkMember is one member's line of the check.
type checkMember struct {
	api.Member
	Probe  memberProbe `json:"probe"`
	Behind uint64      `json:"behind"`
	OK     bool        `json:"ok"`
}

// memberCheck is the check's answer.
type memberCheck struct {
	Safe    bool          `json:"safe"`
	Reasons []string      `json:"reasons,omitempty"`
	Leader  string        `json:"leader,omitempty"`
	Index   uint64        `json:"leaderIndex"`
	Voters  int           `json:"voters"`
	Quorum  int           `json:"quorum"`
	Healthy int           `json:"healthyVoters"`
	Spare   int           `json:"mayBeDown"` // voters that may be down with quorum kept
	Members []checkMember `json:"members"`
}

// decideCheck decides from the member list (as one member answered it)
// and each member's own answers whether the next member may be taken
// down: every member answers and is ready (none halted), all of them
// name the same one leader, every member is within maxLag entries of
// the leader's applied index, and after taking one more voter down a
// quorum of healthy voters is left.
func decideCheck(list []api.Member, probes map[string]memberProbe, maxLag uint64) memberCheck {
	var res memberCheck
	var reasons []string
	leaders := map[string][]string{} // leader named → members naming it
	for _, m := range list {
		p := probes[m.ID]
		if p.Err == "" && p.NotReady == "" {
			leaders[p.Leader] = append(leaders[p.Leader], m.ID)
		}
	}
	switch names := slices.Sorted(maps.Keys(leaders)); {
	case len(names) == 1 && names[0] != "":
		res.Leader = names[0]
	case len(names) == 0:
		reasons = append(reasons, "no member answered")
	default:
		var parts []string
		for _, n := range names {
			who := n
			if who == "" {
				who = "no leader"
			}
			parts = append(parts, fmt.Sprintf("%s say %s", strings.Join(leaders[n], ", "), who))
		}
		reasons = append(reasons, "the members do not agree on one leader: "+strings.Join(parts, "; "))
	}
	if res.Leader != "" {
		if p, ok := probes[res.Leader]; ok && p.Err == "" && p.NotReady == "" {
			res.Index = p.Applied
		} else {
			reasons = append(reasons, fmt.Sprintf("the leader %s did not answer", res.Leader))
			res.Leader = ""
		}
	}
	for _, m := range list {
		p := probes[m.ID]
		cm := checkMember{Member: m, Probe: p}
		switch {
		case p.Err != "":
			reasons = append(reasons, fmt.Sprintf("member %s does not answer: %s", m.ID, p.Err))
		case p.NotReady != "":
			reasons = append(reasons, fmt.Sprintf("member %s is not ready: %s", m.ID, p.NotReady))
		case m.Reason != "":
			reasons = append(reasons, fmt.Sprintf("member %s cannot keep up with the log: %s", m.ID, m.Reason))
		default:
			cm.OK = true
		}
		if cm.OK && res.Leader != "" && p.Applied+maxLag < res.Index {
			cm.Behind = res.Index - p.Applied
			cm.OK = false
			reasons = append(reasons, fmt.Sprintf("member %s has applied index %d, %d behind the leader's %d (at most %d): wait for it to catch up",
				m.ID, p.Applied, cm.Behind, res.Index, maxLag))
		} else if res.Index > p.Applied {
			cm.Behind = res.Index - p.Applied
		}
		if m.Voter {
			res.Voters++
			if cm.OK {
				res.Healthy++
			}
		}
		res.Members = append(res.Members, cm)
	}
	res.Quorum = res.Voters/2 + 1
	res.Spare = max(res.Healthy-res.Quorum, 0)
	if res.Voters > 0 && res.Spare < 1 {
		reasons = append(reasons, fmt.Sprintf("%d of %d voters are healthy and a quorum is %d: taking one more down would stop the coordinator",
			res.Healthy, res.Voters, res.Quorum))
	}
	res.Reasons = reasons
	res.Safe = len(reasons) == 0
	return res
}

// probeMember asks one member at its API address.
func (c *cli) probeMember(ctx context.Context, m api.Member) memberProbe {
	if m.HTTPAddr == "" {
		return memberProbe{Err: "the member list names no API address for it"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl := client.New("https://"+m.HTTPAddr, c.hc)
	cl.SetBearerToken(c.bearer)
	var ms []api.Member
	_, err := cl.Do(ctx, http.MethodGet, "/readyz", nil, nil)
	if err == nil {
		_, err = cl.Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
	}
	var prob *api.Problem
	switch {
	case errors.As(err, &prob):
		return memberProbe{NotReady: problemText(prob)}
	case err != nil:
		return memberProbe{Err: err.Error()}
	}
	p := memberProbe{Applied: cl.Seen()}
	for _, x := range ms {
		if x.Leader {
			p.Leader = x.ID
		}
	}
	return p
}

// problemText is a refusal in a line: its rule and detail.
func problemText(p *api.Problem) string {
	text := p.Detail
	if text == "" {
		text = p.Title
	}
	if p.Rule != "" {
		text = p.Rule + ": " + text
	}
	return fmt.Sprintf("%d %s", p.Status, text)
}

func (c *cli) memberCheckCmd() *cobra.Command {
	maxLag := uint64(DefaultMaxLag)
	cmd := &cobra.Command{Use: "check", Args: cobra.NoArgs,
		Short: "Say whether the next member may be taken down (rolling upgrade): exit 0 when safe, 1 with the reasons",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []api.Member
			if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/members", nil, &list); err != nil {
				return err
			}
			// The leader is asked first: a follower asked after it that keeps
			// up is at or near the leader's index, never judged against a
			// later one.
			order := slices.Clone(list)
			slices.SortStableFunc(order, func(a, b api.Member) int {
				switch {
				case a.Leader == b.Leader:
					return 0
				case a.Leader:
					return -1
				}
				return 1
			})
			probes := map[string]memberProbe{}
			for _, m := range order {
				probes[m.ID] = c.probeMember(cmd.Context(), m)
			}
			res := decideCheck(list, probes, maxLag)
			if err := c.print(res, func() { renderCheck(c.out, res) }); err != nil {
				return err
			}
			if !res.Safe {
				return fmt.Errorf("not safe to take another member down: %s", strings.Join(res.Reasons, "; "))
			}
			return nil
		}}
	cmd.Flags().Uint64Var(&maxLag, "max-lag", maxLag, "entries a member may be behind the leader's applied index and still count as caught up")
	return cmd
}

// renderCheck prints the check's answer for a person.
func renderCheck(w io.Writer, res memberCheck) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tVERSION\tAPPLIED\tBEHIND\tSTATUS")
	for _, m := range res.Members {
		role := "follower"
		if m.ID == res.Leader {
			role = "leader"
		}
		if !m.Voter {
			role += " (non-voter)"
		}
		ver := "unknown (0.1.0 assumed)"
		if m.Capabilities != nil {
			ver = m.Capabilities.Version
		}
		status := "ok"
		switch {
		case m.Probe.Err != "":
			status = "not answering"
		case m.Probe.NotReady != "":
			status = "not ready: " + m.Probe.NotReady
		case m.Reason != "":
			status = m.Reason
		case !m.OK:
			status = "behind"
		}
		applied := "-"
		if m.Probe.Err == "" && m.Probe.NotReady == "" {
			applied = fmt.Sprint(m.Probe.Applied)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", m.ID, role, ver, applied, m.Behind, status)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d voters, quorum %d, %d healthy: %d may be down with quorum kept\n", res.Voters, res.Quorum, res.Healthy, res.Spare)
	if res.Safe {
		fmt.Fprintf(w, "safe to go on: every member answers, is ready and caught up with the leader %s (index %d)\n", res.Leader, res.Index)
		return
	}
	fmt.Fprintln(w, "not safe to go on:")
	for _, r := range res.Reasons {
		fmt.Fprintln(w, "  -", r)
	}
}
