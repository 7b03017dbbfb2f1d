package kube

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PDBRef names a PodDisruptionBudget that currently allows no disruption of
// pods on a node.
type PDBRef struct {
	Namespace, Name string
	// Pods are the names of the budget's pods on the node, sorted.
	Pods []string
}

// BlockingPDBs lists PodDisruptionBudgets that cover pods on node and have
// status.disruptionsAllowed == 0, so an eviction of those pods would be
// refused right now. Preflight reports them as a warning: the drain still
// runs and, after DrainTimeout, leaves those pods behind.
func (c *Client) BlockingPDBs(ctx context.Context, node string) ([]PDBRef, error) {
	pods, err := c.drainablePods(ctx, node)
	if err != nil {
		return nil, err
	}
	byNS := map[string][]int{}
	for i := range pods {
		byNS[pods[i].Namespace] = append(byNS[pods[i].Namespace], i)
	}
	var out []PDBRef
	for ns, idx := range byNS {
		list, err := c.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, apiErr("list pdbs in "+ns, err)
		}
		for _, pdb := range list.Items {
			if pdb.Status.DisruptionsAllowed > 0 {
				continue
			}
			// A nil selector matches nothing and an empty one everything,
			// as the eviction API itself decides.
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				continue // an invalid selector never blocks an eviction
			}
			ref := PDBRef{Namespace: ns, Name: pdb.Name}
			for _, i := range idx {
				if sel.Matches(labels.Set(pods[i].Labels)) {
					ref.Pods = append(ref.Pods, pods[i].Name)
				}
			}
			if len(ref.Pods) > 0 {
				sort.Strings(ref.Pods)
				out = append(out, ref)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
