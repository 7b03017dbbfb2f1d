package kube

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationMirrorPod marks the API server's mirror of a static pod: the
// kubelet's report of a pod it runs from a manifest on disk.
const AnnotationMirrorPod = corev1.MirrorPodAnnotationKey

// PodInfo is a pod as ListPods reports it: where it runs, whether it
// serves, and what it runs.
type PodInfo struct {
	Namespace, Name string
	Labels          map[string]string
	// NodeName is spec.nodeName; empty while unscheduled.
	NodeName string
	// Phase is status.phase: "Pending", "Running", "Succeeded", "Failed"
	// or "Unknown".
	Phase string
	// Ready is the pod's Ready condition being True.
	Ready bool
	// IP is status.podIP; empty until the pod has an address.
	IP string
	// Mirror is true for the mirror of a static pod (AnnotationMirrorPod).
	Mirror bool
	// Containers are spec.containers (not init containers), in order.
	Containers []ContainerInfo
}

// ContainerInfo is one container of a pod's spec.
type ContainerInfo struct {
	Name, Image string
}

// ListPods lists the pods of namespace ("" for every namespace) matching
// the label selector ("" for all, else the syntax of kubectl -l), sorted by
// namespace and name.
func (c *Client) ListPods(ctx context.Context, namespace, selector string) ([]PodInfo, error) {
	list, err := c.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, apiErr("list pods in "+namespace, err)
	}
	out := make([]PodInfo, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, podInfo(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func podInfo(p *corev1.Pod) PodInfo {
	_, mirror := p.Annotations[AnnotationMirrorPod]
	info := PodInfo{
		Namespace: p.Namespace,
		Name:      p.Name,
		Labels:    p.Labels,
		NodeName:  p.Spec.NodeName,
		Phase:     string(p.Status.Phase),
		IP:        p.Status.PodIP,
		Mirror:    mirror,
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			info.Ready = cond.Status == corev1.ConditionTrue
		}
	}
	for _, ctr := range p.Spec.Containers {
		info.Containers = append(info.Containers, ContainerInfo{Name: ctr.Name, Image: ctr.Image})
	}
	return info
}
