// Command moltctl is the operator's CLI for molt's coordinator API.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/version"
)

type cli struct {
	server string
	// config, caFile, token and tokenFile say how to trust the
	// coordinator and who the operator is (config.go).
	config, caFile, token, tokenFile string
	output                           string
	out                              io.Writer
	// poll is the pause between two reads of a run being waited for.
	poll time.Duration
	// api is built from --server before any command runs; one client per
	// invocation, so a read after a write sees that write (api/consistency.go).
	api *client.Client
	// hc and bearer reach a member other than --server's (member check).
	hc     *http.Client
	bearer string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := newRoot(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "moltctl:", err)
		os.Exit(1)
	}
}

func newRoot(out io.Writer) *cobra.Command { return (&cli{out: out, poll: time.Second}).root() }

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{Use: "moltctl", Short: "Drive molt's coordinator", SilenceUsage: true, SilenceErrors: true, PersistentPreRunE: c.connect,
		Version: version.Get().String()}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVarP(&c.server, "server", "s", os.Getenv("MOLT_SERVER"), "coordinator URL, or the members' URLs separated by commas (env MOLT_SERVER; default https://127.0.0.1:7080)")
	root.PersistentFlags().StringVar(&c.config, "config", os.Getenv("MOLTCONFIG"), "configuration file (env MOLTCONFIG; default "+defaultConfigPath()+")")
	root.PersistentFlags().StringVar(&c.caFile, "ca-file", os.Getenv("MOLT_CA_FILE"), "the cluster CA certificate to trust the coordinator by (env MOLT_CA_FILE)")
	root.PersistentFlags().StringVar(&c.token, "token", os.Getenv("MOLT_TOKEN"), "API token (env MOLT_TOKEN)")
	root.PersistentFlags().StringVar(&c.tokenFile, "token-file", os.Getenv("MOLT_TOKEN_FILE"), "file holding an API token (env MOLT_TOKEN_FILE)")
	root.PersistentFlags().StringVarP(&c.output, "output", "o", "text", "output format: text, json or yaml")
	root.AddCommand(c.clusterCmd(), c.releaseCmd(), c.upgradeCmd(), c.poolCmd(), c.nodeCmd(), c.memberCmd(), c.maintenanceCmd(), c.preflightCmd(), c.tokenCmd(), c.secretsCmd(), c.auditCmd(), c.channelCmd(), c.sequenceCmd(), c.backupCmd())
	return root
}

func (c *cli) client() *client.Client { return c.api }

// connect builds the client: --server takes one coordinator URL or the
// members' URLs separated by commas, and moltctl fails over between them.
// Flags and environment variables override the configuration file.
func (c *cli) connect(*cobra.Command, []string) error {
	path, named := c.config, c.config != ""
	if !named {
		path = defaultConfigPath()
	}
	fc, err := loadConfig(path, named)
	if err != nil {
		return err
	}
	server := first(c.server, fc.Server, "https://127.0.0.1:7080")
	eps, err := client.ParseEndpoints(server)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	hc, err := httpClient(first(c.caFile, fc.CAFile))
	if err != nil {
		return err
	}
	c.api = client.NewEndpoints(eps, hc)
	tok := first(c.token, fc.Token)
	if tf := first(c.tokenFile, fc.TokenFile); tok == "" && tf != "" {
		if tok, err = readToken(tf); err != nil {
			return err
		}
	}
	c.api.SetBearerToken(tok)
	c.hc, c.bearer = hc, tok
	return nil
}

// first returns the first non-empty string.
func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// print renders v as JSON or YAML, or calls text for the human format.
func (c *cli) print(v any, text func()) error {
	switch c.output {
	case "json":
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		return yaml.NewEncoder(c.out).Encode(generic)
	case "text", "":
		text()
		return nil
	}
	return fmt.Errorf("--output %q: want text, json or yaml", c.output)
}

