package lab

import (
	"fmt"
	"path/filepath"
)

// kube-proxy, the add-on that gives Services their data path: a DaemonSet
// at the release's own version on every node, in nftables mode. Its image
// is the release's kube-proxy binary plus the rootfs's nft with the
// libraries nft loads (kube-proxy's nftables mode programs the kernel by
// running `nft -f -`).
const (
	// KubeProxyMode is kube-proxy's proxy mode in the lab.
	KubeProxyMode = "nftables"
	// nftBinary is where nft is in the rootfs and in the image.
	nftBinary = "/usr/sbin/nft"
	// kubeProxyBinary is where the image holds kube-proxy.
	kubeProxyBinary = "/usr/local/bin/kube-proxy"
	// kubeProxyHealthzPort answers /healthz once kube-proxy programmed
	// the node's rules.
	kubeProxyHealthzPort = 10256
	kubeProxyConfigDir   = "/var/lib/kube-proxy"
	// ClusterCIDR is the pod range of every host together (PodCIDR).
	ClusterCIDR = "10.244.0.0/16"
)

// KubeProxyImage is the reference of kube-proxy's image at a Kubernetes
// version ("1.34.4" or "v1.34.4"), the upstream name.
func KubeProxyImage(version string) string { return ComponentImage("kube-proxy", version) }

// KubeProxyConfig is kube-proxy's KubeProxyConfiguration. The settings it
// leaves alone are those a lab host cannot change: conntrack's table size
// and timeouts are machine-wide (nf_conntrack_max) or not worth moving
// inside a shared machine, so zeros keep kube-proxy from writing them.
// masqueradeAll SNATs every Service connection to the node's address, so
// a reply always comes back through the node that translated it, also
// from a pod to a Service backed by a pod on the same bridge.
func KubeProxyConfig() string {
	return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ` + kubeProxyConfigDir + `/kubeconfig.conf
mode: ` + KubeProxyMode + `
clusterCIDR: ` + ClusterCIDR + `
nftables:
  masqueradeAll: true
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
healthzBindAddress: 0.0.0.0:` + fmt.Sprint(kubeProxyHealthzPort) + `
metricsBindAddress: 127.0.0.1:10249
`
}

// KubeProxyKubeconfig is the kubeconfig kube-proxy uses, as kubeadm's: the
// pod's service-account token and CA, and the control plane through its
// load balancer (a node's kube-proxy must not need a Service to reach the
// API: it is what makes Services work).
func KubeProxyKubeconfig(apiEndpoint string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://` + apiEndpoint + `
contexts:
- name: default
  context: {cluster: default, namespace: default, user: default}
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`
}

// kubeProxyObjects are kube-proxy's objects at version, kubeadm's set: its
// ServiceAccount, bound to the built-in ClusterRole system:node-proxier,
// the ConfigMap with its configuration and kubeconfig, and the DaemonSet:
// on the host network, privileged (it programs the node's nftables),
// tolerating every taint so it runs on every node, updated one node at a
// time.
func kubeProxyObjects(version, apiEndpoint string) []map[string]any {
	labels := map[string]any{"k8s-app": "kube-proxy"}
	meta := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": "kube-system", "labels": labels}
	}
	rbac := "rbac.authorization.k8s.io"
	container := map[string]any{
		"name":            "kube-proxy",
		"image":           KubeProxyImage(version),
		"imagePullPolicy": "IfNotPresent",
		"command": []string{
			kubeProxyBinary,
			"--config=" + kubeProxyConfigDir + "/config.conf",
			"--hostname-override=$(NODE_NAME)",
		},
		"env": []any{map[string]any{
			"name": "NODE_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}},
		}},
		"securityContext": map[string]any{"privileged": true},
		// Ready once the node's rules are programmed (and kept so).
		"readinessProbe": map[string]any{
			"httpGet":       map[string]any{"path": "/healthz", "port": kubeProxyHealthzPort},
			"periodSeconds": 2, "timeoutSeconds": 2, "failureThreshold": 3,
		},
		"volumeMounts": []any{map[string]any{"name": "kube-proxy", "mountPath": kubeProxyConfigDir, "readOnly": true}},
	}
	return []map[string]any{
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("kube-proxy")},
		{
			"apiVersion": rbac + "/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "kubeadm:node-proxier", "labels": labels},
			"roleRef":  map[string]any{"apiGroup": rbac, "kind": "ClusterRole", "name": "system:node-proxier"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}},
		},
		{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("kube-proxy"),
			"data": map[string]any{"config.conf": KubeProxyConfig(), "kubeconfig.conf": KubeProxyKubeconfig(apiEndpoint)},
		},
		{
			"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("kube-proxy"),
			"spec": map[string]any{
				"selector":       map[string]any{"matchLabels": labels},
				"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 1}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"priorityClassName":  "system-node-critical",
						"serviceAccountName": "kube-proxy",
						"hostNetwork":        true,
						"nodeSelector":       map[string]any{"kubernetes.io/os": "linux"},
						"tolerations":        []any{map[string]any{"operator": "Exists"}},
						"containers":         []any{container},
						"volumes":            []any{map[string]any{"name": "kube-proxy", "configMap": map[string]any{"name": "kube-proxy"}}},
					},
				},
			},
		},
	}
}

// kubeProxyImageSpec is kube-proxy's image at a release: its binary from
// k8sBin, nft from rootfs with what nft loads, and the rootfs's
// /etc/protocols. Without that file nft lists a protocol by number ("6")
// where kube-proxy writes its name ("tcp"): a kube-proxy that starts on a
// node whose table an earlier one filled reads every Service's element
// back under a key it does not know, and its first sync deletes them all
// (Services stop answering until a later full sync, which fails on the
// missing elements first).
func kubeProxyImageSpec(version, k8sBin, rootfs string) (ImageSpec, error) {
	nft, err := binaryWithLibs(rootfs, nftBinary)
	if err != nil {
		return ImageSpec{}, err
	}
	protocols, err := inRoot(rootfs, "/etc/protocols")
	if err != nil {
		return ImageSpec{}, err
	}
	files := append([]ImageFile{{Src: filepath.Join(k8sBin, "kube-proxy"), Path: kubeProxyBinary}}, nft...)
	files = append(files, ImageFile{Src: protocols, Path: "/etc/protocols"})
	return ImageSpec{
		Ref: KubeProxyImage(version), Files: files, Entrypoint: []string{kubeProxyBinary},
		// knftables finds nft on PATH.
		Env: []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}, nil
}
