package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// requestLog records every request a clientset sends (method and URL), so
// a test can bound what molt asks of the API server.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "GET /api/v1/pods?fieldSelector=..."
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// podLists splits the lists of pods in the log into those scoped to one node
// by a spec.nodeName field selector (counted per node) and the others, which
// read every pod of the cluster or of a namespace.
func (l *requestLog) podLists(t *testing.T) (perNode map[string]int, unscoped []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	perNode = map[string]int{}
	for _, r := range l.reqs {
		method, uri, _ := strings.Cut(r, " ")
		u, err := url.Parse(uri)
		require.NoError(t, err)
		p := strings.Split(strings.Trim(u.Path, "/"), "/")
		isList := method == http.MethodGet && u.Query().Get("watch") != "true" &&
			(strings.Join(p, "/") == "api/v1/pods" ||
				len(p) == 5 && p[0] == "api" && p[2] == "namespaces" && p[4] == "pods")
		if !isList {
			continue
		}
		node, ok := strings.CutPrefix(u.Query().Get("fieldSelector"), "spec.nodeName=")
		if !ok || strings.Contains(node, ",") {
			unscoped = append(unscoped, r)
			continue
		}
		perNode[node]++
	}
	return perNode, unscoped
}

// byKind counts the requests by verb and resource ("GET pods (list)",
// "POST pods/eviction"), one line each, most frequent first.
func (l *requestLog) byKind() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[string]int{}
	for _, r := range l.reqs {
		method, uri, _ := strings.Cut(r, " ")
		path, _, _ := strings.Cut(uri, "?")
		seg := strings.Split(strings.Trim(path, "/"), "/")
		// api/v1/... or apis/GROUP/VERSION/...
		if len(seg) > 0 && seg[0] == "apis" {
			seg = seg[min(3, len(seg)):]
		} else {
			seg = seg[min(2, len(seg)):]
		}
		if len(seg) >= 2 && seg[0] == "namespaces" && len(seg) > 2 {
			seg = seg[2:]
		}
		k := method + " " + strings.Join(seg[:min(1, len(seg))], "")
		switch {
		case len(seg) == 1:
			k += " (list)"
		case len(seg) >= 3:
			k += "/" + seg[2]
		}
		n[k]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] || n[keys[i]] == n[keys[j]] && keys[i] < keys[j] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d %s\n", n[k], k)
	}
	return b.String()
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// TestDrainListsOnlyTheNodesPods: cordon, drain and uncordon of a pool at
// concurrency 20 never list every pod of the cluster: each pod list names
// its node with a spec.nodeName field selector, as kubectl drain does. At
// 15,000 nodes a list of all pods per drained node would read the whole
// cluster's pods a thousand times per 1,000-node pool (docs/performance.md).
// The nodes carry what a drain must tell apart: a ReplicaSet's pod under a
// PodDisruptionBudget, a DaemonSet's pod and a protected pod.
func TestDrainListsOnlyTheNodesPods(t *testing.T) {
	const nodes, concurrency = 20, 20
	cp := kubetest.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)

	web := map[string]string{"app": "web"}
	rs, err := cp.Clientset.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](nodes), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: template(web),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	agent := map[string]string{"app": "agent"}
	ds, err := cp.Clientset.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: template(agent)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cp.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(nodes)), Selector: &metav1.LabelSelector{MatchLabels: web},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pool := make([]string, nodes)
	for i := range pool {
		node := kubetest.UniqueName("req")
		pool[i] = node
		cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
		w := newPod(ns, fmt.Sprintf("web-%d", i), node)
		w.Labels = web
		w.OwnerReferences = owner("ReplicaSet", rs.Name, rs.UID)
		cp.RunPod(t, w)
		d := newPod(ns, fmt.Sprintf("agent-%d", i), node)
		d.Labels = agent
		d.OwnerReferences = owner("DaemonSet", ds.Name, ds.UID)
		cp.RunPod(t, d)
		p := newPod(ns, fmt.Sprintf("batch-%d", i), node)
		p.Annotations[kube.AnnotationSafeToEvict] = "false"
		p.Status.StartTime = ptr.To(metav1.NewTime(t0))
		cp.RunPod(t, p)
		cp.ReapTerminating(t, node)
	}
	eventually(t, func() bool {
		p, err := cp.Clientset.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == nodes
	}, "disruption controller did not process the PDB")

	var log requestLog
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 1000, 1000
	rc.WrapTransport = log.wrap
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	cfg, fc := testConfig(t, t0.Add(time.Minute))
	c := kube.New(cfg, cs)

	results := withClock(t, fc, cfg.PollInterval, func() []error {
		errs := make([]error, nodes)
		sem := make(chan struct{}, concurrency)
		var wg sync.WaitGroup
		for i, node := range pool {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := c.Cordon(ctx, node); err != nil {
					errs[i] = err
					return
				}
				res, err := c.Drain(ctx, node, kube.DrainOptions{Automatic: true})
				if err == nil && (res.TimedOut || len(res.Evicted) != 1 || len(res.LeftBehind) != 1 ||
					res.LeftBehind[0].Reason != kube.ReasonProtected) {
					err = fmt.Errorf("drain of %s: evicted %v, left %v, timed out %v", node, res.Evicted, res.LeftBehind, res.TimedOut)
				}
				if err == nil {
					err = c.Uncordon(ctx, node)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		return errs
	})
	for _, err := range results {
		require.NoError(t, err)
	}

	perNode, unscoped := log.podLists(t)
	require.Empty(t, unscoped, "pod lists not scoped to one node by spec.nodeName")
	lists := 0
	for _, node := range pool {
		// One list to choose the pods, then one per poll until the
		// evicted pod is gone: how many polls depends on the reaper.
		require.Positive(t, perNode[node], "node %s: its pods were never listed", node)
		lists += perNode[node]
	}
	t.Logf("%d nodes: %d requests (%.1f per node), %d lists of one node's pods; by kind:\n%s",
		nodes, log.len(), float64(log.len())/nodes, lists, log.byKind())
}