func readBody(path string, v any) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	// YAML is a superset of JSON: accept either.
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	js, err := json.Marshal(generic)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (c *cli) clusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Clusters"}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List clusters", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		var cs []api.Cluster
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/clusters", nil, &cs); err != nil {
			return err
		}
		return c.print(cs, func() {
			fmt.Fprintf(c.out, "%-20s %-10s %-10s %-10s %s\n", "NAME", "KIND", "VERSION", "TARGET", "UPGRADE")
			for _, cl := range cs {
				up := "-"
				if u := cl.Status.Upgrade; u != nil {
					up = string(u.State)
				}
				fmt.Fprintf(c.out, "%-20s %-10s %-10s %-10s %s\n", cl.Spec.Name, cl.Spec.Kind, cl.Status.Version, cl.Spec.Version, up)
			}
		})
	}})
	cmd.AddCommand(&cobra.Command{Use: "get NAME", Short: "Show a cluster's spec and status", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		var cl api.Cluster
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("clusters", args[0]), nil, &cl); err != nil {
			return err
		}
		return c.print(cl, func() { printCluster(c.out, cl) })
	}})
	apply := &cobra.Command{Use: "apply -f FILE", Short: "Register or update a cluster from a JSON/YAML file", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		f, _ := cmd.Flags().GetString("file")
		var spec api.ClusterSpec
		if err := readBody(f, &spec); err != nil {
			return err
		}
		if pf, _ := cmd.Flags().GetString("maintenance-policy"); pf != "" {
			// Stored with the spec in one request: a new cluster is
			// never seen by the scheduler without it.
			spec.MaintenancePolicy = new(api.MaintenancePolicy)
			if err := readBody(pf, spec.MaintenancePolicy); err != nil {
				return err
			}
		}
		var cl api.Cluster
		if _, err := c.client().Do(cmd.Context(), http.MethodPut, apiPath("clusters", spec.Name), spec, &cl); err != nil {
			return err
		}
		return c.print(cl, func() {
			fmt.Fprintf(c.out, "cluster %s registered at %s\n", cl.Spec.Name, cl.Status.Version)
			if spec.MaintenancePolicy != nil {
				fmt.Fprintf(c.out, "maintenance policy stored with it (%d exclusion(s))\n", len(spec.MaintenancePolicy.Exclusions))
			}
		})
	}}
	apply.Flags().StringP("file", "f", "-", "file with the cluster spec (- for stdin)")
	apply.Flags().String("maintenance-policy", "", "file with the maintenance policy (JSON or YAML, as `maintenance set` takes) to store with the spec, in the same request; it replaces the spec's maintenancePolicy")
	cmd.AddCommand(apply, c.whyCmd())
	return cmd
}

func printCluster(w io.Writer, cl api.Cluster) {
	fmt.Fprintf(w, "cluster %s (%s)  spec.version %s  status.version %s\n", cl.Spec.Name, cl.Spec.Kind, cl.Spec.Version, cl.Status.Version)
	fmt.Fprintf(w, "nodes per version: %v\n", cl.Status.Versions)
	for _, p := range cl.Spec.Pools {
		fmt.Fprintf(w, "  pool %-12s %-15s %d node(s)\n", p.Name, p.Role, len(p.Nodes))
	}
	for _, a := range cl.Status.Agents {
		state := "healthy"
		switch {
		case a.Missing:
			state = "MISSING"
		case !a.Healthy:
			state = "unhealthy"
		}
		fmt.Fprintf(w, "  agent %-12s %-9s molt %s kubelet %s containerd %s\n", a.Node, state, dash(a.AgentVersion), a.Kubelet, a.Containerd)
	}
	if u := cl.Status.Upgrade; u != nil {
		fmt.Fprintf(w, "upgrade %s: %s → %s, %s\n", u.ID, u.From, u.To, u.State)
	}
}

func (c *cli) releaseCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "release", Short: "The release catalog"}
	cmd.AddCommand(&cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		var rs []api.Release
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/releases", nil, &rs); err != nil {
			return err
		}
		return c.print(rs, func() {
			for _, r := range rs {
				fmt.Fprintf(c.out, "%-10s end of support %s  channels %v\n", r.Version, r.EndOfSupport.Format("2006-01-02"), r.Channels)
			}
		})
	}})
	put := &cobra.Command{Use: "apply -f FILE", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		f, _ := cmd.Flags().GetString("file")
		var r api.Release
		if err := readBody(f, &r); err != nil {
			return err
		}
		if _, err := c.client().Do(cmd.Context(), http.MethodPut, apiPath("releases", r.Version), r, &r); err != nil {
			return err
		}
		return c.print(r, func() { fmt.Fprintf(c.out, "release %s stored\n", r.Version) })
	}}
	put.Flags().StringP("file", "f", "-", "file with the release (- for stdin)")
	cmd.AddCommand(put)
	return cmd
}

