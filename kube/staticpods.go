package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// StaticPodsReady returns nil when every static pod the node runs (the
// mirror pods bound to it) is Ready, else an error naming those that are
// not. A node that runs none passes. One read, no wait.
func (c *Client) StaticPodsReady(ctx context.Context, node string) error {
	list, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return apiErr("list pods on "+node, err)
	}
	var notReady []string
	for i := range list.Items {
		p := podInfo(&list.Items[i])
		if p.Mirror && !p.Ready {
			notReady = append(notReady, fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, p.Phase))
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("static pods on %s not Ready: %s", node, strings.Join(notReady, ", "))
	}
	return nil
}

// WaitStaticPodsReady polls StaticPodsReady until it passes or ctx ends,
// waiting through an API server that cannot be reached (Transient): the
// node may be the control-plane LB that the API is reached through, its
// static pod coming back. It returns the last reason on ctx's end.
func (c *Client) WaitStaticPodsReady(ctx context.Context, node string) error {
	var last error
	for {
		err := c.StaticPodsReady(ctx, node)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			if last == nil {
				last = err
			}
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case errors.Is(err, ErrAPI) && !Transient(err):
			return err
		}
		last = err
		if err := c.sleep(ctx, c.cfg.PollInterval); err != nil {
			return fmt.Errorf("%w (last: %w)", err, last)
		}
	}
}
