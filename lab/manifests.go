package lab

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// StaticPods returns file name → manifest YAML for the static pods a host
// of the given role runs. Workers and data-plane LB hosts run none.
func StaticPods(h HostSpec, cp ControlPlane) (map[string][]byte, error) {
	var pods []*corev1.Pod
	switch h.Role {
	case RoleControlPlane:
		pods = []*corev1.Pod{EtcdPod(h, cp), APIServerPod(h, cp), ControllerManagerPod(cp), SchedulerPod(cp)}
	case RoleControlPlaneLB:
		pods = []*corev1.Pod{CPLBPod(cp)}
	}
	out := map[string][]byte{}
	for _, p := range pods {
		b, err := yaml.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("%w: marshal %s: %v", ErrHost, p.Name, err)
		}
		out[p.Name+".yaml"] = b
	}
	return out, nil
}

// EtcdPod is the stacked etcd member on control-plane host h.
func EtcdPod(h HostSpec, cp ControlPlane) *corev1.Pod {
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
	}
	probe := httpProbe("/health", 2381, corev1.URISchemeHTTP)
	probe.HTTPGet.Host = "127.0.0.1" // metrics listen on loopback only
	p := staticPod("etcd", EtcdImage, append([]string{"etcd"}, args...), probe)
	mount(p, "etcd-certs", pki, true, corev1.HostPathDirectoryOrCreate)
	mount(p, "etcd-data", etcdDataDir, false, corev1.HostPathDirectoryOrCreate)
	return p
}

// APIServerPod is kube-apiserver on control-plane host h, talking to its
// local etcd member as kubeadm's stacked topology does.
func APIServerPod(h HostSpec, cp ControlPlane) *corev1.Pod {
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
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki + "/sa.pub",
		"--service-account-signing-key-file=" + pki + "/sa.key",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--tls-cert-file=" + pki + "/apiserver.crt",
		"--tls-private-key-file=" + pki + "/apiserver.key",
	}
	img := ComponentImage("kube-apiserver", cp.Version)
	probe := httpProbe("/readyz", APIPort, corev1.URISchemeHTTPS)
	probe.HTTPGet.Host = h.IP
	p := staticPod("kube-apiserver", img, append([]string{"kube-apiserver"}, args...), probe)
	p.Annotations = map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": fmt.Sprintf("%s:%d", h.IP, APIPort)}
	mount(p, "k8s-certs", pki, true, corev1.HostPathDirectoryOrCreate)
	return p
}

// ControllerManagerPod is kube-controller-manager with the controllers a
// real cluster runs (PDB status, DaemonSets, Deployments, node lifecycle).
func ControllerManagerPod(cp ControlPlane) *corev1.Pod {
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
	probe := httpProbe("/healthz", 10257, corev1.URISchemeHTTPS)
	probe.HTTPGet.Host = "127.0.0.1"
	p := staticPod("kube-controller-manager", ComponentImage("kube-controller-manager", cp.Version),
		append([]string{"kube-controller-manager"}, args...), probe)
	mount(p, "k8s-certs", pki, true, corev1.HostPathDirectoryOrCreate)
	mount(p, "kubeconfig", conf, true, corev1.HostPathFileOrCreate)
	return p
}

// SchedulerPod is kube-scheduler.
func SchedulerPod(cp ControlPlane) *corev1.Pod {
	conf := "/etc/kubernetes/scheduler.conf"
	probe := httpProbe("/healthz", 10259, corev1.URISchemeHTTPS)
	probe.HTTPGet.Host = "127.0.0.1"
	p := staticPod("kube-scheduler", ComponentImage("kube-scheduler", cp.Version), []string{
		"kube-scheduler",
		"--authentication-kubeconfig=" + conf,
		"--authorization-kubeconfig=" + conf,
		"--kubeconfig=" + conf,
		"--bind-address=127.0.0.1",
		"--leader-elect=true",
	}, probe)
	mount(p, "kubeconfig", conf, true, corev1.HostPathFileOrCreate)
	return p
}

// CPLBPod is the control-plane load balancer: the lab's cplb TCP proxy in
// place of HAProxy + keepalived, forwarding to every apiserver.
func CPLBPod(cp ControlPlane) *corev1.Pod {
	cmd := []string{"cplb", "-listen=" + cp.LBAddress}
	for _, m := range cp.Members {
		cmd = append(cmd, fmt.Sprintf("-backend=%s:%d", m.IP, APIPort))
	}
	return staticPod("cplb", CPLBImage, cmd, nil)
}

// staticPod is the common shape of every lab static pod: kube-system,
// host network, never pulled, system-node-critical.
func staticPod(name, image string, command []string, readiness *corev1.Probe) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "kube-system",
			Labels:    map[string]string{"component": name, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name:            name,
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
				ReadinessProbe:  readiness,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"),
				}},
			}},
		},
	}
}

func httpProbe(path string, port int, scheme corev1.URIScheme) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(int32(port)), Scheme: scheme,
		}},
		PeriodSeconds:    2,
		TimeoutSeconds:   5,
		FailureThreshold: 3,
	}
}

// mount adds a hostPath volume mounted at the same path in the container.
func mount(p *corev1.Pod, name, path string, readOnly bool, typ corev1.HostPathType) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{
		Name:         name,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}},
	})
	c := &p.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: readOnly})
}
