// Package lab builds and runs molt's local lab: a real Kubernetes cluster
// made of systemd-nspawn hosts on one Linux machine, each host in its own
// network namespace with containerd, a real kubelet and kubeadm-style static
// pods (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a
// control-plane load balancer).
//
// Each file owns one idea: topology.go (hosts, roles, addresses), pki.go and
// kubeconfig.go (certificates and kubeconfigs), images.go (OCI image
// tarballs without a registry), manifests.go (static pods), hostconfig.go
// (kubelet, containerd and CNI config), network.go (namespaces, bridge,
// veths, dialling into the lab), host.go (booting and preparing one host),
// exec.go (running commands in a host), cluster.go (waiting for the API and
// Nodes, sample workload manifests, CheckServing), lab.go (the up/down
// driver), status.go (hosts, Nodes, static-pod images) and render.go (host
// files for the Vagrant lab). Every Kubernetes API call goes through package
// kube: the lab renders manifests as text and kube creates them. docs/lab.md explains the
// choices; lab/tools holds the static binaries the lab packs into images.
package lab