func (c *cli) upgradeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "upgrade", Short: "Cluster upgrades"}
	start := &cobra.Command{Use: "start CLUSTER VERSION", Short: "Start (or with --dry-run, plan) an upgrade", Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, args []string) error {
		dry, _ := cmd.Flags().GetBool("dry-run")
		watch, _ := cmd.Flags().GetBool("watch")
		req := api.UpgradeRequest{Version: args[1], DryRun: dry}
		if dry {
			var plan api.Plan
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, apiPath("clusters", args[0], "upgrade"), req, &plan); err != nil {
				return err
			}
			return c.print(plan, func() { printPlan(c.out, plan) })
		}
		var u api.Upgrade
		if _, err := c.client().Do(cmd.Context(), http.MethodPost, apiPath("clusters", args[0], "upgrade"), req, &u); err != nil {
			return err
		}
		if watch {
			return c.watch(cmd.Context(), args[0], u.ID)
		}
		return c.print(u, func() {
			fmt.Fprintf(c.out, "upgrade %s accepted: %s → %s; preflight %s runs first (moltctl upgrade watch %s)\n", u.ID, u.From, u.To, u.Preflight, args[0])
		})
	}}
	start.Flags().Bool("dry-run", false, "only check the rules and print the plan")
	start.Flags().Bool("watch", false, "watch the upgrade until it ends")
	cmd.AddCommand(start)
	cmd.AddCommand(&cobra.Command{Use: "status CLUSTER", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		var u api.Upgrade
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, apiPath("clusters", args[0], "upgrade"), nil, &u); err != nil {
			return err
		}
		return c.print(u, func() { renderUpgrade(c.out, &u, time.Now()) })
	}})
	cmd.AddCommand(&cobra.Command{Use: "watch CLUSTER", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
		return c.watch(cmd.Context(), args[0], "")
	}})
	return cmd
}

// watch redraws the upgrade's progress until it leaves running. With an
// id (upgrade start --watch) it waits for that upgrade: any member serves
// reads from the state it has applied, which can trail the leader that
// just created the upgrade, and the previous upgrade's "done" must not end
// the watch.
func (c *cli) watch(ctx context.Context, cluster, id string) error {
	tty := c.output == "text" || c.output == ""
	for {
		var u api.Upgrade
		_, err := c.client().Do(ctx, http.MethodGet, apiPath("clusters", cluster, "upgrade"), nil, &u)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && (id == "" || u.ID == id) {
			if tty {
				fmt.Fprint(c.out, "\033[H\033[2J")
				renderUpgrade(c.out, &u, time.Now())
			} else if err := c.print(u, nil); err != nil {
				return err
			}
			if u.State == api.UpgradeRefused {
				return fmt.Errorf("upgrade %s refused by preflight %s: %s", u.ID, u.Preflight, strings.Join(u.RefusedChecks, ", "))
			}
			if !inProgress(&u) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.poll):
		}
	}
}

// inProgress is the coordinator's InProgress; a member before 0.2.0 does
// not send it, so there a running upgrade, or one waiting for its
// preflight, counts as in progress too.
func inProgress(u *api.Upgrade) bool {
	return u.InProgress || u.State == api.UpgradeRunning || u.State == api.UpgradePreflight
}

func (c *cli) poolCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "Pool upgrade commands"}
	for _, verb := range []string{api.PoolCancel, api.PoolResume, api.PoolRollback, api.PoolComplete} {
		cmd.AddCommand(&cobra.Command{Use: verb + " CLUSTER POOL", Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, args []string) error {
			var u api.Upgrade
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, apiPath("clusters", args[0], "pools", args[1], "upgrade", verb), struct{}{}, &u); err != nil {
				return err
			}
			return c.print(u, func() { fmt.Fprintf(c.out, "pool %s: %s done\n", args[1], verb) })
		}})
	}
	return cmd
}

// nodeCmd holds the node commands: retry a node whose upgrade failed (its
// pool is halted until then); the retry is a new attempt with new
// operation IDs.
func (c *cli) nodeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Node upgrade commands"}
	cmd.AddCommand(&cobra.Command{Use: "retry CLUSTER NODE", Short: "Retry a node whose upgrade failed",
		Long: "Retry a node whose upgrade failed. The coordinator answers 204 No Content: there is no upgrade to print, so with -o json or -o yaml nothing is printed and the exit status tells (moltctl upgrade status shows the new attempt).",
		Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, args []string) error {
			// The answer is 204 with no body: nothing to decode, nor to
			// print as if it were an upgrade.
			if _, err := c.client().Do(cmd.Context(), http.MethodPost, apiPath("clusters", args[0], "nodes", args[1], "retry"), struct{}{}, nil); err != nil {
				return err
			}
			if c.output == "text" || c.output == "" {
				fmt.Fprintf(c.out, "node %s: retrying\n", args[1])
			}
			return nil
		}})
	return cmd
}

func (c *cli) memberCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "member", Short: "Coordinator Raft members"}
	cmd.AddCommand(&cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		var ms []api.Member
		if _, err := c.client().Do(cmd.Context(), http.MethodGet, "/v1/members", nil, &ms); err != nil {
			return err
		}
		return c.print(ms, func() { renderMembers(c.out, ms) })
	}})
	cmd.AddCommand(c.memberCheckCmd())
	return cmd
}
