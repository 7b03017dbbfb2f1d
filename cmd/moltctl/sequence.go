package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

// Rollout sequences (docs/rollout-sequences.md): ordered stages of
// clusters with a soak after each.

func (c *cli) sequenceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sequence", Short: "Rollout sequences: a version reaches a stage only after the one before it has soaked"}
	put := &cobra.Command{Use: "put NAME -f FILE", Short: "Create or replace a rollout sequence from a JSON/YAML file of stages (admin)", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		f, _ := cmd.Flags().GetString("file")
		var spec api.RolloutSequenceSpec
		if err := readBody(f, &spec); err != nil {
			return err
		}
		var seq api.RolloutSequence
		if _, err := c.client().Do(cmd.Context(), http.MethodPut, apiPath("rollout-sequences", args[0]), spec, &seq); err != nil {
			return err
		}
		return c.print(seq, func() { fmt.Fprintf(c.out, "rollout sequence %s stored: %s\n", seq.Name, stageNames(seq.Stages)) })
	}}
	put.Flags().StringP("file", "f", "-", `file with the stages, {"stages": [...]} (- for stdin)`)
	get := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			var seq api.RolloutSequence
			if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("rollout-sequences", args[0]), nil, &seq); err != nil {
				return err
			}
			if use == "get" {
				return c.print(seq, func() { printSequenceSpec(c.out, seq) })
			}
			return c.print(seq, func() { printSequenceStatus(c.out, seq) })
		}}
	}
	list := &cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		var seqs []api.RolloutSequence
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/rollout-sequences", nil, &seqs); err != nil {
			return err
		}
		return c.print(seqs, func() {
			fmt.Fprintf(c.out, "%-20s %s\n", "SEQUENCE", "STAGES")
			for _, s := range seqs {
				fmt.Fprintf(c.out, "%-20s %s\n", s.Name, stageNames(s.Stages))
			}
		})
	}}
	override := func(action, short string) *cobra.Command {
		o := &cobra.Command{Use: action + " NAME STAGE --version V", Short: short, Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, args []string) error {
			var req api.SequenceOverrideRequest
			req.Version, _ = cmd.Flags().GetString("version")
			req.Reason, _ = cmd.Flags().GetString("reason")
			var seq api.RolloutSequence
			// One path per action, written out: the routes are two.
			path := apiPath("rollout-sequences", args[0], "stages", args[1], "resume")
			if action == api.SequenceSkip {
				path = apiPath("rollout-sequences", args[0], "stages", args[1], "skip")
			}
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, path, req, &seq); err != nil {
				return err
			}
			return c.print(seq, func() {
				fmt.Fprintf(c.out, "rollout sequence %s: stage %s %sd for %s\n", seq.Name, args[1], action, req.Version)
			})
		}}
		o.Flags().String("version", "", "the version the stage is resumed or skipped for")
		o.Flags().String("reason", "", "why (kept with the override and in the audit log)")
		return o
	}
	del := &cobra.Command{Use: "delete NAME", Short: "Delete a rollout sequence (admin)", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		if _, err := c.client().Do(cmd.Context(), http.MethodDelete, apiPath("rollout-sequences", args[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "rollout sequence %s deleted\n", args[0])
		return nil
	}}
	plan := &cobra.Command{Use: "plan NAME --version V", Short: "Predict when a version reaches every stage of a rollout sequence (a dry run)", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		v, _ := cmd.Flags().GetString("version")
		var p api.SequencePlan
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("rollout-sequences", args[0], "plan")+"?version="+url.QueryEscape(v), nil, &p); err != nil {
			return err
		}
		return c.print(p, func() { printSequencePlan(c.out, p) })
	}}
	plan.Flags().String("version", "", "the version to plan")
	cmd.AddCommand(plan)
	cmd.AddCommand(put, get("get", "Show a rollout sequence's stages"), list,
		get("status", "Show how far each version has gone through a rollout sequence, stage by stage"),
		override(api.SequenceResume, "Resume a stage held by a failed upgrade, for a version (operator)"),
		override(api.SequenceSkip, "Skip a stage for a version: the next stage no longer waits for its clusters (operator)"), del)
	return cmd
}

func stageNames(stages []api.SequenceStage) string {
	names := make([]string, 0, len(stages))
	for _, s := range stages {
		names = append(names, s.Name)
	}
	return strings.Join(names, " → ")
}

