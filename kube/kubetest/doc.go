// Package kubetest runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver and kube-controller-manager (disruption and service-account
// controllers only) as plain processes on free loopback ports, with
// self-generated certificates and a static admin token.
//
// There is no kubelet and no scheduler. Tests create Node objects and set
// their status directly, bind pods with spec.nodeName and set pod status
// themselves (RunPod). Without a kubelet an evicted pod stays Terminating;
// ReapTerminating plays the kubelet that finishes deletions.
//
// Binaries come from build/k8s (1.34.4 is 1.34.3 stamped 1.34.4:
// build.sh --stamp 1.34.4 1.34.3; etcd.sh) under
// ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}} where make deps puts
// them (cachedir.K8sBin), or from the directory in MOLT_K8S_BIN
// (MOLT_ETCD_BIN for etcd). When they are missing the test calls
// testenv.Missing: it fails under CI=true and skips elsewhere.
//
// StartWith adds flags to etcd and the apiserver, for a control plane
// holding more than tests usually put there (the kwok measurement's
// 15,000 Nodes: etcd's quota, the apiserver's in-flight limits); PIDs
// names the processes so such a measurement can read their CPU.
//
// Share one control plane per test package:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }
//	func TestX(t *testing.T) { cp := kubetest.Shared(t); ns := cp.Namespace(t); ... }
package kubetest
