package kube

import (
	"context"
	"errors"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/drain"
)

// drainablePods returns the pods on node that a drain evicts, using
// kubectl's filters so molt skips exactly what `kubectl drain
// --ignore-daemonsets --delete-emptydir-data --force` skips: DaemonSet pods
// and mirror (static) pods. Unlike kubectl it also skips finished pods
// (Succeeded/Failed): they hold no resources and block nothing.
//
// Force is on because an upgrade must empty the node of unmanaged pods too;
// the Eviction API still honours their PDBs. SkipWaitForDeleteTimeoutSeconds
// stays 0 because that filter reads the wall clock; Drain itself decides how
// long to wait for terminating pods.
func (c *Client) drainablePods(ctx context.Context, node string) ([]corev1.Pod, error) {
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              c.cs,
		Force:               true,
		GracePeriodSeconds:  -1,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		ChunkSize:           500,
		Out:                 io.Discard,
		ErrOut:              io.Discard,
		AdditionalFilters:   []drain.PodFilter{skipFinished},
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return nil, apiErr("list pods on "+node, errors.Join(errs...))
	}
	return list.Pods(), nil
}

func skipFinished(p corev1.Pod) drain.PodDeleteStatus {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return drain.MakePodDeleteStatusSkip()
	}
	return drain.MakePodDeleteStatusOkay()
}
