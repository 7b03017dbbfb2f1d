package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/moltproject/molt/api"
)

// K8sNamespace is the containerd namespace the CRI plugin (and so the
// kubelet) uses; images must be there for pods to find them.
const K8sNamespace = "k8s.io"

// ErrRuntime is wrapped by errors from containerd.
var ErrRuntime = errors.New("containerd")

// PodObserver reports the static pods the kubelet runs. The containerd
// implementation reads the containers the CRI plugin created; tests drive
// their own.
type PodObserver interface {
	StaticPods(ctx context.Context) ([]api.StaticPodStatus, error)
}

// Runtime is the container runtime as the agent needs it.
type Runtime interface {
	PodObserver
	// Version returns the runtime's version through its API.
	Version(ctx context.Context) (string, error)
	// ImportArchive imports an image tarball and returns the image names.
	ImportArchive(ctx context.Context, path string) ([]string, error)
	// Pull pulls and unpacks an image reference.
	Pull(ctx context.Context, ref string) error
}

// ContainerdRuntime is Runtime over containerd's gRPC API in namespace
// k8s.io. It connects on first use and reconnects after errors, so
// containerd may be down (or restarting after an upgrade) when it is made.
type ContainerdRuntime struct {
	socket      string
	snapshotter string

	mu sync.Mutex
	c  *client.Client
}

// NewContainerdRuntime returns a runtime for the socket path. snapshotter
// is used to unpack imported and pulled images ("" = containerd's default).
func NewContainerdRuntime(socket, snapshotter string) *ContainerdRuntime {
	return &ContainerdRuntime{socket: socket, snapshotter: snapshotter}
}

func newContainerdRuntime(socket, snapshotter string) Runtime {
	return NewContainerdRuntime(socket, snapshotter)
}

func (r *ContainerdRuntime) conn(ctx context.Context) (*client.Client, context.Context, error) {
	ctx = namespaces.WithNamespace(ctx, K8sNamespace)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		return r.c, ctx, nil
	}
	if _, err := os.Stat(r.socket); err != nil {
		return nil, ctx, fmt.Errorf("%w: socket %s: %w", ErrRuntime, r.socket, err)
	}
	c, err := client.New(r.socket, client.WithDefaultNamespace(K8sNamespace))
	if err != nil {
		return nil, ctx, fmt.Errorf("%w: connect %s: %w", ErrRuntime, r.socket, err)
	}
	r.c = c
	return c, ctx, nil
}

// Close closes the connection, if any.
func (r *ContainerdRuntime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	err := r.c.Close()
	r.c = nil
	return err
}

// Version returns containerd's version, e.g. "1.6.20~ds1".
func (r *ContainerdRuntime) Version(ctx context.Context) (string, error) {
	c, ctx, err := r.conn(ctx)
	if err != nil {
		return "", err
	}
	v, err := c.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: version: %w", ErrRuntime, err)
	}
	return v.Version, nil
}

// ImportArchive imports a docker-save or OCI tarball and unpacks its
// images for the CRI's snapshotter.
func (r *ContainerdRuntime) ImportArchive(ctx context.Context, path string) ([]string, error) {
	c, ctx, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	imgs, err := c.Import(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("%w: import %s: %w", ErrRuntime, path, err)
	}
	names := make([]string, 0, len(imgs))
	for _, img := range imgs {
		names = append(names, img.Name)
		if err := client.NewImage(c, img).Unpack(ctx, r.snapshotter); err != nil {
			return names, fmt.Errorf("%w: unpack %s: %w", ErrRuntime, img.Name, err)
		}
	}
	return names, nil
}

// Pull pulls and unpacks ref.
func (r *ContainerdRuntime) Pull(ctx context.Context, ref string) error {
	c, ctx, err := r.conn(ctx)
	if err != nil {
		return err
	}
	opts := []client.RemoteOpt{client.WithPullUnpack}
	if r.snapshotter != "" {
		opts = append(opts, client.WithPullSnapshotter(r.snapshotter))
	}
	if _, err := c.Pull(ctx, ref, opts...); err != nil {
		return fmt.Errorf("%w: pull %s: %w", ErrRuntime, ref, err)
	}
	return nil
}

// Images lists image names in the k8s.io namespace.
func (r *ContainerdRuntime) Images(ctx context.Context) ([]string, error) {
	c, ctx, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list images: %w", ErrRuntime, err)
	}
	out := make([]string, 0, len(imgs))
	for _, i := range imgs {
		out = append(out, i.Name)
	}
	return out, nil
}

// CRI labels on the containers the kubelet creates through containerd.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelContainerKind = "io.cri-containerd.kind"
)

// StaticPods lists the CRI's application containers in kube-system (sandboxes
// excluded), one entry per container, Ready when its task is running.
// Readiness probes are the kubelet's and are not visible here.
func (r *ContainerdRuntime) StaticPods(ctx context.Context) ([]api.StaticPodStatus, error) {
	c, ctx, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := c.Containers(ctx, fmt.Sprintf(`labels."%s"==container,labels."%s"==kube-system`, labelContainerKind, labelPodNamespace))
	if err != nil {
		return nil, fmt.Errorf("%w: list containers: %w", ErrRuntime, err)
	}
	var out []api.StaticPodStatus
	for _, ct := range cs {
		info, err := ct.Info(ctx, client.WithoutRefreshedMetadata)
		if err != nil {
			continue
		}
		ready := false
		if t, err := ct.Task(ctx, nil); err == nil {
			st, err := t.Status(ctx)
			ready = err == nil && st.Status == client.Running
		} else if !errdefs.IsNotFound(err) {
			continue
		}
		out = append(out, api.StaticPodStatus{Name: info.Labels[labelPodName], Image: info.Image, Ready: ready})
	}
	return out, nil
}
