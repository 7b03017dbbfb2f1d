package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

func (c *cli) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Bootstrap tokens for agents, API tokens for operators (admin)"}
	var req api.TokenRequest
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token: a bootstrap token with --cluster, an API token with --role",
		Example: `  moltctl token create --cluster lab --ttl 24h --uses 3   # agents of lab enroll with it
  moltctl token create --role operator --description ci    # an operator's API token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Kind = api.TokenBootstrap
			if req.Role != "" {
				req.Kind = api.TokenAPI
			}
			var t api.Token
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, "/v1/tokens", req, &t); err != nil {
				return err
			}
			return c.print(t, func() {
				fmt.Fprintln(c.out, t.Secret)
				if !t.Expires.IsZero() {
					fmt.Fprintf(c.out, "# %s token %s, expires %s; shown once, the coordinator keeps only a hash\n", t.Kind, t.ID, t.Expires.Format(time.RFC3339))
				} else {
					fmt.Fprintf(c.out, "# %s token %s; shown once, the coordinator keeps only a hash\n", t.Kind, t.ID)
				}
			})
		},
	}
	create.Flags().StringVar(&req.Cluster, "cluster", "", "the cluster whose agents a bootstrap token enrolls")
	create.Flags().StringVar(&req.Role, "role", "", "an API token's role: viewer, operator or admin")
	create.Flags().StringVar(&req.TTL, "ttl", "", "lifetime (default 24h for bootstrap tokens, none for API tokens)")
	create.Flags().IntVar(&req.Uses, "uses", 0, "how many agents a bootstrap token enrolls (default 1)")
	create.Flags().StringVar(&req.Description, "description", "", "what the token is for")

	list := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ts []api.Token
			if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/tokens", nil, &ts); err != nil {
				return err
			}
			return c.print(ts, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tKIND\tCLUSTER\tROLE\tUSED\tEXPIRES\tDESCRIPTION")
				for _, t := range ts {
					exp := "never"
					if !t.Expires.IsZero() {
						exp = t.Expires.Format(time.RFC3339)
					}
					used := "-"
					if t.Kind == api.TokenBootstrap {
						used = fmt.Sprintf("%d/%d", t.Used, t.Uses)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, dash(t.Cluster), dash(t.Role), used, exp, t.Description)
				}
				tw.Flush()
			})
		},
	}
	del := &cobra.Command{
		Use: "delete ID", Short: "Revoke a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.client().Do(cmd.Context(), http.MethodDelete, apiPath("tokens", args[0]), nil, nil)
			return err
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
