package kube

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// protectedUntil reports whether pod opts out of eviction with
// safe-to-evict=false and, if so, when that protection ends: ProtectionAge
// after the pod started. status.startTime is when the kubelet accepted the
// pod, before image pulls, so pull time counts (SPEC §8); a pod the kubelet
// has not reported on yet falls back to its creation time.
func (c *Client) protectedUntil(pod *corev1.Pod) (time.Time, bool) {
	if pod.Annotations[AnnotationSafeToEvict] != "false" {
		return time.Time{}, false
	}
	start := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
		start = pod.Status.StartTime.Time
	}
	return start.Add(c.cfg.ProtectionAge), true
}

// ProtectedPods lists the pods on node that an automatic drain at now would
// leave alone (safe-to-evict=false, younger than ProtectionAge), each with
// Reason ReasonProtected and the time it becomes evictable. The coordinator
// uses it in preflight and to upgrade nodes holding such pods last.
// Pods that a drain skips anyway (DaemonSet, mirror, finished) are not listed.
func (c *Client) ProtectedPods(ctx context.Context, node string, now time.Time) ([]LeftPod, error) {
	pods, err := c.drainablePods(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []LeftPod
	for i := range pods {
		p := &pods[i]
		until, ok := c.protectedUntil(p)
		if !ok || !now.Before(until) {
			continue
		}
		out = append(out, protectedLeft(p, until))
	}
	sortLeft(out)
	return out, nil
}

func protectedLeft(p *corev1.Pod, until time.Time) LeftPod {
	return LeftPod{
		Namespace:   p.Namespace,
		Name:        p.Name,
		Reason:      ReasonProtected,
		EvictableAt: until,
		Message:     AnnotationSafeToEvict + "=false; evictable by automatic upgrades from " + until.UTC().Format(time.RFC3339),
	}
}

func sortLeft(l []LeftPod) {
	sort.Slice(l, func(i, j int) bool {
		if l[i].Namespace != l[j].Namespace {
			return l[i].Namespace < l[j].Namespace
		}
		return l[i].Name < l[j].Name
	})
}
