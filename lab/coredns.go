package lab

import (
	"fmt"
	"time"
)

// CoreDNS, the cluster DNS add-on, as kubeadm installs it: a Deployment of
// two behind the Service kube-system/kube-dns at ClusterDNS, answering for
// the cluster domain from the API's Services and endpoints. The binary is
// build/coredns's (CoreDNS's module with only the plugins the Corefile
// below uses), one pinned version for every release of the lab, as etcd.
const (
	// CoreDNSVersion is the CoreDNS build/coredns builds. Keep in step with
	// scripts/install-deps.sh.
	CoreDNSVersion = "1.15.0"
	// CoreDNSImage is its image, the upstream name.
	CoreDNSImage = "registry.k8s.io/coredns/coredns:v" + CoreDNSVersion
	// ClusterDomain is the cluster's DNS domain; the kubelets hand it to pods.
	ClusterDomain = "cluster.local"
	// ClusterDNS is the cluster DNS Service's address (kube-dns, inside
	// ServiceCIDR), which the kubelets hand to pods.
	ClusterDNS = "10.96.0.10"
	// coreDNSBinary is where the image holds CoreDNS (upstream's path).
	coreDNSBinary = "/coredns"
	// coreDNSHealthPort and coreDNSReadyPort are the health and ready
	// plugins' listeners.
	coreDNSHealthPort = 8080
	coreDNSReadyPort  = 8181
)

// ServingGrace is how long the lab's pods that serve others (CoreDNS, the
// sample workload) keep serving after SIGTERM, and so how long a drain's
// eviction may take to reach every node's Service rules without losing a
// request. See Corefile for the 7 s it has to cover.
const ServingGrace = 10 * time.Second

// Corefile is CoreDNS's configuration: the cluster domain and reverse
// zones from the API (kubernetes), cached; nothing is forwarded, because
// nothing outside the lab can be reached. reload picks up a changed
// ConfigMap without a restart.
//
// lameduck is how long an evicted CoreDNS keeps answering after SIGTERM:
// long enough for every node to stop sending it queries (ServingGrace).
// kubeadm's 5 s is not: the add-ons step replaces kube-proxy on every node
// while the load-balancer pool (and then the workers) drain, and a node
// whose kube-proxy is being replaced keeps its old Service rules until the
// new one has synced — 7 s after an eviction in a demo measured under
// load, with lookups from cp-1 sent to a CoreDNS pod that had stopped.
func Corefile() string {
	return `.:53 {
    errors
    health {
        lameduck ` + fmt.Sprint(ServingGrace) + `
    }
    ready
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    cache 30
    loadbalance
    reload
}
`
}

// coreDNSObjects are CoreDNS's objects, kubeadm's set: ServiceAccount,
// ClusterRole and binding (read Services, endpoints, pods, namespaces),
// the Corefile's ConfigMap, the Deployment (two replicas, spread over
// nodes when it can be) and the Service kube-dns at ClusterDNS.
func coreDNSObjects() []map[string]any {
	labels := map[string]any{"k8s-app": "kube-dns"}
	meta := func(name string) map[string]any {
		return map[string]any{"name": name, "namespace": "kube-system", "labels": labels}
	}
	rbac := "rbac.authorization.k8s.io"
	port := func(name, proto string) map[string]any {
		return map[string]any{"name": name, "containerPort": 53, "protocol": proto}
	}
	container := map[string]any{
		"name":            "coredns",
		"image":           CoreDNSImage,
		"imagePullPolicy": "IfNotPresent",
		"args":            []string{"-conf", "/etc/coredns/Corefile"},
		"ports":           []any{port("dns", "UDP"), port("dns-tcp", "TCP")},
		"resources":       map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}},
		"livenessProbe": map[string]any{
			"httpGet":             map[string]any{"path": "/health", "port": coreDNSHealthPort},
			"initialDelaySeconds": 60, "timeoutSeconds": 5, "failureThreshold": 5,
		},
		"readinessProbe": map[string]any{
			"httpGet":       map[string]any{"path": "/ready", "port": coreDNSReadyPort},
			"periodSeconds": 2,
		},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"capabilities":             map[string]any{"drop": []string{"ALL"}, "add": []string{"NET_BIND_SERVICE"}},
		},
		"volumeMounts": []any{map[string]any{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}},
	}
	return []map[string]any{
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("coredns")},
		{
			"apiVersion": rbac + "/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "system:coredns", "labels": labels},
			"rules": []any{
				map[string]any{"apiGroups": []string{""}, "resources": []string{"endpoints", "services", "pods", "namespaces"}, "verbs": []string{"list", "watch"}},
				map[string]any{"apiGroups": []string{"discovery.k8s.io"}, "resources": []string{"endpointslices"}, "verbs": []string{"list", "watch"}},
			},
		},
		{
			"apiVersion": rbac + "/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "system:coredns", "labels": labels},
			"roleRef":  map[string]any{"apiGroup": rbac, "kind": "ClusterRole", "name": "system:coredns"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}},
		},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("coredns"), "data": map[string]any{"Corefile": Corefile()}},
		{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("coredns"),
			"spec": map[string]any{
				"replicas": 2,
				"selector": map[string]any{"matchLabels": labels},
				"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 1}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"priorityClassName":  "system-cluster-critical",
						"serviceAccountName": "coredns",
						"dnsPolicy":          "Default",
						"nodeSelector":       map[string]any{"kubernetes.io/os": "linux"},
						"tolerations": []any{
							map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"},
							map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
						},
						"affinity": map[string]any{"podAntiAffinity": map[string]any{
							"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
								"weight": 100,
								"podAffinityTerm": map[string]any{
									"labelSelector": map[string]any{"matchLabels": labels},
									"topologyKey":   "kubernetes.io/hostname",
								},
							}},
						}},
						"containers": []any{container},
						"volumes": []any{map[string]any{"name": "config-volume", "configMap": map[string]any{
							"name": "coredns", "items": []any{map[string]any{"key": "Corefile", "path": "Corefile"}},
						}}},
					},
				},
			},
		},
		{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "kube-dns", "namespace": "kube-system",
				"labels": map[string]any{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
			"spec": map[string]any{
				"clusterIP": ClusterDNS,
				"selector":  labels,
				"ports": []any{
					map[string]any{"name": "dns", "port": 53, "protocol": "UDP"},
					map[string]any{"name": "dns-tcp", "port": 53, "protocol": "TCP"},
				},
			},
		},
	}
}

// coreDNSImageSpec is CoreDNS's image: the build/coredns binary alone.
func coreDNSImageSpec(binary string) ImageSpec {
	return ImageSpec{Ref: CoreDNSImage, Files: []ImageFile{{Src: binary, Path: coreDNSBinary}}, Entrypoint: []string{coreDNSBinary}}
}
