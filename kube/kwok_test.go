//go:build kwok

package kube_test

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestKwokPoolDrain is the measurement of docs/performance.md's row K1
// (make perf-kwok), not a test of the unit stage: a dedicated control plane
// holds MOLT_KWOK_NODES Nodes (default 500) that kwok plays the kubelet of,
// and molt's kube client cordons, drains (automatic) and uncordons the
// first MOLT_KWOK_POOL of them (default 50) at concurrency 20, as the
// coordinator does for a pool, with the shipped Config (real clock). It
// counts every request molt sends and fails if any pod list is not scoped
// to one node.
//
// Each pool node runs MOLT_KWOK_PODS pods (default 10): one of the
// DaemonSet "agent", on every tenth node one safe-to-evict=false pod (young,
// so an automatic drain leaves it: protected), the rest of the ReplicaSet
// "web" under a PodDisruptionBudget of maxUnavailable 20 %. Every other
// node runs MOLT_KWOK_OTHER_PODS (default 2): a DaemonSet pod and a bulk
// pod, which a list of all pods would read at every drain. The test plays
// the ReplicaSet controller and the scheduler (replaceEvicted): each
// evicted web pod comes back on a node outside the pool, so the budget
// refills as in a cluster and drains wait on it only as long as a real
// one would make them.
//
// The row also reads, from /proc, the CPU the apiserver, etcd, kwok and
// the controller manager spent during the pool, and the load average.
// The coordinator is not in this process: the CPU and RSS are those of
// molt's kube client as the coordinator runs it, plus the test's own.
func TestKwokPoolDrain(t *testing.T) {
	nodes, pool := envInt(t, "MOLT_KWOK_NODES", 500), envInt(t, "MOLT_KWOK_POOL", 50)
	podsPerPool, podsPerOther := envInt(t, "MOLT_KWOK_PODS", 10), envInt(t, "MOLT_KWOK_OTHER_PODS", 2)
	const concurrency = 20
	require.Less(t, pool, nodes, "evicted web pods are replaced on nodes outside the pool")
	kwokBin := filepath.Join(cachedir.Build(), "kwok", "v0.7.0", "bin", "kwok")
	if b := os.Getenv("MOLT_KWOK_BIN"); b != "" {
		kwokBin = b
	}
	testenv.RequireFile(t, kwokBin, "kwok (build/k8s/kwok.sh)")

	// 15,000 Nodes and ~40,000 pods: etcd's default 2 GiB quota is what
	// kwokctl raises to 8 GiB for such clusters; kwok's client has no rate
	// limit, so the apiserver's in-flight limits (400/200 by default, no
	// priority and fairness here) are raised so kwok and the setup's
	// workers are not refused with 429 while molt is measured.
	cp := kubetest.StartWith(t, kubetest.Options{
		EtcdArgs: []string{"--quota-backend-bytes=8589934592"},
		APIServerArgs: []string{
			"--max-requests-inflight=1600",
			"--max-mutating-requests-inflight=800",
		},
	})
	ctx := context.Background()
	load0 := loadAvg()
	kwokPID := startKwok(t, cp, kwokBin)

	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 2000, 2000
	setup, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	ns := "perf"
	_, err = setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	web, agent, bulk := map[string]string{"app": "web"}, map[string]string{"app": "agent"}, map[string]string{"app": "bulk"}
	// The ReplicaSet's scale is what the disruption controller expects:
	// with 0 it allows no disruption at all (expectedPods 0,
	// InsufficientPods) and every eviction of a web pod is refused.
	webPods := 0
	for i := range pool {
		webPods += max(0, podsPerPool-1)
		if i%10 == 0 && podsPerPool > 1 {
			webPods--
		}
	}
	rs, err := setup.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(webPods)), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: template(web)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	brs, err := setup.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bulk"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: bulk}, Template: template(bulk)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ds, err := setup.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: template(agent)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = setup.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromString("20%")), Selector: &metav1.LabelSelector{MatchLabels: web},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Nodes and pods, created by 32 workers; kwok marks them Ready/Running.
	setupStart := time.Now()
	names := make([]string, nodes)
	var totalPods atomic.Int64
	parallel(t, nodes, 32, func(i int) error {
		name := fmt.Sprintf("kwok-%05d", i)
		names[i] = name
		labels := map[string]string{"type": "kwok"}
		if i < pool {
			labels["pool"] = "workers"
		}
		_, err := setup.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec: corev1.NodeSpec{Taints: nil},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n := podsPerOther
		if i < pool {
			n = podsPerPool
		}
		for j := range n {
			p := newPod(ns, fmt.Sprintf("%s-%d", name, j), name)
			switch {
			case j == 0:
				p.Labels, p.OwnerReferences = agent, owner("DaemonSet", ds.Name, ds.UID)
			case i >= pool:
				p.Labels, p.OwnerReferences = bulk, owner("ReplicaSet", brs.Name, brs.UID)
			case j == 1 && i%10 == 0:
				p.Annotations[kube.AnnotationSafeToEvict] = "false"
			default:
				p.Labels, p.OwnerReferences = web, owner("ReplicaSet", rs.Name, rs.UID)
			}
			p.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			if _, err := setup.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
			totalPods.Add(1)
		}
		return nil
	})
	// ResourceVersion "0": served from the apiserver's watch cache, not a
	// read of every pod from etcd each poll.
	require.Eventually(t, func() bool {
		l, err := setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", ResourceVersion: "0"})
		return err == nil && len(l.Items) == 0
	}, 60*time.Minute, 5*time.Second, "kwok did not run every pod")
	t.Logf("setup: %d nodes, %d pods, Running after %s", nodes, totalPods.Load(), time.Since(setupStart).Round(time.Second))

	// No ReplicaSet controller or scheduler runs: the test plays both, so
	// the budget refills as it would in a cluster.
	replaced := replaceEvicted(t, setup, ns, web, names[pool:])

	// The measured client: molt's, with the rate limit NewFromKubeconfig sets.
	var log requestLog
	mrc := cp.RESTConfig()
	mrc.QPS, mrc.Burst = 50, 100
	mrc.UserAgent = "molt-perf"
	mrc.WrapTransport = log.wrap
	cs, err := kubernetes.NewForConfig(mrc)
	require.NoError(t, err)
	c := kube.New(kube.DefaultConfig(), cs)

	runtime.GC()
	pids := cp.PIDs()
	pids["kwok"] = kwokPID
	procCPU0 := map[string]time.Duration{}
	for name, pid := range pids {
		procCPU0[name] = procCPU(pid)
	}
	loadBefore := loadAvg()
	cpu0 := cpuTime(t)
	var peakHeap, peakRSS atomic.Uint64
	var peakLoad atomic.Value
	peakLoad.Store(loadBefore)
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peakHeap.Load() {
					peakHeap.Store(ms.HeapAlloc)
				}
				if rss := selfRSS(); rss > peakRSS.Load() {
					peakRSS.Store(rss)
				}
				if l := loadAvg(); l > peakLoad.Load().(float64) {
					peakLoad.Store(l)
				}
			}
		}
	}()
	drainTimes := make([]time.Duration, pool)
	var evicted, protected atomic.Int64
	start := time.Now()
	parallel(t, pool, concurrency, func(i int) error {
		node := names[i]
		if err := c.Cordon(ctx, node); err != nil {
			return err
		}
		res, err := c.Drain(ctx, node, kube.DrainOptions{Automatic: true})
		if err != nil {
			return err
		}
		if res.TimedOut {
			return fmt.Errorf("drain of %s timed out: %v", node, res.LeftBehind)
		}
		drainTimes[i] = res.Finished.Sub(res.Started)
		evicted.Add(int64(len(res.Evicted)))
		protected.Add(int64(len(res.LeftBehind)))
		return c.Uncordon(ctx, node)
	})
	wall := time.Since(start)
	close(stop)
	t.Logf("%d evicted web pods replaced outside the pool", replaced.Load())
	cpu := cpuTime(t) - cpu0
	var others []string
	for _, name := range []string{"kube-apiserver", "etcd", "kwok", "kube-controller-manager"} {
		if pid, ok := pids[name]; ok {
			others = append(others, fmt.Sprintf("%s %s", name, (procCPU(pid)-procCPU0[name]).Round(100*time.Millisecond)))
		}
	}

	perNode, unscoped := log.podLists(t)
	require.Empty(t, unscoped, "pod lists not scoped to one node by spec.nodeName")
	lists := 0
	for _, n := range perNode {
		lists += n
	}
	sort.Slice(drainTimes, func(i, j int) bool { return drainTimes[i] < drainTimes[j] })
	reqs := log.len()
	row := fmt.Sprintf("| K1 | molt's kube client (kube.Client, shipped Config, 50 QPS / burst 100) cordons, drains (automatic) and uncordons a %d-node pool at concurrency 20 in the test process; real kube-apiserver %s + etcd holding %d kwok nodes and %d pods (pool nodes %d pods: a DaemonSet pod, ReplicaSet pods under a 20 %% PDB, a protected pod on every tenth; other nodes %d) | %d requests: %.1f per node, %.1f/s over %s; %d pod lists, all scoped by spec.nodeName (%.1f per node, 0 of all pods); drain per node p50 %s, p95 %s, max %s; %d pods evicted, %d protected left; client CPU %s (%.1f ms per node), peak heap %.1f MiB, peak RSS %.0f MiB; meanwhile CPU of %s; load average %.2f at start, %.2f before the pool, peak %.2f during it | ≤ 1 list of all pods per node: 0 |",
		pool, kubetest.DefaultVersion, nodes, totalPods.Load(), podsPerPool, podsPerOther,
		reqs, float64(reqs)/float64(pool), float64(reqs)/wall.Seconds(), wall.Round(100*time.Millisecond),
		lists, float64(lists)/float64(pool),
		pct(drainTimes, 50), pct(drainTimes, 95), drainTimes[len(drainTimes)-1].Round(10*time.Millisecond),
		evicted.Load(), protected.Load(), cpu.Round(10*time.Millisecond), float64(cpu.Milliseconds())/float64(pool),
		float64(peakHeap.Load())/(1<<20), float64(peakRSS.Load())/(1<<20), strings.Join(others, ", "),
		load0, loadBefore, peakLoad.Load().(float64))
	kinds := log.byKind()
	t.Log(row)
	t.Log("requests by kind:\n" + kinds)
	if out := os.Getenv("MOLT_KWOK_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(row+"\n\nrequests by kind:\n"+kinds+"\n"), 0o644))
	}
}

