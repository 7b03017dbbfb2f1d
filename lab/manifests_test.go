package lab

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func testControlPlane() ControlPlane {
	topo := FullTopology()
	return ControlPlane{Version: "1.34.4", Members: topo.WithRole(RoleControlPlane), LBAddress: topo.APIEndpoint()}
}

func TestStaticPodsParseWithTheRightImages(t *testing.T) {
	topo := FullTopology()
	cases := []struct {
		host   string
		images map[string]string // file → image
	}{
		{"cp-2", map[string]string{
			"etcd.yaml":                    EtcdImage("1.34.4"),
			"kube-apiserver.yaml":          "registry.k8s.io/kube-apiserver:v1.34.4",
			"kube-controller-manager.yaml": "registry.k8s.io/kube-controller-manager:v1.34.4",
			"kube-scheduler.yaml":          "registry.k8s.io/kube-scheduler:v1.34.4",
		}},
		{"cplb-1", map[string]string{"cplb.yaml": CPLBImage}},
		{"lb-1", map[string]string{"haproxy.yaml": HAProxyImage}},
		{"worker-1", map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			var h HostSpec
			for _, x := range topo.Hosts {
				if x.Name == c.host {
					h = x
				}
			}
			files, err := StaticPods(h, testControlPlane())
			require.NoError(t, err)
			require.Len(t, files, len(c.images))
			for file, img := range c.images {
				// Strictly a Pod: no field the kubelet would not know.
				require.NoError(t, kube.CheckManifests(files[file]), file)
				var pod struct {
					Kind     string
					Metadata struct{ Name, Namespace string }
					Spec     struct {
						HostNetwork bool `json:"hostNetwork"`
						Containers  []struct {
							Name, Image     string
							ImagePullPolicy string `json:"imagePullPolicy"`
						}
					}
				}
				require.NoError(t, yaml.Unmarshal(files[file], &pod), file)
				require.Equal(t, "Pod", pod.Kind)
				require.Equal(t, file, pod.Metadata.Name+".yaml")
				require.Equal(t, "kube-system", pod.Metadata.Namespace)
				require.True(t, pod.Spec.HostNetwork)
				require.Len(t, pod.Spec.Containers, 1)
				require.Equal(t, pod.Metadata.Name, pod.Spec.Containers[0].Name)
				require.Equal(t, img, pod.Spec.Containers[0].Image)
				require.Equal(t, "Never", pod.Spec.Containers[0].ImagePullPolicy)
			}
		})
	}
}

func TestEtcdAndAPIServerFlags(t *testing.T) {
	topo := FullTopology()
	cp2 := topo.WithRole(RoleControlPlane)[1]
	etcd := strings.Join(EtcdPod(cp2, testControlPlane()).Command, " ")
	require.Contains(t, etcd, "--initial-cluster=cp-1=https://10.77.0.11:2380,cp-2=https://10.77.0.12:2380,cp-3=https://10.77.0.13:2380")
	require.Contains(t, etcd, "--listen-peer-urls=https://10.77.0.12:2380")
	api := strings.Join(APIServerPod(cp2, testControlPlane()).Command, " ")
	require.Contains(t, api, "--advertise-address=10.77.0.12")
	require.Contains(t, api, "--service-cluster-ip-range="+ServiceCIDR)
	lb := strings.Join(CPLBPod(testControlPlane()).Command, " ")
	require.Equal(t, "cplb -listen=10.77.0.10:6443 -backend=10.77.0.11:6443 -backend=10.77.0.12:6443 -backend=10.77.0.13:6443", lb)
}

func TestKubeletConfigHasTheMachineWorkarounds(t *testing.T) {
	b, err := KubeletConfig()
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	require.Equal(t, "KubeletConfiguration", cfg["kind"])
	require.Equal(t, "cgroupfs", cfg["cgroupDriver"])
	require.Equal(t, false, cfg["failCgroupV1"])
	require.Equal(t, false, cfg["cgroupsPerQOS"])
	require.Equal(t, []any{}, cfg["enforceNodeAllocatable"])
	require.Equal(t, map[string]any{}, cfg["evictionHard"])
	require.Equal(t, ManifestDir, cfg["staticPodPath"])

	toml := ContainerdConfigTOML()
	require.Contains(t, toml, "restrict_oom_score_adj = true")
	require.Contains(t, toml, `sandbox_image = "`+PauseImage+`"`)

	unit := KubeletUnit(topoHost(t, "worker-2"))
	require.Contains(t, unit, "--node-ip=10.77.0.32")
	require.Contains(t, unit, "--hostname-override=worker-2")
}

func TestCNIConfigUsesTheHostPodCIDR(t *testing.T) {
	b, err := CNIConfig(topoHost(t, "worker-1"))
	require.NoError(t, err)
	require.Equal(t, "10.244.31.0/24", PodCIDR(topoHost(t, "worker-1")))
	var conf map[string]any
	require.NoError(t, json.Unmarshal(b, &conf))
	require.Contains(t, string(b), `"subnet": "10.244.31.0/24"`)
	require.Contains(t, string(b), `"gateway": "10.244.31.1"`)
}

func topoHost(t *testing.T, name string) HostSpec {
	t.Helper()
	for _, h := range FullTopology().Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s", name)
	return HostSpec{}
}

func TestTopologiesAreValid(t *testing.T) {
	for _, topo := range []Topology{FullTopology(), SmallTopology()} {
		require.NoError(t, topo.Validate(), topo.Name)
		require.Equal(t, "10.77.0.10:6443", topo.APIEndpoint())
	}
	bad := SmallTopology()
	bad.Hosts[1].IP = "192.168.1.5"
	require.ErrorIs(t, bad.Validate(), ErrTopology)
}

func TestHAProxyConfigBalancesTheWorkersNodePort(t *testing.T) {
	cfg := HAProxyConfig(FullTopology().WithRole(RoleWorker))
	require.Contains(t, cfg, fmt.Sprintf("bind :%d\n", LBPort))
	require.Contains(t, cfg, fmt.Sprintf("server worker-1 10.77.0.31:%d\n", EchoNodePort))
	require.Contains(t, cfg, fmt.Sprintf("server worker-2 10.77.0.32:%d\n", EchoNodePort))
	require.Contains(t, cfg, "retry-on conn-failure")
	require.Equal(t, 2, strings.Count(cfg, "  server "), "workers only")
}

// The lab's settings that cut work nothing looks at (docs/lab.md, "Where
// the CPU goes") while keeping what molt waits for prompt.
func TestLabSettingsCutIdleWork(t *testing.T) {
	b, err := KubeletConfig()
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	require.Equal(t, "5s", cfg["nodeStatusUpdateFrequency"], "a Node's Ready or version change is posted within 5 s")
	require.Equal(t, "5m", cfg["nodeStatusReportFrequency"], "an unchanged Node status is not rewritten every 5 s")
	require.Equal(t, false, cfg["localStorageCapacityIsolation"])
	require.Contains(t, KubeletUnit(topoHost(t, "worker-1")), " --housekeeping-interval=1m ")

	etcd := EtcdPod(FullTopology().WithRole(RoleControlPlane)[0], testControlPlane()).Command
	require.Contains(t, etcd, "--heartbeat-interval=250")
	require.Contains(t, etcd, "--election-timeout=2500")
}
