package lab

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths inside a host. They match kubeadm's, so molt's agent finds the
// manifests and certificates where it would on a production node.
const (
	ManifestDir    = "/etc/kubernetes/manifests"
	HostPKIDir     = "/etc/kubernetes/pki"
	HostKubeletDir = "/var/lib/kubelet"
	kubeletConf    = "/etc/kubernetes/kubelet.conf"
	etcdDataDir    = "/var/lib/etcd"
)

// ControlPlane describes the control plane a static pod belongs to.
type ControlPlane struct {
	// Version of kube-apiserver, controller-manager and scheduler ("1.34.4").
	Version string
	// Members are the control-plane hosts (etcd peers, LB backends).
	Members []HostSpec
	// LBAddress is host:port the control-plane LB listens on.
	LBAddress string
}

// StaticPod is one lab static pod: a single container in kube-system on
// the host network, never pulled, system-node-critical. Manifest renders
// it as the Pod a kubelet reads from ManifestDir.
type StaticPod struct {
	// Name is the pod's and its container's name, and its component label.
	Name    string
	Image   string
	Command []string
	// Readiness, if set, is the container's readiness probe.
	Readiness *HTTPProbe
	// Mounts are hostPath volumes, each mounted at its own path.
	Mounts      []HostPathMount
	Annotations map[string]string
}

// HTTPProbe is an HTTP(S) GET probe polled every 2 s with a 5 s timeout,
// failing after 3 misses.
type HTTPProbe struct {
	// Host is the address to ask; empty means the pod IP (here the host's).
	Host string
	Path string
	Port int
	// Scheme is "HTTP" or "HTTPS".
	Scheme string
}

// HostPathMount is a hostPath volume mounted at the same path.
type HostPathMount struct {
	Name, Path string
	ReadOnly   bool
	// Type is the hostPath type: "DirectoryOrCreate" or "FileOrCreate".
	Type string
}

// StaticPods returns file name → manifest YAML for the static pods a host
// of the given role runs. Workers run none.
func StaticPods(h HostSpec, cp ControlPlane) (map[string][]byte, error) {
	var pods []StaticPod
	switch h.Role {
	case RoleControlPlane:
		pods = []StaticPod{EtcdPod(h, cp), APIServerPod(h, cp), ControllerManagerPod(cp), SchedulerPod(cp)}
	case RoleControlPlaneLB:
		pods = []StaticPod{CPLBPod(cp)}
	case RoleLoadBalancer:
		pods = []StaticPod{DataPlaneLBPod()}
	}
	out := map[string][]byte{}
	for _, p := range pods {
		b, err := p.Manifest()
		if err != nil {
			return nil, err
		}
		out[p.Name+".yaml"] = b
	}
	return out, nil
}