// kwokStages are the Stages kwok plays (testdata/kwok/stages.yaml says
// where they come from). Without --config kwok falls back to the same
// built-in set plus a node heartbeat; they are given explicitly so what
// kwok does to the measured cluster is in this repository: above all
// pod-delete, which removes an evicted pod as its kubelet would.
//
//go:embed testdata/kwok/stages.yaml
var kwokStages []byte

// startKwok runs kwok against cp for the nodes annotated
// kwok.x-k8s.io/node=fake, stopped at the test's end, and returns its pid.
func startKwok(t *testing.T, cp *kubetest.ControlPlane, bin string) int {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, cp.Kubeconfig, 0o600))
	stages := filepath.Join(dir, "stages.yaml")
	require.NoError(t, os.WriteFile(stages, kwokStages, 0o600))
	logf, err := os.Create(filepath.Join(cp.Dir, "kwok.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin,
		"--kubeconfig="+kc,
		"--config="+stages,
		// No node leases: nothing here reads them (no node lifecycle
		// controller), and 15,000 leases renewed every 10 s would be
		// 1,500 writes/s on a 2-core machine.
		"--node-lease-duration-seconds=0",
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.0.1/16",
		"--node-ip=10.0.0.1",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: kwok goes with the test binary even when cleanups do not run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("kwok log tail:\n%s", b)
		}
	})
	return cmd.Process.Pid
}

