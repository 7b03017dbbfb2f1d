package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	pollpkg "github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/trust"
)

// ClusterName is the name the lab cluster is registered under.
const ClusterName = "lab"

// Config is what an end-to-end environment needs.
type Config struct {
	// Lab configures the cluster (topology, starting version, cache).
	Lab lab.Config
	// BinDir holds molt-coordinator, molt-agent and moltctl (`make build`).
	BinDir string
	// WorkDir holds the members' data directories and logs and the
	// published artifacts.
	WorkDir string
	// Members is the number of coordinator members (3).
	Members int
	// BasePort is member 1's HTTP port; Raft is the next, member 2 the
	// next two, and so on.
	BasePort int
	// Releases are the versions published and registered in the catalog.
	Releases []string
	// DrainTimeout bounds each node's best-effort drain (SPEC: at most
	// 20 minutes; the lab's PDB-protected Deployment drains in seconds).
	DrainTimeout time.Duration
	// MIG, when set, adds a MIG-backed worker pool of lab instance groups
	// (mig.go) beside the bare-metal pools.
	MIG *MIGPool
	// ConcurrentWorkerPools is how many worker pools the upgrades this
	// environment starts run at once (0: the coordinator's default, 1).
	ConcurrentWorkerPools int
	// Out receives progress lines; Log structured detail.
	Out io.Writer
	Log *slog.Logger
	// AlertFor, when set, replaces every for: of the alert rules the
	// lab's Prometheus evaluates (prometheus.go).
	AlertFor time.Duration
	// GateInterval is the members' --gate-interval, AgentHealthTimeout
	// the agents' --health-timeout (0: their defaults).
	GateInterval       time.Duration
	AgentHealthTimeout time.Duration
	// ProtectionAge is the members' --protection-age (0: the default,
	// 7 days): how long automatic upgrades leave a node alone for its
	// safe-to-evict=false pods.
	ProtectionAge time.Duration
	// AgentBinary is the molt-agent installed on every host, by
	// AgentInstallScript (an install.sh beside the unit it installs):
	// an earlier release's, whose agents an upgrade's molt step then
	// replaces. Empty: BinDir's molt-agent, the module's install.sh.
	AgentBinary, AgentInstallScript string
	// NoPrometheus leaves the lab's Prometheus out (tests that read no
	// alert or gate).
	NoPrometheus bool
}

// Env is a running environment: lab, members, agents.
type Env struct {
	cfg     Config
	Lab     *lab.Lab
	Members []*Member
	hc      *http.Client
	client  *client.Client
	// prom is the lab's Prometheus (prometheus.go), exporter what this
	// process serves it.
	prom     *exec.Cmd
	promDone chan struct{}
	exporter *labExporter
	// caPin, adminToken and bootstrapToken are the coordinator's trust:
	// the CA's pin agents check it by, the first admin's token, and the
	// token the hosts' agents enroll with.
	caPin, adminToken, bootstrapToken string
	// kubeconfig is the cluster's admin kubeconfig, as registered.
	kubeconfig string
	// groups serves the lab's instance groups (MIG set).
	groups *lab.GroupService
}

