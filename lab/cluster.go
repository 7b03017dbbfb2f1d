package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	pollpkg "github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/kube"
	"sigs.k8s.io/yaml"
)

// Sample workload names: what molt's drain has to respect on the workers.
const (
	DemoNamespace = "molt-demo"
	DemoDeploy    = "echo"      // Deployment, 2 replicas, with a PDB minAvailable 1
	DemoDaemonSet = "node-echo" // DaemonSet on every worker (drain skips it)
	DemoPrecious  = "precious"  // bare pod annotated safe-to-evict=false
	SafeToEvict   = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	EchoPort      = 8080
	roleLabel     = "molt.dev/role"
)

// poll is poll.Until whose timeout is ErrNotReady, with the last "not
// yet" reason.
func poll(ctx context.Context, timeout, interval time.Duration, f pollpkg.Func) error {
	err := pollpkg.Until(ctx, timeout, interval, f)
	if te := (*pollpkg.TimeoutError)(nil); errors.As(err, &te) {
		return fmt.Errorf("%w: %w", ErrNotReady, te)
	}
	return err
}

func waitAPI(ctx context.Context, kc *kube.Client, timeout time.Duration) error {
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		code, body, err := kc.Readyz(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("readyz %d: %s", code, body), nil
	})
}

// waitNodesReady waits until every host of topo is a Ready Node whose
// kubelet reports version, printing a line whenever the count changes.
// On failure, notReady names the hosts that were not.
func waitNodesReady(ctx context.Context, kc *kube.Client, topo Topology, version string, timeout time.Duration, out io.Writer, notReady *[]string) error {
	want := "v" + strings.TrimPrefix(version, "v")
	lastReady := -1
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		nodes, err := kc.ListNodes(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		byName := map[string]kube.NodeInfo{}
		for _, n := range nodes {
			byName[n.Name] = n
		}
		ready, missing := 0, []string{}
		for _, h := range topo.Hosts {
			n, ok := byName[h.Name]
			if ok && n.Ready && n.KubeletVersion == want {
				ready++
			} else {
				missing = append(missing, h.Name)
			}
		}
		if ready != lastReady {
			fmt.Fprintf(out, "    %d/%d Nodes Ready\n", ready, len(topo.Hosts))
			lastReady = ready
		}
		*notReady = missing
		return len(missing) == 0, "not Ready at " + want + ": " + strings.Join(missing, ","), nil
	})
}

// clusterAdminsGroup is the group kubeadm binds to cluster-admin; the
// apiserver's kubelet-client certificate and admin.conf are in it (pki.go).
const clusterAdminsGroup = "kubeadm:cluster-admins"

// clusterAdminsBinding grants the group kubeadm:cluster-admins
// cluster-admin, as kubeadm init does.
func clusterAdminsBinding() ([]byte, error) {
	rbac := "rbac.authorization.k8s.io"
	return manifests(map[string]any{
		"apiVersion": rbac + "/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": clusterAdminsGroup},
		"roleRef":    map[string]any{"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects":   []any{map[string]any{"apiGroup": rbac, "kind": "Group", "name": clusterAdminsGroup}},
	})
}

// bindClusterAdmins creates clusterAdminsBinding. The apiserver's
// kubelet-client certificate is in that group (kubeadm's layout,
// lab/pki.go); without the binding the kubelets' webhook authorizer refuses
// the apiserver, so `kubectl logs`, `exec` and `port-forward` fail with
// "Forbidden (user=kube-apiserver-kubelet-client ...)".
func bindClusterAdmins(ctx context.Context, kc *kube.Client) error {
	m, err := clusterAdminsBinding()
	if err == nil {
		err = kc.CreateObjects(ctx, m)
	}
	if err != nil {
		return fmt.Errorf("%w: cluster role binding %s: %v", ErrNotReady, clusterAdminsGroup, err)
	}
	return nil
}

