package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeState is what the coordinator needs to know about a node.
type NodeState struct {
	// Ready is the node's Ready condition being True.
	Ready bool
	// KubeletVersion is status.nodeInfo.kubeletVersion as the kubelet
	// reports it, e.g. "v1.34.4".
	KubeletVersion string
	// Unschedulable is spec.unschedulable (cordoned).
	Unschedulable bool
}

// NodeState reads the node's readiness, kubelet version and cordon state.
func (c *Client) NodeState(ctx context.Context, node string) (NodeState, error) {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return NodeState{}, fmt.Errorf("%w: %s", ErrNodeNotFound, node)
	}
	if err != nil {
		return NodeState{}, apiErr("get node "+node, err)
	}
	return nodeState(n), nil
}

// NodeInfo is one Node as ListNodes reports it.
type NodeInfo struct {
	Name string
	NodeState
	// ProviderID is spec.providerID ("" when the kubelet set none);
	// Labels are the Node's labels.
	ProviderID string
	Labels     map[string]string
}

// ListNodes reads every Node's readiness, kubelet version, cordon state,
// provider ID and labels, sorted by name.
func (c *Client) ListNodes(ctx context.Context) ([]NodeInfo, error) {
	list, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiErr("list nodes", err)
	}
	out := make([]NodeInfo, 0, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		out = append(out, NodeInfo{Name: n.Name, NodeState: nodeState(n), ProviderID: n.Spec.ProviderID, Labels: n.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// LabelNode sets labels on the node (a merge patch: other labels stay). An
// empty value is a label with an empty value, as node-role labels have.
func (c *Client) LabelNode(ctx context.Context, node string, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("%w: labels: %w", ErrConfig, err)
	}
	_, err = c.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNodeNotFound, node)
	}
	if err != nil {
		return apiErr("label node "+node, err)
	}
	return nil
}

func nodeState(n *corev1.Node) NodeState {
	s := NodeState{
		KubeletVersion: n.Status.NodeInfo.KubeletVersion,
		Unschedulable:  n.Spec.Unschedulable,
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			s.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return s
}

// sameVersion compares kubelet versions with or without the leading "v".
func sameVersion(a, b string) bool {
	return strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v")
}

// WaitNodeReady polls every PollInterval (on the injected clock) until the
// node is Ready and reports kubeletVersion; an empty kubeletVersion accepts
// any. It has no timeout of its own: the caller bounds it with ctx. A node
// that does not exist yet (re-registering after a reinstall) is waited for,
// and so is an API server that cannot be reached for now (Transient): the
// node just upgraded may be the one the API is reached through.
func (c *Client) WaitNodeReady(ctx context.Context, node, kubeletVersion string) error {
	log := c.cfg.Logger.With("node", node, "kubeletVersion", kubeletVersion)
	unreachable := false
	for {
		s, err := c.NodeState(ctx, node)
		switch {
		case err == nil && s.Ready && (kubeletVersion == "" || sameVersion(s.KubeletVersion, kubeletVersion)):
			log.Info("node ready")
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrNodeNotFound):
		case err != nil && Transient(err):
			if !unreachable {
				log.Warn("API server unreachable while waiting for the node; still waiting", "err", err)
			}
			unreachable = true
		case err != nil:
			return err
		default:
			if unreachable {
				log.Info("API server reachable again")
			}
			unreachable = false
		}
		if err := c.sleep(ctx, c.cfg.PollInterval); err != nil {
			return err
		}
	}
}

// DeleteNode deletes a Node object: a MIG instance molt deleted leaves no
// Node behind even where no cloud controller removes it. A Node already
// gone is not an error.
func (c *Client) DeleteNode(ctx context.Context, node string) error {
	err := c.cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete node "+node, err)
	}
	return nil
}
