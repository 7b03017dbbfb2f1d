package kube

import (
	"context"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Client performs molt's node operations against one cluster.
type Client struct {
	cfg Config
	cs  kubernetes.Interface
	// dyn creates and reads objects of any kind (objects.go). It is nil
	// for a Client made by New over a bare clientset.
	dyn dynamic.Interface
	// mapper maps a kind to its resource, from the API server's discovery
	// documents, fetched on first use and cached.
	mapper meta.RESTMapper
}

// New returns a Client over an existing clientset. Evictions are sent with
// retries disabled on each request (see evict.go), so any clientset is safe.
// Such a Client cannot CreateObjects or Exists (no dynamic client); use
// NewFromKubeconfig for those.
func New(cfg Config, cs kubernetes.Interface) *Client {
	c := &Client{cfg: cfg.withDefaults(), cs: cs}
	if cs != nil { // nil in tests of pure rules
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	}
	return c
}

// Option adjusts how NewFromKubeconfig reaches the API server.
type Option func(*rest.Config)

// WithDial opens every connection to the API server with dial instead of
// the default dialer; the lab dials from inside its network namespace.
func WithDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(rc *rest.Config) { rc.Dial = dial }
}

// WithTimeout bounds each request to the API server (client-go's default
// is no bound beyond the context).
func WithTimeout(d time.Duration) Option {
	return func(rc *rest.Config) { rc.Timeout = d }
}

// NewFromKubeconfig builds the clientset from kubeconfig bytes. The client
// rate limit is raised above client-go's 5 QPS because a drain polls the
// node's pods and retries evictions; the limiter would otherwise add
// real-time waits the injected clock does not control.
//
// A cfg past the caps of Validate is refused.
func NewFromKubeconfig(cfg Config, kubeconfig []byte, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%w: kubeconfig: %w", ErrConfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	for _, o := range opts {
		o(rc)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: clientset: %w", ErrConfig, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: dynamic client: %w", ErrConfig, err)
	}
	c := New(cfg, cs)
	c.dyn = dyn
	return c, nil
}

// apiErr wraps a client-go error so callers can match ErrAPI while the
// original (apierrors status, context error) stays reachable.
func apiErr(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrAPI, op, err)
}
