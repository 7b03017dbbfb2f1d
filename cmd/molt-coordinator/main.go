// Command molt-coordinator runs one member of molt's Raft-replicated
// coordinator and serves the /v1 REST API.
//
// The embedded default is one member on loopback with its state under
// --data-dir: a fresh data directory with no --join bootstraps a new
// cluster of one.
//
// Every flag has an environment fallback MOLT_COORDINATOR_<FLAG> (upper
// case, dashes as underscores), which is how /etc/molt/coordinator.env
// configures molt-coordinator.service.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/internal/envflag"
	"github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/internal/tlsaccept"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/metrics"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/seal"
	"github.com/moltproject/molt/systemd"
	"github.com/moltproject/molt/trust"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "molt-coordinator:", err)
		os.Exit(1)
	}
}

func run() error {
	def := coordinator.DefaultConfig()
	dataDir := flag.String("data-dir", "/var/lib/molt-coordinator", "directory for the Raft log, snapshots and state")
	httpAddr := flag.String("http-addr", "127.0.0.1:7080", "address of the REST API")
	raftAddr := flag.String("raft-addr", "127.0.0.1:7081", "address of the Raft transport")
	nodeID := flag.String("node-id", "", "this member's ID (default: derived from --raft-addr)")
	bootstrap := flag.Bool("bootstrap", false, "start a new cluster (alone if no peers); implied on a fresh --data-dir without --join")
	join := flag.String("join", "", "HTTP address of a member to join (host:port)")
	caCert := flag.String("ca-cert", "", "with --bootstrap: use this CA certificate (PEM) instead of creating one; copied to <data-dir>/tls")
	caKey := flag.String("ca-key", "", "the key of --ca-cert")
	caPin := flag.String("ca-pin", "", "with --join: the cluster CA's pin, sha256:<hex> of its public key (printed by the first member)")
	joinToken := flag.String("join-token", "", "with --join: an admin API token")
	joinTokenFile := flag.String("join-token-file", "", "with --join: a file holding an admin API token")
	tlsSAN := flag.String("tls-san", "", "extra host names and IP addresses for this member's certificate, comma-separated")
	tick := flag.Duration("tick", def.TickInterval, "leader tick interval")
	maxWork := flag.Int("max-concurrent-work", def.MaxConcurrentWork, "work items (cordon, drain, cluster steps) the leader runs at once; more wait for a later tick")
	backupKeep := flag.Int("backup-keep", 0, "etcd backups kept per cluster, newest first (0: the default, 5; docs/backup.md)")
	addonRollout := flag.Duration("addon-rollout-timeout", def.AddonRolloutTimeout, "one attempt of the add-ons step: apply the release's add-ons and wait this long for them to roll out")
	artifactWave := flag.Int("preflight-artifact-wave", def.PreflightArtifactWave, "hosts of a preflight run that fetch and check the release's artifacts at a time (negative: all at once); a run waits 2m per wave")
	apiUnavailable := flag.Duration("api-unavailable-timeout", def.APIUnavailableTimeout, "how long a cluster call is repeated while the cluster's API server cannot be reached or is unavailable, before its step fails")
	cloudRetry := flag.Duration("cloud-retry-interval", def.CloudRetryInterval, "how long a MIG step that waits for cloud quota or capacity waits before it tries again")
	auditMax := flag.Int("audit-max-entries", def.AuditMaxEntries, "the audit log keeps at most this many records of operators' requests, and as many of agents' (docs/security.md)")
	auditAge := flag.Duration("audit-max-age", def.AuditMaxAge, "the audit log also drops records older than this (at least 1h; 0: only --audit-max-entries bounds it)")
	healthTimeout := flag.Duration("health-timeout", def.HealthTimeout, "how long an upgrade's final health step is tried before the upgrade fails (0: until it passes); recorded in each upgrade when it starts")
	gateTimeout := flag.Duration("gate-timeout", def.GateTimeout, "how long a node's health gates may stay red before the node fails (0: until green); recorded in each upgrade when it starts")
	agentTimeout := flag.Duration("agent-timeout", def.AgentTimeout, "how long one host's molt-agent replacement in an upgrade's molt step may take until the new agent reports (0: no deadline); recorded in each upgrade when it starts")
	gateInterval := flag.Duration("gate-interval", def.GateInterval, "how often a node's red or soaking health gates are looked at again")
	schedInterval := flag.Duration("scheduler-interval", def.SchedulerInterval, "the longest the leader goes without a pass of the automatic-upgrade scheduler (it also passes on every change and when a window opens)")
	perFamily := flag.Int("auto-upgrade-per-family", schedule.DefaultPerFamily, "upgrades in progress at once, automatic ones start only below it, in a family (an admin cluster and its user clusters; a standalone cluster alone)")
	regHold := flag.Duration("registration-hold", def.RegistrationHold, "how long automatic upgrades leave a cluster registered without a maintenance policy alone; storing any policy ends it (0: no hold)")
	fleetCap := flag.Int("auto-upgrade-fleet", 0, "upgrades in progress at once in the whole fleet that automatic starts respect (0: no bound beyond --auto-upgrade-per-family)")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	artifactDir := flag.String("artifact-dir", "", "directory served read-only at /artifacts/ (default: <data-dir>/artifacts)")
	webView := flag.Bool("web", true, "serve the web view at /ui/ (sign-in with an API token; docs/web.md)")
	webSessionTTL := flag.Duration("web-session-ttl", httpapi.DefaultSessionTTL, "how long a web view session lasts at most (never past its token's expiry)")
	keyFile := flag.String("encryption-key-file", "", "key file sealing kubeconfigs at rest, mode 0600, the same on every member (default: <data-dir>/"+encryptionKeyFile+"; created on bootstrap, received on join)")
	newKey := flag.Bool("new-encryption-key", false, "put a new primary key first in --encryption-key-file (creating it when missing), print its ID and exit; docs/security.md")
	kcfg := kube.DefaultConfig()
	flag.DurationVar(&kcfg.DrainTimeout, "drain-timeout", kcfg.DrainTimeout, "best-effort drain of a bare-metal (or blue/green) node: go on after this long even with pods left behind (at most 20m)")
	flag.DurationVar(&kcfg.SurgeDrainTimeout, "surge-drain-timeout", kcfg.SurgeDrainTimeout, "best-effort drain of a MIG surge pool's node: PodDisruptionBudgets and grace periods are honoured this long (at most 1h)")
	flag.DurationVar(&kcfg.MaxGracePeriod, "max-grace-period", kcfg.MaxGracePeriod, "cap on each pod's termination grace period during a drain (at most 1h)")
	flag.DurationVar(&kcfg.ProtectionAge, "protection-age", kcfg.ProtectionAge, "automatic upgrades do not evict safe-to-evict=false pods younger than this")
	showVersion := flag.Bool("version", false, "print molt's version and exit")
	if err := envflag.Parse(flag.CommandLine, os.Args[1:], "MOLT_COORDINATOR_"); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version.Get())
		return nil
	}
	if err := kcfg.Validate(); err != nil {
		return err // a drain bound past SPEC's caps, named by its rule
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *nodeID == "" {
		*nodeID = "molt-" + strings.NewReplacer(":", "-", ".", "-").Replace(*raftAddr)
	}
	if err := ensureDataDir(*dataDir); err != nil {
		return err
	}
	if *artifactDir == "" {
		*artifactDir = filepath.Join(*dataDir, "artifacts")
	}
	if err := os.MkdirAll(*artifactDir, 0o755); err != nil {
		return err
	}
	if *keyFile == "" {
		*keyFile = filepath.Join(*dataDir, encryptionKeyFile)
	}
	if *newKey {
		id, err := seal.AddPrimaryKey(*keyFile)
		if err != nil {
			return fmt.Errorf("--new-encryption-key: %w", err)
		}
		fmt.Printf("new primary encryption key %s in %s: copy this file to every member, restart them one by one, then run moltctl secrets rewrap\n", id, *keyFile)
		return nil
	}
	fresh := !raftstore.HasState(*dataDir)
	if fresh && *join == "" {
		*bootstrap = true
	}
	if *join != "" && *bootstrap {
		return errors.New("--join and --bootstrap exclude each other")
	}
	hosts := hostsOf([]string{*httpAddr, *raftAddr}, *tlsSAN)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	adminToken := *joinToken
	if *joinTokenFile != "" {
		b, err := os.ReadFile(*joinTokenFile)
		if err != nil {
			return fmt.Errorf("--join-token-file: %w", err)
		}
		adminToken = strings.TrimSpace(string(b))
	}
	var mt *memberTLS
	var err error
	switch {
	case fresh && *join != "":
		if err := fetchMemberCert(ctx, log, *dataDir, *keyFile, *join, *caPin, adminToken, api.JoinRequest{ID: *nodeID, RaftAddr: *raftAddr, HTTPAddr: *httpAddr}, hosts); err != nil {
			return err
		}
		mt, err = loadTLS(*dataDir, *nodeID, hosts, time.Now())
	case fresh:
		mt, err = bootstrapTLS(*dataDir, *caCert, *caKey, *nodeID, hosts, time.Now())
	default:
		mt, err = loadTLS(*dataDir, *nodeID, hosts, time.Now())
	}
	if err != nil {
		return err
	}
	admin, adminPath, err := bootstrapAdmin(*dataDir, fresh && *bootstrap)
	if err != nil {
		return err
	}
	keyring, err := loadKeyring(log, *keyFile, fresh && *bootstrap)
	if err != nil {
		return err
	}

	cfg := def
	cfg.Raft.NodeID = *nodeID
	cfg.Raft.RaftAddr = *raftAddr
	cfg.Raft.HTTPAddr = *httpAddr
	cfg.Raft.DataDir = *dataDir
	cfg.Raft.Bootstrap = *bootstrap
	cfg.Raft.TLS = mt.raftTLS()
	if applyHook != nil {
		cfg.Raft.ApplyHook = applyHook(*dataDir, log)
	}
	cfg.WatchdogSlack = systemd.WatchdogInterval()
	cfg.CA = mt.ca
	cfg.BootstrapAdmin = admin
	cfg.Keyring = keyring
	cfg.TickInterval = *tick
	cfg.MaxConcurrentWork = *maxWork
	cfg.AddonRolloutTimeout = *addonRollout
	cfg.BackupKeep = *backupKeep
	cfg.PreflightArtifactWave = *artifactWave
	cfg.APIUnavailableTimeout = *apiUnavailable
	cfg.Logger = log
	cfg.Connector = kubeConnector{cfg: kcfg, log: log}
	cfg.Clouds = newCloudConnector()
	cfg.CloudRetryInterval = *cloudRetry
	cfg.AuditMaxEntries = *auditMax
	cfg.AuditMaxAge = *auditAge
	cfg.HealthTimeout, cfg.GateTimeout, cfg.GateInterval = *healthTimeout, *gateTimeout, *gateInterval
	cfg.AgentTimeout = *agentTimeout
	cfg.SchedulerInterval = *schedInterval
	cfg.RegistrationHold = *regHold
	if *regHold == 0 {
		cfg.RegistrationHold = -1 // none (0 in Config is the default)
	}
	cfg.AutoUpgradeLimits = schedule.Limits{PerFamily: *perFamily, Fleet: *fleetCap}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rec := metrics.NewRecorder(reg)
	cfg.Recorder = rec
	cfg.Raft.TLS.OnHandshakeRefused = func(r tlsaccept.Reason) { rec.HandshakeRefused("raft", string(r)) }

	tcp, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *httpAddr, err)
	}
	// TLS only: a plain HTTP request gets the server's 400 "client sent
	// an HTTP request to an HTTPS server" and reaches no handler. The
	// handshake is bounded before net/http sees the connection (apiListener).
	ln := apiListener(tcp, mt.serverTLS(), func(r tlsaccept.Reason) { rec.HandshakeRefused("api", string(r)) })
	// The leader asks every member what it reads over the members' mutual
	// TLS, as it forwards writes (docs/mixed-versions.md).
	fwd := mt.clientTransport()
	cfg.ProbeMember = httpapi.ProbeMember(fwd)
	c, err := coordinator.New(cfg)
	if err != nil {
		return err
	}
	reg.MustRegister(metrics.NewCoordinatorCollector(c))
	srv := httpapi.NewServer(httpapi.New(httpapi.ServicesOf(c), httpapi.Config{Logger: log, Gatherer: reg, ArtifactDir: *artifactDir, ForwardTransport: fwd,
		DisableWeb: !*webView, SessionTTL: *webSessionTTL}))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
			stop()
		}
	}()
	if *join != "" && fresh {
		if err := joinCluster(ctx, log, *join, mt, adminToken, api.JoinRequest{ID: *nodeID, RaftAddr: c.Store().RaftAddr(), HTTPAddr: *httpAddr}); err != nil {
			return err
		}
	}
	// The coordinator runs from here: leading is what stores the bootstrap
	// admin token waited for below.
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(ctx) }()
	if admin != nil {
		// The member that holds the bootstrap admin token's file (the
		// cluster's first) announces itself — the trust lines, READY to
		// systemd — once the state it serves holds an API token: on a new
		// cluster the file is written before the leader stores the token
		// (ensureBootstrapAdmin, at the start of its term), and a restarted
		// member serves before it has replayed its log; either way a
		// script using the token at once was told "token-unknown". Alone,
		// the member leads and replays within a second; the bound covers
		// a member whose peers are down, which then starts anyway, saying
		// so.
		if err := waitAPIToken(ctx, c, runDone, bootstrapTokenWait); err != nil {
			log.Warn("the state holds no API token yet; the bootstrap admin token works once this member has caught up", "err", err)
		}
	}
	printTrust(mt, adminPath, *httpAddr)
	log.Info("molt-coordinator started", "node_id", *nodeID, "http", *httpAddr, "raft", c.Store().RaftAddr(), "data_dir", *dataDir, "bootstrap", *bootstrap)
	_ = systemd.Ready()
	_ = systemd.Status("serving on " + *httpAddr)
	// Pings only while the Raft apply loop makes progress: a member whose
	// FSM stopped applying is restarted by systemd (docs/agent.md).
	go systemd.Watchdog(ctx, log, c.Healthy)
	runErr := <-runDone
	_ = systemd.Stopping()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	if err := c.Close(); err != nil {
		log.Warn("close", "err", err)
	}
	return runErr
}

