package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/kube"
)

// The lab's cluster add-ons, kube-proxy (kubeproxy.go) at each release's
// own version and CoreDNS (coredns.go). One rendering serves two callers:
// PublishRelease puts a release's add-ons into its catalog entry, which the
// coordinator's add-ons step applies during an upgrade, and Up installs
// those of the lab's first version, as a cluster installer would, through
// the same kube.Apply and rollout wait.

// Add-on names in a release's catalog entry, in the order they apply.
const (
	AddonKubeProxy = "kube-proxy"
	AddonCoreDNS   = "coredns"
)

// Addons are the add-ons of release version for a cluster whose API is at
// apiEndpoint (host:port, the control-plane LB): kube-proxy first, since
// Services (CoreDNS's own way to the API among them) need it.
func Addons(version, apiEndpoint string) ([]api.AddonManifest, error) {
	version = strings.TrimPrefix(version, "v")
	proxy, err := manifests(kubeProxyObjects(version, apiEndpoint)...)
	if err != nil {
		return nil, err
	}
	dns, err := manifests(coreDNSObjects()...)
	if err != nil {
		return nil, err
	}
	return []api.AddonManifest{
		{Name: AddonKubeProxy, YAML: string(proxy)},
		{Name: AddonCoreDNS, YAML: string(dns)},
	}, nil
}

// addonImages are the images the add-ons of version run: pushed into the
// lab registry, from which every node pulls them.
func addonImages(version string) []string {
	return []string{KubeProxyImage(version), CoreDNSImage}
}

// addonWorkloads are the objects whose rollout says the add-ons run.
var addonWorkloads = []kube.ObjectRef{
	{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: "kube-system", Name: "kube-proxy"},
	{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "kube-system", Name: "coredns"},
}

// installAddons installs the add-ons of the lab's version and waits for
// them to roll out. A cluster gets its add-ons once: when kube-proxy's
// DaemonSet exists (a second Up, or a lab upgraded since), nothing is
// applied, so an Up never takes an upgraded cluster's add-ons back.
func (l *Lab) installAddons(ctx context.Context, kc *kube.Client) error {
	installed, err := kc.Exists(ctx, "apps/v1", "DaemonSet", "kube-system", "kube-proxy")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if !installed {
		addons, err := Addons(l.cfg.Version, l.cfg.Topology.APIEndpoint())
		if err != nil {
			return err
		}
		for _, a := range addons {
			if _, err := kc.Apply(ctx, []byte(a.YAML)); err != nil {
				return fmt.Errorf("%w: add-on %s: %v", ErrNotReady, a.Name, err)
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	if err := kc.WaitRollout(wctx, addonWorkloads); err != nil {
		return fmt.Errorf("%w: add-ons: %v", ErrNotReady, err)
	}
	return nil
}

// CheckAddons checks that the add-ons run at version: kube-proxy's
// DaemonSet and CoreDNS's Deployment rolled out, and on every host of the
// topology exactly one kube-proxy pod, Ready, on KubeProxyImage(version);
// every CoreDNS pod Ready on CoreDNSImage. Pods of the previous version
// may take a moment to go after a rollout, so it polls, for at most a
// minute, and fails (ErrNotReady) with what was still wrong.
func (l *Lab) CheckAddons(ctx context.Context, version string) error {
	kc, err := l.Kube()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := kc.WaitRollout(wctx, addonWorkloads); err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	want := KubeProxyImage(version)
	return poll(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		proxies, err := kc.ListPods(ctx, "kube-system", "k8s-app=kube-proxy")
		if err != nil {
			return false, err.Error(), nil
		}
		// Every host of the topology, and every instance of the lab's
		// instance groups that is a Node.
		var nodes []string
		for _, h := range l.cfg.Topology.Hosts {
			nodes = append(nodes, h.Name)
		}
		all, err := kc.ListNodes(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, n := range all {
			if strings.HasPrefix(n.ProviderID, ProviderIDScheme) {
				nodes = append(nodes, n.Name)
			}
		}
		if why := checkProxyPods(onExistingNodes(proxies, all), nodes, want); why != "" {
			return false, why, nil
		}
		dns, err := kc.ListPods(ctx, "kube-system", "k8s-app=kube-dns")
		if err != nil {
			return false, err.Error(), nil
		}
		if why := checkPods(dns, CoreDNSImage, 2); why != "" {
			return false, "coredns: " + why, nil
		}
		return true, "", nil
	})
}

// onExistingNodes leaves out the pods bound to a Node that no longer
// exists. A deleted instance's Node goes at once (molt deletes it), but
// its DaemonSet pods stay listed until the pod garbage collector, 40 to
// 80 seconds later, removes them: they run nowhere, and the DaemonSet's
// own status does not count them either. A pod not yet bound to a node
// is kept: it is an add-on pod that does not run.
func onExistingNodes(pods []kube.PodInfo, nodes []kube.NodeInfo) []kube.PodInfo {
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []kube.PodInfo
	for _, p := range pods {
		if p.NodeName == "" || exists[p.NodeName] {
			out = append(out, p)
		}
	}
	return out
}

// checkProxyPods says what is wrong with kube-proxy's pods ("" nothing):
// one per node, each Ready and on image.
func checkProxyPods(pods []kube.PodInfo, nodes []string, image string) string {
	byNode := map[string][]kube.PodInfo{}
	for _, p := range pods {
		byNode[p.NodeName] = append(byNode[p.NodeName], p)
	}
	var wrong []string
	for _, n := range nodes {
		if why := checkPods(byNode[n], image, 1); why != "" {
			wrong = append(wrong, n+": "+why)
		}
	}
	if len(pods) != len(nodes) {
		wrong = append(wrong, fmt.Sprintf("%d pods for %d nodes", len(pods), len(nodes)))
	}
	return strings.Join(wrong, "; ")
}

// checkPods says what is wrong with pods ("" nothing): there are n, each
// Ready with every container on image.
func checkPods(pods []kube.PodInfo, image string, n int) string {
	var wrong []string
	if len(pods) != n {
		wrong = append(wrong, fmt.Sprintf("%d pods, want %d", len(pods), n))
	}
	for _, p := range pods {
		if !p.Ready {
			wrong = append(wrong, p.Name+" not Ready ("+p.Phase+")")
		}
		for _, c := range p.Containers {
			if c.Image != image {
				wrong = append(wrong, fmt.Sprintf("%s runs %s, want %s", p.Name, c.Image, image))
			}
		}
	}
	return strings.Join(wrong, "; ")
}