// Up brings the lab network up, starts the coordinator members on it,
// brings the hosts up with molt-agent installed on each (pointed at every
// member), publishes and registers the releases and registers the cluster.
// Everything already in place is reused.
func Up(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.BasePort == 0 {
		cfg.BasePort = 7080
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Env{cfg: cfg}
	artifacts := filepath.Join(cfg.WorkDir, "artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return nil, err
	}
	// The lab's hosts share two cores: three at a time fetch and hash the
	// release in a preflight, not all of them at once (docs/preflight.md).
	common := []string{"--artifact-dir", artifacts, "--log-level", "info", "--preflight-artifact-wave", "3"}
	if cfg.DrainTimeout > 0 {
		// The lab's MIG surge nodes get the same short bound as its
		// bare-metal ones (the coordinator's default for them is an hour).
		common = append(common, "--drain-timeout", cfg.DrainTimeout.String(), "--surge-drain-timeout", cfg.DrainTimeout.String())
	}
	if cfg.GateInterval > 0 {
		common = append(common, "--gate-interval", cfg.GateInterval.String())
	}
	if cfg.ProtectionAge > 0 {
		common = append(common, "--protection-age", cfg.ProtectionAge.String())
	}
	e.Members = memberSet(cfg.Members, cfg.BasePort, cfg.WorkDir, common)

	var urls []string
	for _, m := range e.Members {
		urls = append(urls, m.URL())
	}
	bin := func(name string) string { return filepath.Join(cfg.BinDir, name) }
	script, agentBin := cfg.AgentInstallScript, cfg.AgentBinary
	if script == "" {
		script = filepath.Join(cfg.Lab.ModuleDir, "systemd", "install.sh")
	}
	if agentBin == "" {
		agentBin = bin("molt-agent")
	}
	lcfg := cfg.Lab
	lcfg.AfterHost = func(ctx context.Context, h *lab.Host, spec lab.HostSpec) error {
		args := []string{"coordinator=" + strings.Join(urls, ","), "token=" + e.bootstrapToken, "ca_pin=" + e.caPin, "cluster=" + ClusterName, "node=" + spec.Name}
		if cfg.AgentHealthTimeout > 0 {
			args = append(args, "health-timeout="+cfg.AgentHealthTimeout.String())
		}
		return lab.InstallAgent(ctx, h, script, agentBin, args...)
	}
	l, err := lab.New(lcfg)
	if err != nil {
		return nil, err
	}
	e.Lab = l

	// Everything the lab and the releases are made from, before anything
	// starts: a missing build fails here, not halfway through.
	for _, v := range append([]string{l.Config().Version}, cfg.Releases...) {
		if _, err := l.EnsureInputs(ctx, v); err != nil {
			return e, err
		}
	}
	e.step("lab network")
	if err := l.Network().Up(ctx); err != nil {
		return e, err
	}
	e.step("coordinator: %d members in namespace %s (HTTP %s, Raft on its loopback)", len(e.Members), l.Network().LabNS(), strings.Join(urls, " "))
	for i, m := range e.Members {
		if i > 0 && !m.joinArgs {
			m.args = append(m.args, "--ca-pin", e.caPin, "--join-token-file", e.Members[0].AdminTokenFile())
			m.joinArgs = true
		}
		if err := m.start(bin("molt-coordinator"), l.Network().LabNS()); err != nil {
			return e, err
		}
		if i == 0 {
			if err := e.trustFirstMember(ctx, urls); err != nil {
				return e, err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.waitReady(wctx, e.hc)
		cancel()
		if err != nil {
			return e, err
		}
	}
	if err := e.waitMembers(ctx, len(e.Members)); err != nil {
		return e, err
	}
	if !cfg.NoPrometheus {
		e.step("prometheus at %s in namespace %s", e.PrometheusURL(), l.Network().LabNS())
		if err := e.startPrometheus(ctx); err != nil {
			return e, err
		}
	}
	// One bootstrap token enrolls every host's agent; it expires in an
	// hour, long enough for the lab to come up.
	if e.bootstrapToken == "" {
		var tok api.Token
		req := api.TokenRequest{Kind: api.TokenBootstrap, Cluster: ClusterName, TTL: "1h", Uses: len(l.Config().Topology.Hosts), Description: "lab agents"}
		if _, err := e.API().Do(ctx, http.MethodPost, "/v1/tokens", req, &tok); err != nil {
			return e, fmt.Errorf("bootstrap token: %w", err)
		}
		e.bootstrapToken = tok.Secret
	}
	e.step("releases %s: artifacts in %s, served by every member at /artifacts/", strings.Join(cfg.Releases, ", "), artifacts)
	for _, v := range cfg.Releases {
		rel, err := l.PublishRelease(ctx, v, artifacts, "/artifacts")
		if err != nil {
			return e, err
		}
		if _, err := e.API().Do(ctx, http.MethodPut, "/v1/releases/"+rel.Version, rel, nil); err != nil {
			return e, fmt.Errorf("register release %s: %w", v, err)
		}
	}
	// Registered first so agents find their cluster as soon as they start;
	// registered again with the admin kubeconfig once the lab wrote it.
	e.step("register cluster %q", ClusterName)
	if err := e.registerCluster(ctx, ""); err != nil {
		return e, err
	}
	e.step("lab hosts at v%s with molt-agent", l.Config().Version)
	if err := l.Up(ctx); err != nil {
		return e, err
	}
	kc, err := os.ReadFile(l.Kubeconfig())
	if err != nil {
		return e, err
	}
	if cfg.MIG != nil {
		if err := e.upMIG(ctx, agentBin, script, urls); err != nil {
			return e, err
		}
	}
	if err := e.registerCluster(ctx, string(kc)); err != nil {
		return e, err
	}
	if cfg.MIG != nil {
		e.step("waiting for the MIG pool's instances: Nodes Ready at v%s", l.Config().Version)
		if err := e.WaitMIGNodes(ctx, l.Config().Version, 5*time.Minute); err != nil {
			return e, err
		}
	}
	n, err := e.NodeCount(ctx)
	if err != nil {
		return e, err
	}
	e.step("waiting for %d agents", n)
	if err := e.WaitAgents(ctx, 2*time.Minute); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Env) step(format string, args ...any) {
	fmt.Fprintf(e.cfg.Out, "==> "+format+"\n", args...)
}

// API is a client of every member, as agents have: it moves to the next
// member when one is down or has no leader (followers forward writes).
func (e *Env) API() *client.Client { return e.client }

// MoltctlConfig is a moltctl configuration file for this coordinator:
// every member's URL, the cluster CA, the admin token.
func (e *Env) MoltctlConfig() string { return filepath.Join(e.cfg.WorkDir, "moltctl.yaml") }

// trustFirstMember waits for the first member's CA and admin token and
// builds the clients that trust the one and present the other; it writes
// MoltctlConfig for operators.
func (e *Env) trustFirstMember(ctx context.Context, urls []string) error {
	first := e.Members[0]
	var caPEM, tok []byte
	err := poll(ctx, time.Minute, func() (bool, error) {
		var err1, err2 error
		caPEM, err1 = os.ReadFile(first.CAFile())
		tok, err2 = os.ReadFile(first.AdminTokenFile())
		if !first.Running() {
			return false, fmt.Errorf("member %s exited (log %s)", first.ID, first.LogPath)
		}
		return err1 == nil && err2 == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the first member's CA and admin token: %w", err)
	}
	ca, err := trust.ParseCert(caPEM)
	if err != nil {
		return err
	}
	e.caPin = trust.Pin(ca)
	e.adminToken = strings.TrimSpace(string(tok))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	e.hc = &http.Client{Transport: &http.Transport{DialContext: e.Lab.Network().DialContext, TLSClientConfig: trust.ClientConfig(pool, nil)}}
	e.client = client.NewEndpoints(urls, e.hc)
	e.client.SetBearerToken(e.adminToken)
	conf := fmt.Sprintf("server: %s\ncaFile: %s\ntokenFile: %s\n", strings.Join(urls, ","), first.CAFile(), first.AdminTokenFile())
	return os.WriteFile(e.MoltctlConfig(), []byte(conf), 0o600)
}

// Leader returns the member that leads now.
func (e *Env) Leader(ctx context.Context) (*Member, error) {
	return leader(ctx, e.hc, e.adminToken, e.Members)
}

// waitMembers waits until the Raft configuration has n voters and a leader.
func (e *Env) waitMembers(ctx context.Context, n int) error {
	return poll(ctx, time.Minute, func() (bool, error) {
		var list []api.Member
		if _, err := e.API().Do(ctx, http.MethodGet, "/v1/members", nil, &list); err != nil {
			return false, nil
		}
		voters, leaders := 0, 0
		for _, m := range list {
			if m.Voter {
				voters++
			}
			if m.Leader {
				leaders++
			}
		}
		return voters == n && leaders == 1, nil
	})
}

// registerCluster puts the lab's topology as a cluster: one pool per role,
// the admin kubeconfig so the coordinator can cordon, drain and watch Nodes.
func (e *Env) registerCluster(ctx context.Context, kc string) error {
	// The coordinator checks the version ("1.N.X") and refuses it with a
	// problem that names it.
	e.kubeconfig = kc
	spec := api.ClusterSpec{Name: ClusterName, Kind: api.ClusterStandalone, Channel: "regular", Version: strings.TrimPrefix(e.Lab.Config().Version, "v"), Kubeconfig: kc}
	pools := []struct {
		name string
		role lab.Role
	}{{"cplb", lab.RoleControlPlaneLB}, {"cp", lab.RoleControlPlane}, {"lb", lab.RoleLoadBalancer}, {"workers", lab.RoleWorker}}
	for _, p := range pools {
		hosts := e.Lab.Config().Topology.WithRole(p.role)
		if len(hosts) == 0 {
			continue
		}
		pool := api.Pool{Name: p.name, Role: api.Role(p.role)}
		for _, h := range hosts {
			pool.Nodes = append(pool.Nodes, api.Node{Name: h.Name, Address: h.IP})
		}
		spec.Pools = append(spec.Pools, pool)
	}
	if e.groups != nil {
		// The MIG pool, once its groups exist (registration checks them).
		spec.Pools = append(spec.Pools, e.migPool(ctx))
		spec.Cloud = &api.CloudSpec{Provider: api.CloudLab, Endpoint: e.groups.Endpoint()}
	}
	_, err := e.API().Do(ctx, http.MethodPut, "/v1/clusters/"+ClusterName, spec, nil)
	return err
}

// Cluster reads the registered cluster.
func (e *Env) Cluster(ctx context.Context) (api.Cluster, error) {
	var c api.Cluster
	_, err := e.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName, nil, &c)
	return c, err
}

// WaitAgents waits until the agent of every node the cluster's pools list
// (the lab's hosts, the MIG pool's instances) is registered, seen and
// healthy.
func (e *Env) WaitAgents(ctx context.Context, timeout time.Duration) error {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		c, err := e.Cluster(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		nodes := map[string]bool{}
		for _, p := range c.Spec.Pools {
			for _, n := range p.Nodes {
				nodes[n.Name] = true
			}
		}
		want := len(nodes)
		ok := 0
		var missing []string
		for _, a := range c.Status.Agents {
			if !nodes[a.Node] {
				continue
			}
			if a.Registered && !a.Missing && a.Healthy {
				ok++
				delete(nodes, a.Node)
			} else {
				missing = append(missing, a.Node)
			}
		}
		for n := range nodes {
			if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
		last = fmt.Sprintf("%d/%d agents healthy; not yet: %s", ok, want, strings.Join(missing, " "))
		return ok == want, nil
	})
	if err != nil {
		return fmt.Errorf("agents: %s: %w", last, err)
	}
	return nil
}

// Close stops Prometheus and the members (the lab stays; see Down).
func (e *Env) Close() {
	e.stopPrometheus()
	for _, m := range e.Members {
		m.Stop()
	}
}

// Down stops the members and the instance-group service and removes the
// lab (the instances' hosts with it).
func (e *Env) Down(ctx context.Context) error {
	e.Close()
	if e.groups != nil {
		_ = e.groups.Close()
		e.groups = nil
	}
	if e.Lab == nil {
		return nil
	}
	return e.Lab.Down(ctx)
}

// poll calls cond every 250 ms until it returns true, an error, or
// timeout passes (a *poll.TimeoutError wrapping the context's error).
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return pollpkg.Until(ctx, timeout, 250*time.Millisecond, func(context.Context) (bool, string, error) {
		ok, err := cond()
		return ok, "", err
	})
}