// labelNodes adds node-role labels; NodeRestriction forbids kubelets to set
// node-role.kubernetes.io/* on themselves, so the admin does it as kubeadm does.
func labelNodes(ctx context.Context, kc *kube.Client, topo Topology) error {
	for _, h := range topo.Hosts {
		role := map[Role]string{RoleControlPlane: "control-plane", RoleControlPlaneLB: "control-plane-lb",
			RoleLoadBalancer: "load-balancer", RoleWorker: "worker"}[h.Role]
		if err := kc.LabelNode(ctx, h.Name, map[string]string{"node-role.kubernetes.io/" + role: ""}); err != nil {
			return fmt.Errorf("%w: label node %s: %v", ErrNotReady, h.Name, err)
		}
	}
	return nil
}

// manifests renders objects as one YAML stream, a document each.
func manifests(objects ...map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objects {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("%w: manifest: %v", ErrHost, err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// echoPodSpec is the spec of every sample pod: the echo server on a
// worker, answering "pod=NAME node=NODE" on EchoPort.
func echoPodSpec() map[string]any {
	fromField := func(path string) map[string]any {
		return map[string]any{"fieldRef": map[string]any{"fieldPath": path}}
	}
	return map[string]any{
		"nodeSelector":                 map[string]any{roleLabel: string(RoleWorker)},
		"automountServiceAccountToken": false,
		// echo keeps serving ServingGrace after SIGTERM (see
		// lab/tools/echo), then finishes what is in flight.
		"terminationGracePeriodSeconds": int(ServingGrace/time.Second) + 10,
		"containers": []any{map[string]any{
			"name":            "echo",
			"image":           EchoImage,
			"imagePullPolicy": "Never",
			"command":         []string{"/usr/local/bin/echo", fmt.Sprintf("-listen=:%d", EchoPort), "-drain-delay=" + ServingGrace.String()},
			"env": []any{
				map[string]any{"name": "POD_NAME", "valueFrom": fromField("metadata.name")},
				map[string]any{"name": "NODE_NAME", "valueFrom": fromField("spec.nodeName")},
			},
			"ports": []any{map[string]any{"containerPort": EchoPort}},
			"readinessProbe": map[string]any{
				"httpGet":       map[string]any{"path": "/", "port": EchoPort},
				"periodSeconds": 2,
			},
		}},
	}
}

// demoNamespace is the sample workloads' namespace.
func demoNamespace() ([]byte, error) {
	return manifests(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": DemoNamespace}})
}

// demoWorkloads are what molt's drain has to respect on the workers: a
// Deployment of 2 with a PDB minAvailable 1, a DaemonSet, and a bare pod
// annotated safe-to-evict=false; and the Deployment's LoadBalancer
// Service, which lb-1's HAProxy serves (dataplane.go).
func demoWorkloads() ([]byte, error) {
	meta := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": DemoNamespace}
	}
	labels := func(app string) map[string]any { return map[string]any{"app": app} }
	selector := func(app string) map[string]any { return map[string]any{"matchLabels": labels(app)} }
	template := func(app string) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": labels(app)}, "spec": echoPodSpec()}
	}
	precious := meta(DemoPrecious)
	precious["labels"] = labels(DemoPrecious)
	precious["annotations"] = map[string]any{SafeToEvict: "false"}
	return manifests(
		map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(DemoDeploy),
			"spec": map[string]any{"replicas": 2, "selector": selector(DemoDeploy), "template": template(DemoDeploy)},
		},
		map[string]any{
			"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(DemoDeploy),
			"spec": map[string]any{"minAvailable": 1, "selector": selector(DemoDeploy)},
		},
		map[string]any{
			"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(DemoDaemonSet),
			"spec": map[string]any{"selector": selector(DemoDaemonSet), "template": template(DemoDaemonSet)},
		},
		map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": precious, "spec": echoPodSpec()},
		map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": meta(DemoDeploy),
			"spec": map[string]any{
				"type": "LoadBalancer", "selector": labels(DemoDeploy),
				"ports": []any{map[string]any{"port": LBPort, "targetPort": EchoPort, "nodePort": EchoNodePort}},
			},
		},
	)
}

