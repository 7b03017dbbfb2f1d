package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/internal/testenv"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// readyTimeout bounds the wait for /readyz; the apiserver answers in ~3 s on
// an idle machine, much later on a loaded 2-core one.
const readyTimeout = 2 * time.Minute

// ControlPlane is a running etcd + kube-apiserver + kube-controller-manager.
type ControlPlane struct {
	// Dir holds certificates, data and the components' logs.
	Dir string
	// Kubeconfig is an admin kubeconfig (static token, system:masters).
	Kubeconfig []byte
	// Clientset is an admin client with a raised rate limit.
	Clientset kubernetes.Interface

	rest  *rest.Config
	procs []*process // in start order; stopped in reverse
}

// RESTConfig returns a copy of the admin rest.Config.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.rest) }

// Start runs a dedicated control plane for one test and stops it in
// t.Cleanup. Prefer Shared: a start costs seconds of CPU.
func Start(t testing.TB) *ControlPlane { return StartWith(t, Options{}) }

// Options change a dedicated control plane's flags.
type Options struct {
	// EtcdArgs and APIServerArgs follow the defaults on the command line;
	// a flag given again there wins (the last value of a flag counts).
	EtcdArgs, APIServerArgs []string
}

// StartWith is Start with extra flags, for a control plane at a scale the
// defaults do not hold (the kwok measurement's 15,000 Nodes).
func StartWith(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	bins, missing := findBinaries()
	if missing != "" {
		testenv.Missing(t, "%s", missing)
	}
	cp, err := start(bins, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}

var shared struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Shared returns the package's shared control plane, starting it on first
// use. Tests sharing it must use their own namespaces and node names. The
// package's TestMain must call RunMain so the processes are stopped.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	bins, missing := findBinaries()
	if missing != "" {
		testenv.Missing(t, "%s", missing)
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			shared.err = err
			return
		}
		shared.cp, shared.err = start(bins, dir, Options{})
	})
	if shared.err != nil {
		t.Fatalf("kubetest: shared control plane: %v", shared.err)
	}
	return shared.cp
}

// RunMain runs the tests and then stops the shared control plane, if one
// was started. Its directory (with component logs) is kept when tests fail.
// Use as: func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }.
func RunMain(m *testing.M) int {
	code := m.Run()
	if cp := shared.cp; cp != nil {
		cp.Stop()
		if code == 0 {
			os.RemoveAll(cp.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "kubetest: control-plane logs kept in %s\n", cp.Dir)
		}
	}
	return code
}

// PIDs returns the process id of each running component by name (etcd,
// kube-apiserver, kube-controller-manager), for measurements that read
// their CPU and memory from /proc.
func (cp *ControlPlane) PIDs() map[string]int {
	m := map[string]int{}
	for _, p := range cp.procs {
		if !p.exited() {
			m[p.name] = p.cmd.Process.Pid
		}
	}
	return m
}

// Stop terminates and reaps every process, newest first.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop()
	}
	cp.procs = nil
}

func start(b binaries, dir string, opts Options) (_ *ControlPlane, err error) {
	// cp is not the named result: every failure returns nil, and the
	// processes started so far must still be stopped.
	cp := &ControlPlane{Dir: dir}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	keys, err := newPKI(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, fmt.Errorf("ports: %w", err)
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiPort := ports[2]

	etcd, err := startProcess(dir, "etcd", b.etcd, append([]string{
		"--name=kubetest",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdClient,
		"--advertise-client-urls=" + etcdClient,
		"--listen-peer-urls=" + etcdPeer,
		"--initial-advertise-peer-urls=" + etcdPeer,
		"--initial-cluster=kubetest=" + etcdPeer,
		// Test data is disposable: skip fsync, it dominates latency.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, opts.EtcdArgs...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)

	api, err := startProcess(dir, "kube-apiserver", b.apiserver, append([]string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + keys.serverCert,
		"--tls-private-key-file=" + keys.serverKey,
		"--token-auth-file=" + keys.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + keys.saKey,
		"--service-account-signing-key-file=" + keys.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Pods would otherwise wait for the "default" ServiceAccount of each
		// fresh namespace; these tests never mount tokens.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		// A beta API 1.34 serves as deprecated (removed in 1.37), off by
		// default: tests request it to see apiserver_requested_deprecated_apis
		// (kube's DeprecatedAPIs, preflight's deprecated-apis).
		"--runtime-config=networking.k8s.io/v1beta1=true",
		"--profiling=false",
	}, opts.APIServerArgs...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, api)

	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	cp.Kubeconfig, err = kubeconfig(host, keys)
	if err != nil {
		return nil, err
	}
	cp.rest, err = clientcmd.RESTConfigFromKubeConfig(cp.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// Tests poll; client-go's default 5 QPS limiter would add real waits.
	cp.rest.QPS, cp.rest.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cp.rest)
	if err != nil {
		return nil, err
	}
	cp.Clientset = cs
	if err := waitReady(cs, etcd, api); err != nil {
		return nil, err
	}

	kcfg := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(kcfg, cp.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	kcm, err := startProcess(dir, "kube-controller-manager", b.controllerManager,
		"--kubeconfig="+kcfg,
		// The disruption controller writes PodDisruptionBudget status;
		// without it every eviction of a covered pod gets 429.
		"--controllers=disruption-controller,serviceaccount-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, kcm)
	return cp, nil
}

// waitReady polls /readyz until it answers ok, failing early when etcd or
// the apiserver exits.
func waitReady(cs kubernetes.Interface, procs ...*process) error {
	var last error
	err := poll.Until(context.Background(), readyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		for _, p := range procs {
			if p.exited() {
				return false, "", fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, p.err, p.logTail())
			}
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		last = err
		return err == nil && string(body) == "ok", "", nil
	})
	if te := (*poll.TimeoutError)(nil); errors.As(err, &te) {
		return errors.Join(fmt.Errorf("kube-apiserver not ready after %s; log tail:\n%s",
			readyTimeout, procs[len(procs)-1].logTail()), last)
	}
	return err
}

func kubeconfig(host string, keys *pki) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: keys.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: keys.token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.Write(*cfg)
}