// Manifest renders p as Pod YAML.
func (p StaticPod) Manifest() ([]byte, error) {
	ctr := map[string]any{
		"name":            p.Name,
		"image":           p.Image,
		"imagePullPolicy": "Never",
		"command":         p.Command,
		"resources":       map[string]any{"requests": map[string]any{"cpu": "10m"}},
	}
	if pr := p.Readiness; pr != nil {
		get := map[string]any{"path": pr.Path, "port": pr.Port, "scheme": pr.Scheme}
		if pr.Host != "" {
			get["host"] = pr.Host
		}
		ctr["readinessProbe"] = map[string]any{
			"httpGet":          get,
			"periodSeconds":    2,
			"timeoutSeconds":   5,
			"failureThreshold": 3,
		}
	}
	spec := map[string]any{
		"hostNetwork":       true,
		"priorityClassName": "system-node-critical",
		"containers":        []any{ctr},
	}
	if len(p.Mounts) > 0 {
		var volumes, mounts []any
		for _, m := range p.Mounts {
			volumes = append(volumes, map[string]any{"name": m.Name, "hostPath": map[string]any{"path": m.Path, "type": m.Type}})
			vm := map[string]any{"name": m.Name, "mountPath": m.Path}
			if m.ReadOnly {
				vm["readOnly"] = true
			}
			mounts = append(mounts, vm)
		}
		spec["volumes"] = volumes
		ctr["volumeMounts"] = mounts
	}
	meta := map[string]any{
		"name":      p.Name,
		"namespace": "kube-system",
		"labels":    map[string]any{"component": p.Name, "tier": "control-plane"},
	}
	if len(p.Annotations) > 0 {
		meta["annotations"] = p.Annotations
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
	if err != nil {
		return nil, fmt.Errorf("%w: marshal %s: %v", ErrHost, p.Name, err)
	}
	return b, nil
}

// EtcdPod is the stacked etcd member on control-plane host h.
func EtcdPod(h HostSpec, cp ControlPlane) StaticPod {
	var initial []string
	for _, m := range cp.Members {
		initial = append(initial, fmt.Sprintf("%s=https://%s:2380", m.Name, m.IP))
	}
	pki := HostPKIDir + "/etcd"
	args := []string{
		"--name=" + h.Name,
		"--data-dir=" + etcdDataDir,
		"--listen-client-urls=https://127.0.0.1:2379,https://" + h.IP + ":2379",
		"--advertise-client-urls=https://" + h.IP + ":2379",
		"--listen-peer-urls=https://" + h.IP + ":2380",
		"--initial-advertise-peer-urls=https://" + h.IP + ":2380",
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=molt-lab",
		"--listen-metrics-urls=http://127.0.0.1:2381",
		"--cert-file=" + pki + "/server.crt",
		"--key-file=" + pki + "/server.key",
		"--trusted-ca-file=" + pki + "/ca.crt",
		"--client-cert-auth=true",
		"--peer-cert-file=" + pki + "/peer.crt",
		"--peer-key-file=" + pki + "/peer.key",
		"--peer-trusted-ca-file=" + pki + "/ca.crt",
		"--peer-client-cert-auth=true",
		"--snapshot-count=10000",
		// Raft heartbeats every 250 ms with a 2.5 s election timeout, not
		// 100 ms / 1 s: the members are on one machine (a round trip is
		// far below either), the heartbeats were a steady share of each
		// member's CPU at rest, and on 2 busy cores a leader held off the
		// CPU for a second no longer costs an election. A member stopping
		// for an upgrade hands its leadership over first, so an upgrade
		// does not wait on the timeout.
		"--heartbeat-interval=250",
		"--election-timeout=2500",
	}
	return StaticPod{
		Name: "etcd", Image: EtcdImage(cp.Version), Command: append([]string{"etcd"}, args...),
		// metrics listen on loopback only
		Readiness: &HTTPProbe{Host: "127.0.0.1", Path: "/health", Port: 2381, Scheme: "HTTP"},
		Mounts: []HostPathMount{
			{Name: "etcd-certs", Path: pki, ReadOnly: true, Type: "DirectoryOrCreate"},
			{Name: "etcd-data", Path: etcdDataDir, Type: "DirectoryOrCreate"},
		},
	}
}

// APIServerPod is kube-apiserver on control-plane host h, talking to its
// local etcd member as kubeadm's stacked topology does.
func APIServerPod(h HostSpec, cp ControlPlane) StaticPod {
	pki := HostPKIDir
	args := []string{
		"--advertise-address=" + h.IP,
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--client-ca-file=" + pki + "/ca.crt",
		"--enable-admission-plugins=NodeRestriction",
		"--etcd-cafile=" + pki + "/etcd/ca.crt",
		"--etcd-certfile=" + pki + "/apiserver-etcd-client.crt",
		"--etcd-keyfile=" + pki + "/apiserver-etcd-client.key",
		"--etcd-servers=https://127.0.0.1:2379",
		"--kubelet-client-certificate=" + pki + "/apiserver-kubelet-client.crt",
		"--kubelet-client-key=" + pki + "/apiserver-kubelet-client.key",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--proxy-client-cert-file=" + pki + "/front-proxy-client.crt",
		"--proxy-client-key-file=" + pki + "/front-proxy-client.key",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-client-ca-file=" + pki + "/front-proxy-ca.crt",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		fmt.Sprintf("--secure-port=%d", APIPort),
		// On SIGTERM the apiserver closes its watches within 5 s and exits.
		// Without it the watches keep every client connection busy, its HTTP
		// server's shutdown waits them out, and the kubelet kills it at the
		// pod's grace period (30 s): each control-plane node of an upgrade
		// waited about 30 s more for its new apiserver, and the watchers saw
		// a dead connection instead of a closed watch. Measured on a lab
		// host: 40–44 s from the new manifest to the new apiserver running
		// without it, 12–16 s with it.
		"--shutdown-watch-termination-grace-period=5s",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki + "/sa.pub",
		"--service-account-signing-key-file=" + pki + "/sa.key",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--tls-cert-file=" + pki + "/apiserver.crt",
		"--tls-private-key-file=" + pki + "/apiserver.key",
	}
	return StaticPod{
		Name: "kube-apiserver", Image: ComponentImage("kube-apiserver", cp.Version),
		Command:     append([]string{"kube-apiserver"}, args...),
		Readiness:   &HTTPProbe{Host: h.IP, Path: "/readyz", Port: APIPort, Scheme: "HTTPS"},
		Mounts:      []HostPathMount{{Name: "k8s-certs", Path: pki, ReadOnly: true, Type: "DirectoryOrCreate"}},
		Annotations: map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": fmt.Sprintf("%s:%d", h.IP, APIPort)},
	}
}

// ControllerManagerPod is kube-controller-manager with the controllers a
// real cluster runs (PDB status, DaemonSets, Deployments, node lifecycle).
func ControllerManagerPod(cp ControlPlane) StaticPod {
	pki := HostPKIDir
	conf := "/etc/kubernetes/controller-manager.conf"
	args := []string{
		"--authentication-kubeconfig=" + conf,
		"--authorization-kubeconfig=" + conf,
		"--kubeconfig=" + conf,
		"--bind-address=127.0.0.1",
		"--client-ca-file=" + pki + "/ca.crt",
		"--cluster-name=kubernetes",
		"--cluster-signing-cert-file=" + pki + "/ca.crt",
		"--cluster-signing-key-file=" + pki + "/ca.key",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--leader-elect=true",
		"--requestheader-client-ca-file=" + pki + "/front-proxy-ca.crt",
		"--root-ca-file=" + pki + "/ca.crt",
		"--service-account-private-key-file=" + pki + "/sa.key",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--use-service-account-credentials=true",
	}
	return StaticPod{
		Name: "kube-controller-manager", Image: ComponentImage("kube-controller-manager", cp.Version),
		Command:   append([]string{"kube-controller-manager"}, args...),
		Readiness: &HTTPProbe{Host: "127.0.0.1", Path: "/healthz", Port: 10257, Scheme: "HTTPS"},
		Mounts: []HostPathMount{
			{Name: "k8s-certs", Path: pki, ReadOnly: true, Type: "DirectoryOrCreate"},
			{Name: "kubeconfig", Path: conf, ReadOnly: true, Type: "FileOrCreate"},
		},
	}
}

// SchedulerPod is kube-scheduler.
func SchedulerPod(cp ControlPlane) StaticPod {
	conf := "/etc/kubernetes/scheduler.conf"
	return StaticPod{
		Name: "kube-scheduler", Image: ComponentImage("kube-scheduler", cp.Version),
		Command: []string{
			"kube-scheduler",
			"--authentication-kubeconfig=" + conf,
			"--authorization-kubeconfig=" + conf,
			"--kubeconfig=" + conf,
			"--bind-address=127.0.0.1",
			"--leader-elect=true",
		},
		Readiness: &HTTPProbe{Host: "127.0.0.1", Path: "/healthz", Port: 10259, Scheme: "HTTPS"},
		Mounts:    []HostPathMount{{Name: "kubeconfig", Path: conf, ReadOnly: true, Type: "FileOrCreate"}},
	}
}

// CPLBPod is the control-plane load balancer: the lab's cplb TCP proxy in
// place of HAProxy + keepalived, forwarding to every apiserver.
func CPLBPod(cp ControlPlane) StaticPod {
	cmd := []string{"cplb", "-listen=" + cp.LBAddress}
	for _, m := range cp.Members {
		cmd = append(cmd, fmt.Sprintf("-backend=%s:%d", m.IP, APIPort))
	}
	return StaticPod{Name: "cplb", Image: CPLBImage, Command: cmd}
}
