package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of workload controllers whose pods a drain evicts and whose
// readiness a node's health gates wait for (SPEC §16).
const (
	KindDeployment            = "Deployment"
	KindStatefulSet           = "StatefulSet"
	KindReplicaSet            = "ReplicaSet"
	KindReplicationController = "ReplicationController"
)

// WorkloadRef names a controller: a Deployment, StatefulSet, ReplicaSet
// (one no Deployment owns) or ReplicationController.
type WorkloadRef struct {
	Kind, Namespace, Name string
}

func (w WorkloadRef) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// ErrWorkloadsNotReady means controllers whose pods a drain evicted are
// not back to their desired ready replicas; the error names each with
// its counts.
var ErrWorkloadsNotReady = errors.New("kube: workloads not back to their desired ready replicas")

// workloadsOf returns the controllers of pods, each once, sorted: a pod's
// controller owner, and for a ReplicaSet the Deployment that owns it.
// Pods without a controller (bare pods, which nothing brings back) and
// Jobs' pods (which finish, not become ready) have none. A ReplicaSet
// that cannot be read is kept as itself.
func (c *Client) workloadsOf(ctx context.Context, pods []corev1.Pod) []WorkloadRef {
	seen := map[WorkloadRef]bool{}
	var out []WorkloadRef
	add := func(w WorkloadRef) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	rsOwner := map[string]WorkloadRef{}
	for i := range pods {
		p := &pods[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			continue
		}
		switch ref.Kind {
		case KindStatefulSet, KindReplicationController:
			add(WorkloadRef{Kind: ref.Kind, Namespace: p.Namespace, Name: ref.Name})
		case KindReplicaSet:
			key := p.Namespace + "/" + ref.Name
			w, ok := rsOwner[key]
			if !ok {
				w = WorkloadRef{Kind: KindReplicaSet, Namespace: p.Namespace, Name: ref.Name}
				rs, err := c.cs.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err == nil {
					if d := metav1.GetControllerOf(rs); d != nil && d.Kind == KindDeployment {
						w = WorkloadRef{Kind: KindDeployment, Namespace: p.Namespace, Name: d.Name}
					}
				}
				rsOwner[key] = w
			}
			add(w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// WorkloadsReady checks that every controller in refs has its desired
// replicas ready: readyReplicas ≥ spec.replicas for Deployments,
// StatefulSets, ReplicaSets and ReplicationControllers. A controller that
// no longer exists is not waited for. When some are short it returns an
// error wrapping ErrWorkloadsNotReady that names each with its counts
// ("Deployment default/web: 1 of 2 ready").
func (c *Client) WorkloadsReady(ctx context.Context, refs []WorkloadRef) error {
	var short []string
	for _, w := range refs {
		ready, want, err := c.replicas(ctx, w)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return apiErr("read "+w.String(), err)
		case ready < want:
			short = append(short, fmt.Sprintf("%s: %d of %d ready", w, ready, want))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("%w: %s", ErrWorkloadsNotReady, strings.Join(short, "; "))
	}
	return nil
}

func (c *Client) replicas(ctx context.Context, w WorkloadRef) (ready, want int32, err error) {
	want = 1
	apps := c.cs.AppsV1()
	switch w.Kind {
	case KindDeployment:
		d, err := apps.Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.ReadyReplicas, want, nil
	case KindStatefulSet:
		s, err := apps.StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		return s.Status.ReadyReplicas, want, nil
	case KindReplicaSet:
		rs, err := apps.ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		return rs.Status.ReadyReplicas, want, nil
	case KindReplicationController:
		rc, err := c.cs.CoreV1().ReplicationControllers(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if rc.Spec.Replicas != nil {
			want = *rc.Spec.Replicas
		}
		return rc.Status.ReadyReplicas, want, nil
	}
	return 0, 0, fmt.Errorf("kube: %s is not a workload kind molt waits for", w.Kind)
}
