package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/moltproject/molt/internal/clock"
)

// Config configures an Agent. Paths are host paths: each is joined under
// HostRoot before use, so a test can run the agent on a temporary tree.
type Config struct {
	// Coordinator is the coordinator's base URL, e.g. https://molt:7080, or
	// a comma-separated list of its members' URLs
	// (https://m1:7080,https://m2:7080,https://m3:7080). The agent talks to
	// one member at a time and moves to the next when that one is down or
	// has no leader (see client.Client.Do).
	Coordinator string
	// BootstrapToken and CAPin enroll an agent that holds no valid
	// certificate yet (enroll.go): a token an admin made for this cluster
	// ("abcdef.0123456789abcdef") and the cluster CA's pin
	// ("sha256:<hex>"), which the coordinator must match before anything is
	// sent. Once enrolled, neither is needed until the certificate expires
	// unrenewed.
	BootstrapToken string
	CAPin          string
	// Cluster and Node name the registered Node the agent runs on.
	Cluster, Node string
	// Address is the agent's probe address reported at registration (optional).
	Address string
	// Version is the agent's own version, reported to the coordinator.
	Version string

	// HostRoot is "/" in production; every host path below is joined under it.
	HostRoot string
	// DataDir holds the journal, backups, downloads and the artifact stage.
	DataDir string
	// KubeletBin and ContainerdBin are the binaries UpgradeBinary replaces.
	KubeletBin, ContainerdBin string
	// KubeletUnit and ContainerdUnit are the systemd units that run them.
	KubeletUnit, ContainerdUnit string
	// ManifestDir is the kubelet's static-pod manifest directory.
	ManifestDir string
	// KubeletHealthz is the kubelet's local health endpoint.
	KubeletHealthz string
	// ContainerdSocket is containerd's gRPC socket (a host path).
	ContainerdSocket string
	// Snapshotter unpacks imported images; the CRI's default is overlayfs.
	Snapshotter string
	// EtcdEndpoints are the etcd client URLs the agent asks first (the
	// local member of a stacked control plane by default); the other
	// members are learnt from them (etcd.go). EtcdCAFile, EtcdCertFile and
	// EtcdKeyFile are the host's etcd client credentials, read where they
	// are; a host without EtcdCertFile has no etcd (ErrNoEtcd).
	EtcdEndpoints                         []string
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string

	// HeartbeatInterval is the longest time between two heartbeats; health
	// is also sent at once when it changes. The coordinator's answer to
	// Register overrides it.
	HeartbeatInterval time.Duration
	// HealthCheckInterval is how often health is sampled to detect changes.
	HealthCheckInterval time.Duration
	// HealthTimeout bounds the wait for a restarted component to be healthy;
	// after it the previous binary is restored.
	HealthTimeout time.Duration
	// StaticPodTimeout is the default wait for new static pods.
	StaticPodTimeout time.Duration
	// PollWait is the long-poll duration asked of the coordinator.
	PollWait time.Duration
	// DownloadTimeout bounds one artifact download.
	DownloadTimeout time.Duration
	// ProbeTimeout bounds one TCP dial of ProbePeers.
	ProbeTimeout time.Duration
	// StageMaxBytes bounds the artifact stage (<DataDir>/stage, stage.go):
	// the artifacts an upgrade's CheckArtifacts verified, kept so that
	// the upgrade's operations do not fetch them again. To keep a new
	// artifact the oldest give way; one larger than the bound is verified
	// but not kept. 0 turns staging off (and removes the stage at start).
	StageMaxBytes int64
	// RetryMin and RetryMax bound the backoff when the coordinator is unreachable.
	RetryMin, RetryMax time.Duration

	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Units restarts systemd units; required for binary upgrades.
	Units Units
	// AgentBin is the agent's own binary, which UpdateAgent replaces (the
	// unit's ExecStart). RestartSelf asks systemd to restart the agent's
	// own unit and returns once the job is queued: systemd then stops
	// this process. Both are required for UpdateAgent.
	AgentBin    string
	RestartSelf func(ctx context.Context) error
	// Runtime is containerd; nil connects to ContainerdSocket on first use.
	Runtime Runtime
	// Pods observes the running static pods; nil uses Runtime.
	Pods PodObserver
	// OpenEtcd connects to the host's etcd cluster for the etcd gate of a
	// static-pod upgrade; nil uses the host's etcd client credentials
	// (etcd.go), and a host without them skips the gate (ErrNoEtcd).
	OpenEtcd func(context.Context) (EtcdSampler, error)
	// Hooks is called at every step boundary (crash injection in tests);
	// nil means none.
	Hooks Hooks
	// Clock supplies time; nil means the wall clock.
	Clock Clock
	// Metrics records finished operations and heartbeats; nil records
	// nothing. *metrics.AgentMetrics implements it.
	Metrics Metrics
	// WatchdogSlack is added to every loop's bound before Healthy calls
	// the loop stalled (progress.New): room for what no deadline covers.
	// Under systemd it is the unit's WatchdogSec.
	WatchdogSlack time.Duration
	// LoopHook, when set, is called at the top of every iteration of the
	// agent's loops with the loop's name (LoopMain, LoopHeartbeat). Only
	// a fault build of molt-agent sets it — to wedge a loop in the
	// watchdog's tests by blocking in it; nil in production.
	LoopHook func(ctx context.Context, loop string)
}

