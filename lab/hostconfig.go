package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/yaml"
)

// Host-side file locations.
const (
	KubeletBinary       = "/usr/bin/kubelet" // where molt-agent upgrades it (ReadWritePaths=/usr/bin)
	KubeletConfigPath   = "/var/lib/kubelet/config.yaml"
	KubeletUnitPath     = "/etc/systemd/system/kubelet.service"
	ContainerdConfig    = "/etc/containerd/config.toml"
	CNIConfigPath       = "/etc/cni/net.d/10-molt-lab.conflist"
	ContainerdNamespace = "k8s.io" // the CRI plugin's namespace
)

// PodCIDR is the pod range of a host: 10.244.<last octet of its address>.0/24.
// Each host's CNI bridge allocates from it; the lab adds a route per host so
// pods reach each other across hosts without an overlay.
func PodCIDR(h HostSpec) string {
	a := netip.MustParseAddr(h.IP).As4()
	return fmt.Sprintf("10.244.%d.0/24", a[3])
}

// KubeletConfig is the KubeletConfiguration for a lab host. Every setting
// that departs from kubeadm's defaults is there because the host is an
// nspawn container on a cgroup-v1 machine without CAP_SYS_RESOURCE (see
// /work/shared/MACHINE-NOTES.md and docs/lab.md).
func KubeletConfig() ([]byte, error) {
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": HostPKIDir + "/ca.crt"},
		},
		"authorization":            map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"staticPodPath":            ManifestDir,
		// Pods resolve through the cluster DNS add-on (coredns.go).
		"clusterDomain": ClusterDomain,
		"clusterDNS":    []string{ClusterDNS},
		// cgroup v1 is deprecated; 1.31+ refuses it unless told otherwise.
		"failCgroupV1": false,
		"cgroupDriver": "cgroupfs",
		// The host cannot create the QoS hierarchy or enforce allocatable
		// in its delegated cgroup tree.
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{},
		// /proc/sys is read-only in the host: check, never write.
		"protectKernelDefaults": true,
		// Lab hosts share one machine's disk and memory; never evict, and
		// never garbage-collect images that cannot be pulled again.
		"evictionHard":                map[string]string{},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Nothing is evicted, so the eviction manager need not read every
		// container's stats every 10 s: with no thresholds and local
		// storage isolation off it does nothing. That, with cAdvisor's
		// housekeeping once a minute (KubeletUnit), takes about half of
		// each kubelet's CPU away — the profile of a lab kubelet spent 36 %
		// in the eviction manager's stats and 33 % in housekeeping, which
		// on 2 cores and 9 hosts held the lab's upgrades back.
		"localStorageCapacityIsolation": false,
		"failSwapOn":                    false,
		"syncFrequency":                 "10s",
		"fileCheckFrequency":            "5s",
		// A change of the Node's status (Ready, the kubelet's version) is
		// posted at the next 5 s check: molt's waits see it promptly.
		"nodeStatusUpdateFrequency": "5s",
		// An unchanged status is posted every 5 minutes (the kubelet's own
		// default), not every 5 s as it would be with the frequency above
		// set: the Node Lease, renewed every 10 s, is what the node
		// lifecycle controller reads for liveness, so nothing waits on these
		// posts, and each rewrote the whole Node (1.4 writes/s in the full
		// lab) in etcd and to every watcher of Nodes.
		"nodeStatusReportFrequency": "5m",
		"serializeImagePulls":       false,
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: kubelet config: %v", ErrHost, err)
	}
	return b, nil
}

// KubeletUnit is the systemd unit that runs the kubelet on a host.
func KubeletUnit(h HostSpec) string {
	labels := "molt.dev/role=" + string(h.Role)
	if h.Zone != "" {
		labels += "," + ZoneLabel + "=" + h.Zone
	}
	extra := ""
	if h.ProviderID != "" {
		extra = " --provider-id=" + h.ProviderID
	}
	return strings.Join([]string{
		"[Unit]",
		"Description=kubelet (molt lab)",
		"After=containerd.service",
		"Wants=containerd.service",
		"",
		"[Service]",
		"ExecStart=" + KubeletBinary +
			" --config=" + KubeletConfigPath +
			" --kubeconfig=" + kubeletConf +
			" --hostname-override=" + h.Name +
			" --node-ip=" + h.IP +
			" --node-labels=" + labels + extra +
			// cAdvisor's per-container housekeeping every minute, not every
			// 10 s: nothing in the lab reads the kubelet's container stats
			// (KubeletConfig says why it matters).
			" --housekeeping-interval=1m" +
			" --v=1",
		"Restart=always",
		"RestartSec=2",
		"",
		"[Install]",
		"WantedBy=multi-user.target",
		"",
	}, "\n")
}

// ContainerdConfigTOML is containerd's config for a lab host: the CRI
// plugin with the lab's pause image as sandbox, OOM-score adjustments
// clamped (the machine lacks CAP_SYS_RESOURCE; runc fails otherwise), and
// the lab's registry (registry.go) as the mirror of every registry the
// lab's images are named after, over plain HTTP: nothing else is reachable
// from a host. The mirrors are the CRI plugin's version-2 form, which
// containerd 1.6 and 1.7 (the lab's releases' daemons) both read.
func ContainerdConfigTOML() string {
	var mirrors strings.Builder
	for _, r := range MirroredRegistries {
		fmt.Fprintf(&mirrors, "    [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.%q]\n      endpoint = [%q]\n", r, "http://"+RegistryAddr())
	}
	return `version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
` + mirrors.String()
}

// CNIConfig is a bridge network on the host with host-local IPAM over the
// host's PodCIDR. Without a CNI config containerd reports the network not
// ready and the Node never becomes Ready.
func CNIConfig(h HostSpec) ([]byte, error) {
	cidr := PodCIDR(h)
	gw := netip.MustParsePrefix(cidr).Addr().Next()
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "molt-lab",
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    "cni0",
				"isGateway": true,
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": cidr, "gateway": gw.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": "/run/cni-ipam",
				},
			},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: cni config: %v", ErrHost, err)
	}
	return b, nil
}
