package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

// Automatic upgrades: the catalog's release channels and "why is this
// cluster (not) upgrading?" (SPEC §14).

func (c *cli) whyCmd() *cobra.Command {
	return &cobra.Command{Use: "why NAME", Short: "Say why a cluster is (not) upgrading automatically", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		var st api.UpgradeStatus
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("clusters", args[0], "upgrade-status"), nil, &st); err != nil {
			return err
		}
		return c.print(st, func() { printWhy(c.out, st) })
	}}
}

// printWhy says a cluster's upgrade status in words.
func printWhy(w io.Writer, st api.UpgradeStatus) {
	channel := st.Channel
	if channel == "" {
		channel = "none"
	}
	fmt.Fprintf(w, "cluster %s runs %s on channel %s", st.Cluster, st.Current, channel)
	if st.Target != "" {
		fmt.Fprintf(w, " (auto-upgrade target %s)", st.Target)
	}
	fmt.Fprintln(w)
	headline := whyHeadline(st)
	if n := len(st.BlockedBy); n > 1 {
		// The state names the first; it is not the only cause.
		headline += fmt.Sprintf(" (and not only that: %d things hold it, each until its own end)", n)
	}
	fmt.Fprintf(w, "%s: %s\n", strings.ToUpper(st.State), headline)
	if st.ForcedByEndOfSupport {
		fmt.Fprintf(w, "end of support: %s → %s is forced through maintenance windows and exclusions once %s's end of support (%s) has passed\n",
			st.Current, st.Next, minorOf(st.Current), st.EndOfSupport.UTC().Format(time.RFC3339))
	}
	for _, b := range st.BlockedBy {
		line := fmt.Sprintf("  held by %s %s", b.Kind, b.Name)
		if b.Detail != "" {
			line += ": " + b.Detail
		}
		if !b.Until.IsZero() {
			line += ", until " + b.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintln(w, line)
	}
	if q := st.Sequence; q != nil {
		printSequenceWait(w, q)
	}
	if !st.NextOpportunity.IsZero() {
		fmt.Fprintf(w, "next opportunity: %s\n", st.NextOpportunity.UTC().Format(time.RFC3339))
	}
	if !st.NextAttempt.IsZero() {
		fmt.Fprintf(w, "next attempt (after backoff): %s\n", st.NextAttempt.UTC().Format(time.RFC3339))
	}
	if a := st.LastAttempt; a != nil {
		outcome := a.Outcome
		if outcome == "" {
			outcome = "in progress"
		}
		fmt.Fprintf(w, "last automatic upgrade %s (%s → %s, started %s): %s\n", a.Upgrade, a.From, a.To, a.StartedAt.UTC().Format(time.RFC3339), outcome)
		if a.Detail != "" {
			fmt.Fprintf(w, "  %s\n", a.Detail)
		}
		fmt.Fprintf(w, "  why: %s\n", a.Reason)
	}
}

// minorOf is "1.N" of a version "1.N.P" (the version itself otherwise).
func minorOf(v string) string {
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		return v[:i]
	}
	return v
}

// whyHeadline is the status's state in a sentence.
func whyHeadline(st api.UpgradeStatus) string {
	switch st.State {
	case api.AutoUpToDate:
		return "nothing to do. " + st.Message
	case api.AutoManualOnly:
		return "upgrades are manual only (subscribe it to rapid, regular or stable to have it upgraded automatically)"
	case api.AutoWaitingForWindow:
		return fmt.Sprintf("%s → %s waits for its maintenance window", st.Current, st.Next)
	case api.AutoBlockedExclusion:
		return fmt.Sprintf("%s → %s is blocked by a maintenance exclusion", st.Current, st.Next)
	case api.AutoPreflightFailed:
		return fmt.Sprintf("the last automatic upgrade to %s failed its preflight; it is tried again after the backoff", st.Next)
	case api.AutoBackoff:
		return fmt.Sprintf("the last automatic upgrade did not finish; %s → %s is tried again after the backoff", st.Current, st.Next)
	case api.AutoRunning, api.AutoPausedAtWindowEnd:
		return st.Message
	case api.AutoBlockedByRule:
		return fmt.Sprintf("%s → %s waits for a rule (version skew, catch-up pace or concurrency)", st.Current, st.Next)
	case api.AutoStarting:
		return fmt.Sprintf("%s → %s may start now; the coordinator's leader starts it on its next pass", st.Current, st.Next)
	case api.AutoWaitingForStage:
		return fmt.Sprintf("%s → %s waits for an earlier stage of its rollout sequence", st.Current, st.Next)
	}
	return st.Message
}

func (c *cli) channelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "channel", Short: "Release channels: default version and auto-upgrade target"}
	cmd.AddCommand(&cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		var chs []api.Channel
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/channels", nil, &chs); err != nil {
			return err
		}
		return c.print(chs, func() {
			fmt.Fprintf(c.out, "%-10s %-10s %s\n", "CHANNEL", "DEFAULT", "AUTO-UPGRADE TARGET")
			for _, ch := range chs {
				fmt.Fprintf(c.out, "%-10s %-10s %s\n", ch.Name, dash(ch.DefaultVersion), dash(ch.AutoUpgradeTarget))
			}
		})
	}})
	set := &cobra.Command{Use: "set NAME", Short: "Set a channel's default version and auto-upgrade target (admin)", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		var u api.ChannelUpdate
		u.DefaultVersion, _ = cmd.Flags().GetString("default")
		u.AutoUpgradeTarget, _ = cmd.Flags().GetString("target")
		var ch api.Channel
		if _, err := c.client().Do(cmd.Context(), http.MethodPut, apiPath("channels", args[0]), u, &ch); err != nil {
			return err
		}
		return c.print(ch, func() {
			fmt.Fprintf(c.out, "channel %s: default %s, auto-upgrade target %s\n", ch.Name, dash(ch.DefaultVersion), dash(ch.AutoUpgradeTarget))
		})
	}}
	set.Flags().String("default", "", "default version (empty: unset)")
	set.Flags().String("target", "", "auto-upgrade target (empty: nothing is upgraded automatically)")
	cmd.AddCommand(set)
	return cmd
}

// printSequenceWait says where a cluster stands in its rollout sequence:
// the stage it waits for, that stage's clusters not at the version yet,
// when its soak ends, or the failure that holds it.
func printSequenceWait(w io.Writer, q *api.SequenceWait) {
	fmt.Fprintf(w, "rollout sequence %s, stage %s, for %s: ", q.Sequence, q.Stage, q.Version)
	switch {
	case q.Bypassed:
		fmt.Fprintln(w, "the end of support forces the step through the sequence")
	case q.WaitsFor == "":
		fmt.Fprintln(w, "the version is eligible for this stage")
	case q.Held:
		fmt.Fprintf(w, "held: the upgrade failed on %s in stage %s; waits until an operator resumes or skips stage %s\n", strings.Join(q.Failed, ", "), q.HeldStage, q.HeldStage)
	case len(q.NotReached) > 0:
		fmt.Fprintf(w, "waits for stage %s, where %s do(es) not run %s yet\n", q.WaitsFor, strings.Join(q.NotReached, ", "), q.Version)
	default:
		fmt.Fprintf(w, "waits for stage %s to soak until %s\n", q.WaitsFor, q.SoakEnds.UTC().Format(time.RFC3339))
	}
}
