package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

func (c *cli) preflightCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "preflight", Short: "Preflight runs: the checks an upgrade must pass (docs/preflight.md)"}
	run := &cobra.Command{
		Use:   "run CLUSTER",
		Short: "Start a preflight run; with --wait, show its checks and fail if one blocks",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, _ := cmd.Flags().GetString("target")
			wait, _ := cmd.Flags().GetBool("wait")
			return c.preflightRun(cmd.Context(), cmd.ErrOrStderr(), args[0], target, wait)
		},
	}
	run.Flags().String("target", "", "version to check an upgrade to (default: the cluster's spec.version)")
	run.Flags().Bool("wait", true, "wait until the run is finished, show its checks and exit non-zero if a blocking check failed")
	cmd.AddCommand(run)
	cmd.AddCommand(&cobra.Command{
		Use:   "get CLUSTER ID",
		Short: "Show a preflight run",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := c.client().Preflight(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return c.print(r, func() { printPreflight(c.out, r) })
		},
	})
	return cmd
}

// preflightRun starts a run and, when wait is set, polls it until it is
// done. Progress goes to status (stderr) so that -o json|yaml prints only
// the finished run on stdout.
func (c *cli) preflightRun(ctx context.Context, status io.Writer, cluster, target string, wait bool) error {
	cl := c.client()
	if target == "" {
		var spec api.Cluster
		if _, err := cl.Do(ctx, http.MethodGet, apiPath("clusters", cluster), nil, &spec); err != nil {
			return err
		}
		if spec.Spec.Version == "" {
			return fmt.Errorf("cluster %s has no spec.version: give --target", cluster)
		}
		target = spec.Spec.Version
	}
	r, err := cl.StartPreflight(ctx, cluster, target)
	if err != nil {
		return err
	}
	if !wait {
		return c.print(r, func() {
			fmt.Fprintf(c.out, "preflight %s of %s started (target %s); see: moltctl preflight get %s %s\n", r.ID, cluster, r.Target, cluster, r.ID)
		})
	}
	fmt.Fprintf(status, "preflight %s of %s (target %s) running, deadline %s\n", r.ID, cluster, r.Target, r.Deadline.Format(time.RFC3339))
	for r.State == api.PreflightRunning {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.poll):
		}
		next, err := cl.Preflight(ctx, cluster, r.ID)
		if err != nil {
			return fmt.Errorf("preflight %s may still be running; see moltctl preflight get %s %s: %w", r.ID, cluster, r.ID, err)
		}
		r = next
	}
	if err := c.print(r, func() { printPreflight(c.out, r) }); err != nil {
		return err
	}
	if r.Report == nil {
		return fmt.Errorf("preflight %s is %s without a report", r.ID, r.State)
	}
	if blocking := blockingChecks(r.Report); len(blocking) > 0 {
		return fmt.Errorf("preflight %s failed: blocking check(s) %s", r.ID, strings.Join(blocking, ", "))
	}
	return nil
}

// blockingChecks lists the checks whose results block an upgrade. It reads
// each result's Blocks rather than trusting Failed alone.
func blockingChecks(rep *api.PreflightReport) []string {
	seen := map[string]bool{}
	for _, id := range rep.Failed {
		seen[id] = true
	}
	for _, res := range rep.Results {
		if res.Blocks {
			seen[res.Check] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// printPreflight shows a run: a header line, then, once it is done, one
// row per check (scope "cluster") followed, for a check that did not pass,
// by one row per entry of its data — usually a host, sometimes an object
// or a rule. RESULT is pass, warn or fail; FAIL marks a failure that
// blocks the upgrade.
func printPreflight(w io.Writer, r api.PreflightRun) {
	fmt.Fprintf(w, "preflight %s of %s, target %s: ", r.ID, r.Cluster, r.Target)
	if r.State == api.PreflightRunning || r.Report == nil {
		total, answered := 0, 0
		for _, ops := range r.Operations {
			for _, op := range ops {
				total++
				if res, ok := r.Results[op.ID]; ok && res.State != api.OpRunning {
					answered++
				}
			}
		}
		fmt.Fprintf(w, "%s, %d of %d host check(s) answered, deadline %s\n", r.State, answered, total, r.Deadline.Format(time.RFC3339))
		return
	}
	fmt.Fprintf(w, "%s", r.Report.Verdict)
	if !r.FinishedAt.IsZero() {
		fmt.Fprintf(w, " in %s", r.FinishedAt.Sub(r.CreatedAt).Round(time.Second))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSCOPE\tRESULT\tMESSAGE")
	for _, res := range r.Report.Results {
		result := res.Status
		if res.Blocks {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Check, "cluster", result, oneLine(res.Message))
		if res.Status == "pass" {
			continue
		}
		keys := make([]string, 0, len(res.Data))
		for k := range res.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Check, k, result, oneLine(res.Data[k]))
		}
	}
	_ = tw.Flush()
	if blocking := blockingChecks(r.Report); len(blocking) > 0 {
		fmt.Fprintf(w, "blocking: %s\n", strings.Join(blocking, ", "))
	}
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
