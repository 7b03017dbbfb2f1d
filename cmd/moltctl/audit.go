package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

func (c *cli) auditCmd() *cobra.Command {
	var (
		q            api.AuditQuery
		since, until string
		limit        int
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log: who made which write, when, and what came of it (admin)",
		Long: `Read the coordinator's audit log, newest first: every write request (who, role,
what, when, its answer), refusals included, agents' enrollments and certificate
renewals (docs/security.md). --since and --until take an RFC 3339 time or a
duration meaning that long ago (24h); --since is inclusive, --until exclusive.`,
		Example: `  moltctl audit --cluster lab --since 24h
  moltctl audit --principal token:k3x9q2 --limit 500 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			var err error
			if q.Since, err = parseWhen(since, now); err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			if q.Until, err = parseWhen(until, now); err != nil {
				return fmt.Errorf("--until: %w", err)
			}
			if limit < 1 {
				return fmt.Errorf("--limit %d: want at least 1", limit)
			}
			// Pages of at most the API's maximum until the limit is
			// reached or the log has no more.
			var page api.AuditPage
			for {
				q.Limit = min(limit-len(page.Entries), api.MaxAuditLimit)
				p, err := c.client().Audit(cmd.Context(), q)
				if err != nil {
					return err
				}
				page.Entries, page.Next = append(page.Entries, p.Entries...), p.Next
				if p.Next == 0 || len(page.Entries) >= limit {
					break
				}
				q.Before = p.Next
			}
			if page.Entries == nil {
				page.Entries = []api.AuditEntry{}
			}
			return c.print(page, func() { printAudit(c.out, page) })
		},
	}
	cmd.Flags().StringVar(&q.Cluster, "cluster", "", "only requests that name this cluster")
	cmd.Flags().StringVar(&q.Principal, "principal", "", `only this caller: a principal as shown, or its first word ("token:<id>")`)
	cmd.Flags().StringVar(&since, "since", "", "only records from this time on (RFC 3339, or a duration ago: 24h)")
	cmd.Flags().StringVar(&until, "until", "", "only records before this time (RFC 3339, or a duration ago)")
	cmd.Flags().Uint64Var(&q.Before, "before", 0, "only records older than this SEQ (to read on from an earlier listing)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many records")
	return cmd
}

// parseWhen reads an RFC 3339 time, or a duration before now; "" is no
// bound.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-23T12:00:00Z) nor a duration ago (24h)", s)
	}
	return now.Add(-d), nil
}

// printAudit is the table of moltctl audit: one row per record, newest
// first. REQUEST is the method and path (a record kept from the audit
// trail of releases before the log shows its action); NOTE holds a
// refusal's rule, an override's reason, what was done, and how many of
// the caller's refusals were left out before this one.
func printAudit(w io.Writer, page api.AuditPage) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tPRINCIPAL\tROLE\tREQUEST\tSTATUS\tNOTE")
	for _, e := range page.Entries {
		req := e.Method + " " + e.Path
		if e.Method == "" {
			req = e.Action
			if e.Cluster != "" {
				req += " " + e.Cluster
			}
		}
		status := "-"
		if e.Status != 0 {
			status = strconv.Itoa(e.Status)
		}
		var note []string
		if e.Rule != "" {
			note = append(note, e.Outcome+": "+e.Rule)
		} else if e.Outcome != api.AuditOK {
			note = append(note, e.Outcome)
		}
		if e.Reason != "" {
			note = append(note, "reason: "+e.Reason)
		}
		if e.Detail != "" {
			note = append(note, e.Detail)
		}
		if e.Suppressed > 0 {
			note = append(note, fmt.Sprintf("(%d earlier refusals not recorded)", e.Suppressed))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.UTC().Format(time.RFC3339), dash(e.Principal), dash(e.Role), req, status, strings.Join(note, "; "))
	}
	tw.Flush()
	if page.Next != 0 {
		fmt.Fprintf(w, "# older records: moltctl audit --before %d\n", page.Next)
	}
}