// printSequenceSpec prints a sequence's stages: who is in each, its soak.
func printSequenceSpec(w io.Writer, seq api.RolloutSequence) {
	fmt.Fprintf(w, "rollout sequence %s\n", seq.Name)
	fmt.Fprintf(w, "%-3s %-16s %-10s %s\n", "#", "STAGE", "SOAK", "CLUSTERS")
	for i, st := range seq.Stages {
		fmt.Fprintf(w, "%-3d %-16s %-10s %s\n", i, st.Name, dash(soakText(st.Soak)), stageMembers(st))
	}
	for _, o := range seq.Overrides {
		fmt.Fprintf(w, "%s stage %s for %s at %s", o.Action, o.Stage, o.Version, o.At.UTC().Format(time.RFC3339))
		if o.Reason != "" {
			fmt.Fprintf(w, ": %s", o.Reason)
		}
		fmt.Fprintln(w)
	}
}

// stageMembers names a stage's clusters and its selector.
func stageMembers(st api.SequenceStage) string {
	parts := append([]string(nil), st.Clusters...)
	if len(st.Selector) > 0 {
		parts = append(parts, "labels "+labelText(st.Selector))
	}
	return strings.Join(parts, ", ")
}

func labelText(sel map[string]string) string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		pairs = append(pairs, k+"="+sel[k])
	}
	return strings.Join(pairs, ",")
}

// soakText writes a soak of whole seconds ("259200s") as a duration an
// operator reads ("72h0m0s"); anything else as it is.
func soakText(s string) string {
	if d, err := time.ParseDuration(s); err == nil {
		return d.String()
	}
	return s
}

// printSequenceStatus prints the whole sequence as a table: for each
// version in play, each stage's state, its clusters not at the version,
// when its soak ends and what holds it.
func printSequenceStatus(w io.Writer, seq api.RolloutSequence) {
	fmt.Fprintf(w, "rollout sequence %s: %s\n", seq.Name, stageNames(seq.Stages))
	if len(seq.Versions) == 0 {
		fmt.Fprintln(w, "no version in play (no channel target or next step of its clusters)")
		return
	}
	for _, v := range seq.Versions {
		where := "through every stage"
		if v.Stage != "" {
			where = "in stage " + v.Stage
		}
		fmt.Fprintf(w, "\n%s: %d of %d stages done, %s\n", v.Version, v.Reached, len(v.Stages), where)
		fmt.Fprintf(w, "%-3s %-16s %-9s %-8s %-21s %s\n", "#", "STAGE", "STATE", "CLUSTERS", "SOAK ENDS", "NOT AT "+v.Version)
		for i, st := range v.Stages {
			soak := "-"
			if !st.SoakEnds.IsZero() {
				soak = st.SoakEnds.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%-3d %-16s %-9s %-8s %-21s %s\n", i, st.Name, stageState(st),
				fmt.Sprintf("%d/%d", len(st.Clusters)-len(st.NotReached), len(st.Clusters)), soak, dash(strings.Join(st.NotReached, ", ")))
			if st.Held {
				fmt.Fprintf(w, "    held: the upgrade to %s failed on %s; resume or skip stage %s (moltctl sequence resume %s %s --version %s)\n",
					v.Version, strings.Join(st.Failed, ", "), st.Name, seq.Name, st.Name, v.Version)
			}
		}
	}
}

// stageState is a stage's state for a version in a word.
func stageState(st api.SequenceStageRun) string {
	switch {
	case st.Skipped:
		return "skipped"
	case st.Held:
		return "held"
	case st.Done:
		return "done"
	case !st.Open:
		return "waiting"
	case len(st.NotReached) > 0:
		return "rolling"
	default:
		return "soaking"
	}
}

// printSequencePlan prints the dry run: each stage's opening, end and
// soak, each cluster's predicted start and finish, the last one's.
func printSequencePlan(w io.Writer, p api.SequencePlan) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "plan of %s through rollout sequence %s\n", p.Version, p.Sequence)
	fmt.Fprintf(w, "%-16s %-21s %-21s %s\n", "STAGE", "OPENS", "DONE", "SOAK ENDS")
	for _, st := range p.Stages {
		fmt.Fprintf(w, "%-16s %-21s %-21s %s\n", st.Name, ts(st.Opens), ts(st.Done), ts(st.SoakEnds))
	}
	fmt.Fprintf(w, "\n%-20s %-16s %-21s %-21s %s\n", "CLUSTER", "STAGE", "START", "FINISH", "NOTE")
	for _, c := range p.Clusters {
		note := ""
		switch {
		case c.Already:
			note = "runs it already"
		case c.Running:
			note = "upgrading now"
		case c.Unplanned != "":
			note = c.Unplanned
		case c.OutlastsWindow:
			note = "outlasts its window: finishes later"
		}
		fmt.Fprintf(w, "%-20s %-16s %-21s %-21s %s\n", c.Cluster, c.Stage, ts(c.Start), ts(c.Finish), dash(note))
	}
	if p.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", p.Stopped)
		return
	}
	fmt.Fprintf(w, "last cluster done: %s\n", ts(p.Finish))
}