// replaceEvicted plays the ReplicaSet controller and the scheduler for the
// pods labelled sel: each one deleted is created again under a new name on
// one of nodes (round robin), where kwok runs it, so the PodDisruptionBudget
// counts it healthy again. It stops at the test's end and returns the count.
func replaceEvicted(t *testing.T, cs kubernetes.Interface, ns string, sel map[string]string, nodes []string) *atomic.Int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	opts := metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: sel})}
	l, err := cs.CoreV1().Pods(ns).List(ctx, opts)
	require.NoError(t, err)
	opts.ResourceVersion = l.ResourceVersion
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods(ns).Watch(ctx, opts)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond): // a retry's backoff
				}
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok && ctx.Err() != nil {
					break // the test's end cut the stream
				}
				if !ok {
					// A watch error (410 Gone): the measurement would lose
					// deletions; say so rather than hang on the budget.
					t.Errorf("watch of %v pods: %v", sel, ev.Object)
					cancel()
					break
				}
				opts.ResourceVersion = p.ResourceVersion
				if ev.Type != watch.Deleted {
					continue
				}
				i := n.Add(1)
				r := newPod(ns, fmt.Sprintf("%s-r%d", p.Name, i), nodes[int(i)%len(nodes)])
				r.Labels, r.OwnerReferences, r.Spec.Containers, r.Spec.Tolerations =
					p.Labels, p.OwnerReferences, p.Spec.Containers, p.Spec.Tolerations
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
					t.Errorf("replace %s: %v", p.Name, err)
				}
			}
			w.Stop()
		}
	}()
	return &n
}

// parallel runs fn(0..n-1) on workers goroutines and fails on the first error.
func parallel(t *testing.T, n, workers int, fn func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, first)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i].Round(10 * time.Millisecond)
}

// selfRSS is the test process's resident set in bytes (VmRSS), 0 if unknown.
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var kb uint64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// procCPU is a process's user+system CPU time from /proc/PID/stat, 0 if
// unknown (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// loadAvg is the machine's 1-minute load average, 0 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(string(b), "%f", &l)
	return l
}
