package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

func (c *cli) maintenanceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "Maintenance windows and exclusions"}
	set := &cobra.Command{Use: "set CLUSTER -f FILE", Short: "Store a cluster's maintenance policy", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		f, _ := cmd.Flags().GetString("file")
		var p api.MaintenancePolicy
		if err := readBody(f, &p); err != nil {
			return err
		}
		if _, err := c.client().Do(cmd.Context(), http.MethodPut, apiPath("clusters", args[0], "maintenance-policy"), p, &p); err != nil {
			return err
		}
		return c.print(p, func() {
			fmt.Fprintf(c.out, "maintenance policy of %s stored (%d exclusion(s))\n", args[0], len(p.Exclusions))
		})
	}}
	set.Flags().StringP("file", "f", "-", "policy file, JSON or YAML (- for stdin)")
	cmd.AddCommand(set)
	cmd.AddCommand(&cobra.Command{Use: "get CLUSTER", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		var p api.MaintenancePolicy
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("clusters", args[0], "maintenance-policy"), nil, &p); err != nil {
			return err
		}
		return c.print(p, func() {
			if p.Window != nil {
				fmt.Fprintf(c.out, "window %s – %s %s\n", p.Window.Start.Format(time.RFC3339), p.Window.End.Format(time.RFC3339), p.Window.Recurrence)
			}
			for _, e := range p.Exclusions {
				fmt.Fprintf(c.out, "exclusion %-16s %s – %s %s\n", e.Name, e.Start.Format(time.RFC3339), e.End.Format(time.RFC3339), e.Scope)
			}
		})
	}})
	check := &cobra.Command{Use: "check CLUSTER", Short: "May a change run at a time, and when next?", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		target, _ := cmd.Flags().GetString("target")
		change, _ := cmd.Flags().GetString("change")
		at, _ := cmd.Flags().GetString("at")
		q := url.Values{"target": {target}, "change": {change}}
		if at != "" {
			q.Set("at", at)
		}
		var res api.MaintenanceCheck
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("clusters", args[0], "maintenance-policy", "check")+"?"+q.Encode(), nil, &res); err != nil {
			return err
		}
		return c.print(res, func() {
			if res.Allowed {
				fmt.Fprintf(c.out, "allowed\n")
			} else {
				fmt.Fprintf(c.out, "blocked by %v (%s)\n", res.BlockedBy, res.PauseReason)
			}
			if !res.WindowEnds.IsZero() {
				fmt.Fprintf(c.out, "the window closes: %s\n", res.WindowEnds.Format(time.RFC3339))
			}
			if !res.NextOpportunity.IsZero() {
				fmt.Fprintf(c.out, "next opportunity: %s\n", res.NextOpportunity.Format(time.RFC3339))
			}
		})
	}}
	check.Flags().String("target", "nodes", "controlPlane or nodes")
	check.Flags().String("change", "minor", "minor, patch or disruption")
	check.Flags().String("at", "", "RFC 3339 time (default: now)")
	cmd.AddCommand(check)
	return cmd
}