// DefaultStageMaxBytes is the default bound of the artifact stage: room
// for a release's kubelet and containerd and its image archives.
const DefaultStageMaxBytes int64 = 2 << 30

// DefaultConfig returns the production defaults. Coordinator, BootstrapToken, CAPin,
// Cluster, Node and Units must still be set.
func DefaultConfig() Config {
	return Config{
		HostRoot:            "/",
		DataDir:             "/var/lib/molt-agent",
		KubeletBin:          "/usr/bin/kubelet",
		ContainerdBin:       "/usr/bin/containerd",
		AgentBin:            "/usr/bin/molt-agent",
		KubeletUnit:         "kubelet.service",
		ContainerdUnit:      "containerd.service",
		ManifestDir:         "/etc/kubernetes/manifests",
		KubeletHealthz:      "http://127.0.0.1:10248/healthz",
		ContainerdSocket:    "/run/containerd/containerd.sock",
		Snapshotter:         "overlayfs",
		EtcdEndpoints:       []string{"https://127.0.0.1:2379"},
		EtcdCAFile:          "/etc/kubernetes/pki/etcd/ca.crt",
		EtcdCertFile:        "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
		EtcdKeyFile:         "/etc/kubernetes/pki/etcd/healthcheck-client.key",
		HeartbeatInterval:   10 * time.Second,
		HealthCheckInterval: 2 * time.Second,
		HealthTimeout:       2 * time.Minute,
		StaticPodTimeout:    5 * time.Minute,
		PollWait:            30 * time.Second,
		DownloadTimeout:     10 * time.Minute,
		ProbeTimeout:        3 * time.Second,
		StageMaxBytes:       DefaultStageMaxBytes,
		RetryMin:            500 * time.Millisecond,
		RetryMax:            30 * time.Second,
	}
}

// Units restarts systemd units. The systemd package implements it over D-Bus.
type Units interface {
	RestartUnit(ctx context.Context, name string) error
}

// Hooks lets tests stop the agent at a step boundary. At is called with
// the operation's ID and the step just reached (see the Step constants);
// a non-nil error aborts the operation as if the process had died there:
// nothing more is journaled and Run returns the error.
type Hooks interface {
	At(ctx context.Context, opID, step string) error
}

// HookFunc adapts a function to Hooks.
type HookFunc func(ctx context.Context, opID, step string) error

// At calls f.
func (f HookFunc) At(ctx context.Context, opID, step string) error { return f(ctx, opID, step) }

// Metrics records what the agent did. It is defined here so the agent
// does not depend on a metrics library; *metrics.AgentMetrics implements it.
// Its methods must be safe for concurrent use.
type Metrics interface {
	// Operation records one finished operation: its kind, result
	// ("succeeded" or "failed") and the time from its start to its finish.
	Operation(kind, result string, d time.Duration)
	// HeartbeatSucceeded records a heartbeat the coordinator accepted at at.
	HeartbeatSucceeded(at time.Time)
	// HeartbeatFailed records a heartbeat that did not reach the coordinator.
	HeartbeatFailed()
	// ArtifactBytes records n bytes of release artifacts an operation got
	// from source: SourceNetwork (fetched from the artifact server,
	// CheckArtifacts included) or SourceStage (copied from the stage).
	ArtifactBytes(source string, n int64)
}

// Sources of artifact bytes (Metrics.ArtifactBytes).
const (
	SourceNetwork = "network"
	SourceStage   = "stage"
)

// nopMetrics stands in for a nil Config.Metrics.
type nopMetrics struct{}

func (nopMetrics) Operation(string, string, time.Duration) {}
func (nopMetrics) HeartbeatSucceeded(time.Time)            {}
func (nopMetrics) HeartbeatFailed()                        {}
func (nopMetrics) ArtifactBytes(string, int64)             {}

// Clock supplies time so backoff and heartbeats can be driven in tests.
type Clock = clock.Clock
