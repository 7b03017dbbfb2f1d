package lab

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The rendered add-ons are pinned by golden files: a change to what every
// lab release applies shows in review. go test ./lab -run Golden -update
// rewrites them.
func TestAddonsGolden(t *testing.T) {
	addons, err := Addons("v1.34.4", FullTopology().APIEndpoint())
	require.NoError(t, err)
	require.Len(t, addons, 2)
	for _, a := range addons {
		file := filepath.Join("testdata", "addon-"+a.Name+"-v1.34.4.golden.yaml")
		if *update {
			require.NoError(t, os.WriteFile(file, []byte(a.YAML), 0o644))
		}
		want, err := os.ReadFile(file)
		require.NoError(t, err, "missing golden file: run go test ./lab -run Golden -update")
		require.Equal(t, string(want), a.YAML, "%s differs from %s (go test ./lab -run Golden -update)", a.Name, file)
	}
}

// object is the part of a rendered object the tests look at.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string
	Metadata   struct{ Name, Namespace string }
	RoleRef    struct{ Kind, Name string } `json:"roleRef"`
	Subjects   []struct{ Kind, Name, Namespace string }
	Data       map[string]string
	Spec       struct {
		Replicas  *int
		ClusterIP string `json:"clusterIP"`
		Ports     []struct {
			Port     int
			Protocol string
		}
		Template struct {
			Spec struct {
				HostNetwork        bool   `json:"hostNetwork"`
				ServiceAccountName string `json:"serviceAccountName"`
				Tolerations        []struct{ Key, Operator, Effect string }
				Containers         []struct {
					Name, Image     string
					ImagePullPolicy string `json:"imagePullPolicy"`
					SecurityContext struct {
						Privileged bool
					} `json:"securityContext"`
				}
			}
		}
	}
}

// objects decodes every document of an add-on, after checking each
// strictly against its kind's Go type.
func objects(t *testing.T, manifest string) map[string]object {
	t.Helper()
	require.NoError(t, kube.CheckManifests([]byte(manifest)))
	out := map[string]object{}
	for _, doc := range strings.Split(manifest, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		out[o.Kind+"/"+o.Metadata.Name] = o
	}
	return out
}

func TestKubeProxyAddonAtTheReleaseVersion(t *testing.T) {
	for _, v := range []string{"1.33.13", "1.34.4"} {
		addons, err := Addons(v, "10.77.0.10:6443")
		require.NoError(t, err)
		require.Equal(t, AddonKubeProxy, addons[0].Name, "kube-proxy first: Services need it")
		objs := objects(t, addons[0].YAML)
		require.Len(t, objs, 4)

		ds := objs["DaemonSet/kube-proxy"]
		require.Equal(t, "kube-system", ds.Metadata.Namespace)
		pod := ds.Spec.Template.Spec
		require.True(t, pod.HostNetwork)
		require.Equal(t, "kube-proxy", pod.ServiceAccountName)
		require.Len(t, pod.Tolerations, 1)
		require.Equal(t, "Exists", pod.Tolerations[0].Operator, "tolerates every taint")
		require.Empty(t, pod.Tolerations[0].Key)
		c := pod.Containers[0]
		require.Equal(t, "registry.k8s.io/kube-proxy:v"+v, c.Image)
		require.Equal(t, "IfNotPresent", c.ImagePullPolicy)
		require.True(t, c.SecurityContext.Privileged)

		crb := objs["ClusterRoleBinding/kubeadm:node-proxier"]
		require.Equal(t, "system:node-proxier", crb.RoleRef.Name)
		require.Equal(t, "ServiceAccount", crb.Subjects[0].Kind)
		require.Equal(t, "kube-proxy", crb.Subjects[0].Name)

		cm := objs["ConfigMap/kube-proxy"]
		var cfg map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(cm.Data["config.conf"]), &cfg))
		require.Equal(t, "KubeProxyConfiguration", cfg["kind"])
		require.Equal(t, "nftables", cfg["mode"])
		require.Equal(t, ClusterCIDR, cfg["clusterCIDR"])
		require.Equal(t, map[string]any{"masqueradeAll": true}, cfg["nftables"])
		require.Equal(t, float64(0), cfg["conntrack"].(map[string]any)["maxPerCore"], "nf_conntrack_max is machine-wide: left alone")
		require.Contains(t, cm.Data["kubeconfig.conf"], "server: https://10.77.0.10:6443", "the API through the LB, not a Service")
	}
}

