//go:build kwok

package kube_test

import (
	"context"
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
// pod, which a list of all pods would read at every drain.
func TestKwokPoolDrain(t *testing.T) {
	nodes, pool := envInt(t, "MOLT_KWOK_NODES", 500), envInt(t, "MOLT_KWOK_POOL", 50)
	podsPerPool, podsPerOther := envInt(t, "MOLT_KWOK_PODS", 10), envInt(t, "MOLT_KWOK_OTHER_PODS", 2)
	const concurrency = 20
	require.LessOrEqual(t, pool, nodes)
	kwokBin := filepath.Join(cachedir.Build(), "kwok", "v0.7.0", "bin", "kwok")
	if b := os.Getenv("MOLT_KWOK_BIN"); b != "" {
		kwokBin = b
	}
	testenv.RequireFile(t, kwokBin, "kwok (build/k8s/kwok.sh)")

	cp := kubetest.Start(t)
	ctx := context.Background()
	startKwok(t, cp, kwokBin)

	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 2000, 2000
	setup, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	ns := "perf"
	_, err = setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	web, agent, bulk := map[string]string{"app": "web"}, map[string]string{"app": "agent"}, map[string]string{"app": "bulk"}
	rs, err := setup.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: template(web)},
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
	require.Eventually(t, func() bool {
		l, err := setup.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 1})
		return err == nil && len(l.Items) == 0
	}, 30*time.Minute, 2*time.Second, "kwok did not run every pod")
	t.Logf("setup: %d nodes, %d pods, Running after %s", nodes, totalPods.Load(), time.Since(setupStart).Round(time.Second))

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
	cpu0 := cpuTime(t)
	var peakHeap atomic.Uint64
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
	cpu := cpuTime(t) - cpu0

	perNode, unscoped := log.podLists(t)
	require.Empty(t, unscoped, "pod lists not scoped to one node by spec.nodeName")
	lists := 0
	for _, n := range perNode {
		lists += n
	}
	sort.Slice(drainTimes, func(i, j int) bool { return drainTimes[i] < drainTimes[j] })
	reqs := log.len()
	var rss string
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		rss = vmHWM(string(b))
	}
	row := fmt.Sprintf("| K1 | molt's cordon, automatic drain and uncordon of a %d-node pool at concurrency 20, real kube-apiserver %s + etcd holding %d kwok nodes and %d pods (pool nodes %d pods: a DaemonSet pod, ReplicaSet pods under a 20 %% PDB, a protected pod on every tenth; other nodes %d) | %d requests: %.1f per node, %.1f/s over %s; %d pod lists, all scoped by spec.nodeName (%.1f per node, 0 of all pods); drain per node p50 %s, p99 %s, max %s; %d pods evicted, %d protected left; client CPU %s (%.1f ms per node), peak heap %.1f MiB, test process peak RSS %s | ≤ 1 list of all pods per node: 0 |",
		pool, kubetest.DefaultVersion, nodes, totalPods.Load(), podsPerPool, podsPerOther,
		reqs, float64(reqs)/float64(pool), float64(reqs)/wall.Seconds(), wall.Round(100*time.Millisecond),
		lists, float64(lists)/float64(pool),
		pct(drainTimes, 50), pct(drainTimes, 99), drainTimes[len(drainTimes)-1].Round(10*time.Millisecond),
		evicted.Load(), protected.Load(), cpu.Round(10*time.Millisecond), float64(cpu.Milliseconds())/float64(pool),
		float64(peakHeap.Load())/(1<<20), rss)
	t.Log(row)
	t.Log("requests by kind:\n" + log.byKind())
	if out := os.Getenv("MOLT_KWOK_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(row+"\n"), 0o644))
	}
}

// startKwok runs kwok against cp for the nodes annotated
// kwok.x-k8s.io/node=fake, stopped at the test's end.
func startKwok(t *testing.T, cp *kubetest.ControlPlane, bin string) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, cp.Kubeconfig, 0o600))
	logf, err := os.Create(filepath.Join(cp.Dir, "kwok.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin,
		"--kubeconfig="+kc,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.0.1/16",
		"--node-ip=10.0.0.1",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

func vmHWM(status string) string {
	var kb int
	for _, line := range strings.Split(status, "\n") {
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
		}
	}
	return "?"
}