// applyHook, when set, makes the store's ApplyHook. Only the fault build
// sets it (faults.go, build tag faults); production binaries have none.
var applyHook func(dataDir string, log *slog.Logger) func()

// joinCluster asks a member to add this one, retrying until a leader
// accepts (members forward the request to the leader). The admin token is
// the credential: it trusts the cluster CA but presents no certificate,
// since the member certificate just received would make the request a
// member's, and a member may not add members.
func joinCluster(ctx context.Context, log *slog.Logger, addr string, mt *memberTLS, token string, req api.JoinRequest) error {
	tr := &http.Transport{TLSClientConfig: trust.ClientConfig(mt.ca.Pool(), nil)}
	cl := client.New("https://"+addr, &http.Client{Timeout: 15 * time.Second, Transport: tr})
	cl.SetBearerToken(token)
	for attempt := 1; ; attempt++ {
		_, err := cl.Do(ctx, http.MethodPost, "/v1/members", req, nil)
		if err == nil {
			log.Info("joined", "via", addr)
			return nil
		}
		if p, ok := err.(*api.Problem); ok && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden) {
			return fmt.Errorf("join via %s refused: %w", addr, err)
		}
		log.Warn("join failed; retrying", "via", addr, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// ensureDataDir creates the data directory and makes it 0700 on every
// start, not only when it is created: it holds the Raft log, the CA key
// and the bootstrap admin token.
func ensureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// encryptionKeyFile is the default key file under the data directory.
const encryptionKeyFile = "encryption.key"

// loadKeyring reads the key ring kubeconfigs are sealed with. A member
// bootstrapping a fresh data directory creates the file; a joining one
// received it with its certificate (fetchMemberCert). Without a file the
// member starts with no key ring: it stores no kubeconfig, and
// coordinator.New refuses to start when its state holds sealed ones.
func loadKeyring(log *slog.Logger, path string, create bool) (*seal.Keyring, error) {
	r, err := seal.LoadKeyFile(path)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, os.ErrNotExist) && create:
		r, err := seal.GenerateKeyFile(path)
		if err != nil {
			return nil, fmt.Errorf("--encryption-key-file: %w", err)
		}
		log.Info("encryption key file created; every member needs a copy", "path", path, "key", r.Primary())
		return r, nil
	case errors.Is(err, os.ErrNotExist):
		log.Warn("no encryption key file: kubeconfigs can be neither stored nor opened (create one with --new-encryption-key, or copy the other members')", "path", path)
		return nil, nil
	}
	return nil, fmt.Errorf("--encryption-key-file: %w", err)
}

