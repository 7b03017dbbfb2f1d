package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Client performs molt's node operations against one cluster.
type Client struct {
	cfg Config
	cs  kubernetes.Interface
}

// New returns a Client over an existing clientset. Evictions are sent with
// retries disabled on each request (see evict.go), so any clientset is safe.
func New(cfg Config, cs kubernetes.Interface) *Client {
	return &Client{cfg: cfg.withDefaults(), cs: cs}
}

// NewFromKubeconfig builds the clientset from kubeconfig bytes. The client
// rate limit is raised above client-go's 5 QPS because a drain polls the
// node's pods and retries evictions; the limiter would otherwise add
// real-time waits the injected clock does not control.
func NewFromKubeconfig(cfg Config, kubeconfig []byte) (*Client, error) {
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%w: kubeconfig: %w", ErrConfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: clientset: %w", ErrConfig, err)
	}
	return New(cfg, cs), nil
}

// apiErr wraps a client-go error so callers can match ErrAPI while the
// original (apierrors status, context error) stays reachable.
func apiErr(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrAPI, op, err)
}
