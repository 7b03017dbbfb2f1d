package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/moltproject/molt/api"
)

func (c *cli) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Secrets the coordinator keeps sealed at rest (admin)"}
	rewrap := &cobra.Command{
		Use:   "rewrap",
		Short: "Seal every stored kubeconfig again with the primary encryption key",
		Long: `Seal every stored kubeconfig again with the primary key of the members'
encryption key files, and seal those that earlier releases stored in plain
text. Run it after a new primary key reached every member's key file and
every member restarted; remove the old key only afterwards (docs/security.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res api.RewrapResult
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, "/v1/secrets/rewrap", nil, &res); err != nil {
				return err
			}
			return c.print(res, func() {
				fmt.Fprintf(c.out, "primary key %s\n", res.Key)
				fmt.Fprintf(c.out, "rewrapped: %s\n", list(res.Rewrapped))
				fmt.Fprintf(c.out, "already sealed with it: %s\n", list(res.Current))
				if len(res.Stale) > 0 {
					fmt.Fprintf(c.out, "changed meanwhile, run again: %s\n", list(res.Stale))
				}
			})
		},
	}
	cmd.AddCommand(rewrap)
	return cmd
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}