func TestCoreDNSAddon(t *testing.T) {
	addons, err := Addons("1.34.4", "10.77.0.10:6443")
	require.NoError(t, err)
	require.Equal(t, AddonCoreDNS, addons[1].Name)
	objs := objects(t, addons[1].YAML)
	require.Len(t, objs, 6)

	svc := objs["Service/kube-dns"]
	require.Equal(t, ClusterDNS, svc.Spec.ClusterIP)
	require.True(t, netip.MustParsePrefix(ServiceCIDR).Contains(netip.MustParseAddr(svc.Spec.ClusterIP)))
	require.Len(t, svc.Spec.Ports, 2)
	dep := objs["Deployment/coredns"]
	require.Equal(t, 2, *dep.Spec.Replicas)
	c := dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, "registry.k8s.io/coredns/coredns:v"+CoreDNSVersion, c.Image)
	require.Equal(t, "IfNotPresent", c.ImagePullPolicy)
	require.Contains(t, objs, "ClusterRole/system:coredns")
	require.Equal(t, "system:coredns", objs["ClusterRoleBinding/system:coredns"].RoleRef.Name)

	corefile := objs["ConfigMap/coredns"].Data["Corefile"]
	require.Contains(t, corefile, "kubernetes "+ClusterDomain+" in-addr.arpa ip6.arpa {")
	require.NotContains(t, corefile, "forward", "nothing outside the lab to forward to")
	// Every plugin the Corefile names is compiled in (build/coredns).
	script, err := os.ReadFile(filepath.Join("..", "build", "coredns", "build.sh"))
	require.NoError(t, err)
	for _, plugin := range []string{"errors", "health", "ready", "kubernetes", "cache", "loadbalance", "reload"} {
		require.Contains(t, corefile, "    "+plugin, plugin)
		require.Regexp(t, `plugins=\([^)]*\b`+plugin+`\b`, string(script), "build/coredns compiles in %s", plugin)
	}
	require.Contains(t, string(script), `version="${1:-`+CoreDNSVersion+`}"`, "build/coredns builds CoreDNSVersion by default")
}

func TestKubeletAndContainerdPointAtClusterDNSAndTheRegistry(t *testing.T) {
	b, err := KubeletConfig()
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	require.Equal(t, []any{ClusterDNS}, cfg["clusterDNS"])
	require.Equal(t, "cluster.local", cfg["clusterDomain"])

	toml := ContainerdConfigTOML()
	for _, r := range []string{"registry.k8s.io", "molt.local"} {
		require.Contains(t, toml, `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."`+r+`"]`+"\n"+`      endpoint = ["http://10.77.0.1:5000"]`)
	}
}

func TestCheckAddonPods(t *testing.T) {
	var nodes []string
	for _, h := range SmallTopology().Hosts {
		nodes = append(nodes, h.Name)
	}
	img := KubeProxyImage("1.34.4")
	pod := func(name, node, image string, ready bool) kube.PodInfo {
		return kube.PodInfo{Name: name, NodeName: node, Ready: ready, Phase: "Running", Containers: []kube.ContainerInfo{{Name: "kube-proxy", Image: image}}}
	}
	all := []kube.PodInfo{pod("kp-a", "cplb-1", img, true), pod("kp-b", "cp-1", img, true), pod("kp-c", "worker-1", img, true)}
	require.Empty(t, checkProxyPods(all, nodes, img))

	old := []kube.PodInfo{all[0], all[1], pod("kp-c", "worker-1", KubeProxyImage("1.34.3"), true)}
	require.Equal(t, "worker-1: kp-c runs registry.k8s.io/kube-proxy:v1.34.3, want registry.k8s.io/kube-proxy:v1.34.4", checkProxyPods(old, nodes, img))

	notReady := []kube.PodInfo{all[0], all[1], pod("kp-c", "worker-1", img, false)}
	require.Equal(t, "worker-1: kp-c not Ready (Running)", checkProxyPods(notReady, nodes, img))

	missing := all[:2]
	require.Equal(t, "worker-1: 0 pods, want 1; 2 pods for 3 nodes", checkProxyPods(missing, nodes, img))

	leaving := append(append([]kube.PodInfo{}, all...), pod("kp-old", "worker-1", KubeProxyImage("1.34.3"), false))
	require.Contains(t, checkProxyPods(leaving, nodes, img), "worker-1: 2 pods, want 1")

	// An instance of the lab's groups is a node too.
	withInstance := append(slices.Clone(nodes), "mig-a-1")
	require.Equal(t, "mig-a-1: 0 pods, want 1; 3 pods for 4 nodes", checkProxyPods(all, withInstance, img))
	require.Empty(t, checkProxyPods(append(slices.Clone(all), pod("kp-d", "mig-a-1", img, true)), withInstance, img))

	// A deleted instance's Node is gone before its pods are: the pod
	// garbage collector removes them up to 80 s later. Such a pod runs
	// nowhere and is not counted; a pod not yet bound to a node is.
	live := []kube.NodeInfo{{Name: "cplb-1"}, {Name: "cp-1"}, {Name: "worker-1"}}
	orphan := pod("kp-gone", "mig-b-uym1v6", KubeProxyImage("1.34.3"), true)
	withOrphan := append(slices.Clone(all), orphan)
	require.Equal(t, "4 pods for 3 nodes", checkProxyPods(withOrphan, nodes, img), "counted, the orphan fails the check")
	require.Empty(t, checkProxyPods(onExistingNodes(withOrphan, live), nodes, img))
	pending := pod("kp-pending", "", img, false)
	require.Equal(t, "4 pods for 3 nodes", checkProxyPods(onExistingNodes(append(slices.Clone(all), pending), live), nodes, img))
}