// printTrust tells the operator how a client trusts this member: the CA
// file and its pin (agents and joining members take the pin), and where the
// first admin credential is.
func printTrust(mt *memberTLS, adminPath, httpAddr string) {
	fmt.Fprintf(os.Stderr, "molt-coordinator: serving https://%s\n", httpAddr)
	fmt.Fprintf(os.Stderr, "molt-coordinator: cluster CA %s\n", filepath.Join(mt.dir, caCertFile))
	fmt.Fprintf(os.Stderr, "molt-coordinator: CA pin %s\n", mt.ca.Pin())
	if adminPath != "" {
		fmt.Fprintf(os.Stderr, "molt-coordinator: bootstrap admin token in %s (0600); e.g. moltctl --server https://%s --ca-file %s --token-file %s get clusters\n",
			adminPath, httpAddr, filepath.Join(mt.dir, caCertFile), adminPath)
	}
}

// bootstrapTokenWait bounds how long a new cluster's first member waits
// for its bootstrap admin token to be stored before it reports READY.
const bootstrapTokenWait = 30 * time.Second

// waitAPIToken waits until the state holds an API token, or the
// coordinator stops (its Run returned: the result is put back for the
// caller). Any API token will do: a revoked bootstrap token never comes
// back, and once one exists the leader stores no other.
func waitAPIToken(ctx context.Context, c *coordinator.Coordinator, runDone chan error, timeout time.Duration) error {
	return poll.Until(ctx, timeout, 10*time.Millisecond, func(context.Context) (bool, string, error) {
		select {
		case err := <-runDone:
			runDone <- err
			return false, "", fmt.Errorf("the coordinator stopped: %v", err)
		default:
		}
		for _, t := range c.Tokens() {
			if t.Kind == "api" { // statemachine.TokenKindAPI, as the wire says it
				return true, "", nil
			}
		}
		return false, "no API token in the state", nil
	})
}
