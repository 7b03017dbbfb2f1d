package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
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

// poll calls f every interval until it reports done, returns an error, or
// timeout passes; the last "not yet" reason goes into the timeout error.
func poll(ctx context.Context, timeout, interval time.Duration, f func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, why, err := f(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: after %s: %s", ErrNotReady, timeout, last)
		case <-time.After(interval):
		}
	}
}

func waitAPI(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(string(b)) == "ok", string(b), nil
	})
}

// NodeReady reports whether n has condition Ready=True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitNodesReady waits until every host of topo is a Ready Node whose
// kubelet reports version, printing a line whenever the count changes.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, topo Topology, version string, timeout time.Duration, out io.Writer) error {
	want := "v" + strings.TrimPrefix(version, "v")
	lastReady := -1
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		byName := map[string]*corev1.Node{}
		for i := range nodes.Items {
			byName[nodes.Items[i].Name] = &nodes.Items[i]
		}
		ready, missing := 0, []string{}
		for _, h := range topo.Hosts {
			n := byName[h.Name]
			if n != nil && NodeReady(n) && n.Status.NodeInfo.KubeletVersion == want {
				ready++
			} else {
				missing = append(missing, h.Name)
			}
		}
		if ready != lastReady {
			fmt.Fprintf(out, "    %d/%d Nodes Ready\n", ready, len(topo.Hosts))
			lastReady = ready
		}
		return len(missing) == 0, "not Ready at " + want + ": " + strings.Join(missing, ","), nil
	})
}

// bindClusterAdmins grants the group kubeadm:cluster-admins cluster-admin,
// as kubeadm init does. The apiserver's kubelet-client certificate is in
// that group (kubeadm's layout, lab/pki.go); without the binding the
// kubelets' webhook authorizer refuses the apiserver, so `kubectl logs`,
// `exec` and `port-forward` fail with "Forbidden (user=kube-apiserver-kubelet-client ...)".
func bindClusterAdmins(ctx context.Context, cs kubernetes.Interface) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:cluster-admins"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "kubeadm:cluster-admins"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: cluster role binding %s: %v", ErrNotReady, crb.Name, err)
	}
	return nil
}

// labelNodes adds node-role labels; NodeRestriction forbids kubelets to set
// node-role.kubernetes.io/* on themselves, so the admin does it as kubeadm does.
func labelNodes(ctx context.Context, cs kubernetes.Interface, topo Topology) error {
	for _, h := range topo.Hosts {
		role := map[Role]string{RoleControlPlane: "control-plane", RoleControlPlaneLB: "control-plane-lb",
			RoleLoadBalancer: "load-balancer", RoleWorker: "worker"}[h.Role]
		patch := fmt.Sprintf(`{"metadata":{"labels":{"node-role.kubernetes.io/%s":""}}}`, role)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, h.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("%w: label node %s: %v", ErrNotReady, h.Name, err)
		}
	}
	return nil
}

func echoPodSpec() corev1.PodSpec {
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return corev1.PodSpec{
		NodeSelector:                  map[string]string{roleLabel: string(RoleWorker)},
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		Containers: []corev1.Container{{
			Name:            "echo",
			Image:           EchoImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/usr/local/bin/echo", fmt.Sprintf("-listen=:%d", EchoPort)},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: fromField("metadata.name")},
				{Name: "NODE_NAME", ValueFrom: fromField("spec.nodeName")},
			},
			Ports: []corev1.ContainerPort{{ContainerPort: EchoPort}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(EchoPort)}},
				PeriodSeconds: 2,
			},
		}},
	}
}

// applyWorkloads creates the sample workloads, leaving existing ones alone.
func applyWorkloads(ctx context.Context, cs kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: namespace: %v", ErrNotReady, err)
	}
	// The ServiceAccount admission plugin refuses pods until the
	// controller-manager has created the namespace's default account.
	if err := poll(ctx, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().ServiceAccounts(DemoNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		return err
	}
	labels := func(app string) map[string]string { return map[string]string{"app": app} }
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: DemoDeploy, Namespace: DemoNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels(DemoDeploy)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(DemoDeploy)}, Spec: echoPodSpec()},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: DemoDeploy, Namespace: DemoNamespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels(DemoDeploy)},
		},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: DemoDaemonSet, Namespace: DemoNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels(DemoDaemonSet)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(DemoDaemonSet)}, Spec: echoPodSpec()},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: DemoPrecious, Namespace: DemoNamespace, Labels: labels(DemoPrecious),
			Annotations: map[string]string{SafeToEvict: "false"},
		},
		Spec: echoPodSpec(),
	}
	create := []func() error{
		func() error {
			_, err := cs.AppsV1().Deployments(DemoNamespace).Create(ctx, deploy, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.PolicyV1().PodDisruptionBudgets(DemoNamespace).Create(ctx, pdb, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().DaemonSets(DemoNamespace).Create(ctx, ds, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Pods(DemoNamespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		},
	}
	for _, f := range create {
		if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%w: sample workload: %v", ErrNotReady, err)
		}
	}
	return nil
}

// waitWorkloads waits until every sample pod is Ready.
func waitWorkloads(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := cs.CoreV1().Pods(DemoNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var notReady []string
		byApp := map[string]int{}
		for _, p := range pods.Items {
			if PodReady(&p) {
				byApp[p.Labels["app"]]++
			} else {
				notReady = append(notReady, p.Name+"="+string(p.Status.Phase))
			}
		}
		ok := byApp[DemoDeploy] >= 2 && byApp[DemoDaemonSet] >= 1 && byApp[DemoPrecious] == 1 && len(notReady) == 0
		return ok, fmt.Sprintf("ready %v, not ready %v", byApp, notReady), nil
	})
}

// PodReady reports whether p has condition Ready=True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