// applyWorkloads creates the sample workloads, leaving existing ones alone.
func applyWorkloads(ctx context.Context, kc *kube.Client) error {
	ns, err := demoNamespace()
	if err == nil {
		err = kc.CreateObjects(ctx, ns)
	}
	if err != nil {
		return fmt.Errorf("%w: namespace: %v", ErrNotReady, err)
	}
	// The ServiceAccount admission plugin refuses pods until the
	// controller-manager has created the namespace's default account.
	if err := poll(ctx, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		ok, err := kc.Exists(ctx, "v1", "ServiceAccount", DemoNamespace, "default")
		if err != nil {
			return false, err.Error(), nil
		}
		return ok, "no ServiceAccount " + DemoNamespace + "/default", nil
	}); err != nil {
		return err
	}
	w, err := demoWorkloads()
	if err == nil {
		err = kc.CreateObjects(ctx, w)
	}
	if err != nil {
		return fmt.Errorf("%w: sample workload: %v", ErrNotReady, err)
	}
	return nil
}

// waitWorkloads waits until every sample pod is Ready.
func waitWorkloads(ctx context.Context, kc *kube.Client, timeout time.Duration) error {
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := kc.ListPods(ctx, DemoNamespace, "")
		if err != nil {
			return false, err.Error(), nil
		}
		var notReady []string
		byApp := map[string]int{}
		for _, p := range pods {
			if p.Ready {
				byApp[p.Labels["app"]]++
			} else {
				notReady = append(notReady, p.Name+"="+p.Phase)
			}
		}
		ok := byApp[DemoDeploy] >= 2 && byApp[DemoDaemonSet] >= 1 && byApp[DemoPrecious] == 1 && len(notReady) == 0
		return ok, fmt.Sprintf("ready %v, not ready %v", byApp, notReady), nil
	})
}

// CheckServing asks every Ready pod of the sample Deployment for its name
// and node over HTTP, from inside the first control-plane host's network
// namespace, so each request crosses hosts over the lab bridge; then asks
// the Deployment's Service by name from there (checkServiceByName: cluster
// DNS, then the ClusterIP through kube-proxy). It fails (ErrNotReady) when
// no Deployment pod is Ready, when one runs on a host that is not a worker,
// or when a pod or the Service does not answer or answers wrongly. The
// instance groups' Nodes are workers too.
func (l *Lab) CheckServing(ctx context.Context) error {
	kc, err := l.Kube()
	if err != nil {
		return err
	}
	pods, err := kc.ListPods(ctx, DemoNamespace, "app="+DemoDeploy)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	cps := l.cfg.Topology.WithRole(RoleControlPlane)
	if len(cps) == 0 {
		return fmt.Errorf("%w: no control-plane host to ask from", ErrTopology)
	}
	from := l.net.HostNS(cps[0].Name)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialInNamespace(ctx, nsPath(from), network, addr)
		},
	}}
	defer client.CloseIdleConnections()
	// Workers: the topology's, and the instance groups' Nodes, which
	// register with the worker role label (groups.go).
	workers := map[string]bool{}
	for _, h := range l.cfg.Topology.WithRole(RoleWorker) {
		workers[h.Name] = true
	}
	if nodes, err := kc.ListNodes(ctx); err == nil {
		for _, n := range nodes {
			if n.Labels[roleLabel] == string(RoleWorker) && strings.HasPrefix(n.ProviderID, ProviderIDScheme) {
				workers[n.Name] = true
			}
		}
	}
	asked := 0
	for _, p := range pods {
		if !p.Ready {
			continue
		}
		if !workers[p.NodeName] {
			return fmt.Errorf("%w: pod %s runs on %q, not on a worker", ErrNotReady, p.Name, p.NodeName)
		}
		if err := askEcho(ctx, client, p); err != nil {
			return fmt.Errorf("%w: pod %s on %s asked from %s: %v", ErrNotReady, p.Name, p.NodeName, cps[0].Name, err)
		}
		asked++
	}
	if asked == 0 {
		return fmt.Errorf("%w: no Ready pod of Deployment %s/%s", ErrNotReady, DemoNamespace, DemoDeploy)
	}
	return l.checkServiceByName(ctx, kc, cps[0].Name)
}

// askEcho GETs the echo server of p and checks it names p and its node.
func askEcho(ctx context.Context, client *http.Client, p kube.PodInfo) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/", net.JoinHostPort(p.IP, fmt.Sprint(EchoPort))), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("pod=%s node=%s\n", p.Name, p.NodeName); string(body) != want {
		return fmt.Errorf("answered %d %q, want %q", resp.StatusCode, body, want)
	}
	return nil
}
