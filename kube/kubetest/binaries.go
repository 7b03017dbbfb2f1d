package kubetest

import (
	"fmt"
	"github.com/moltproject/molt/internal/cachedir"
	"os"
	"path/filepath"
)

// DefaultVersion is the Kubernetes release the harness runs unless
// MOLT_K8S_BIN points elsewhere, found where make deps builds it
// (cachedir.K8sBin).
const DefaultVersion = "v1.34.4"

// etcdVersion is the etcd build/k8s/etcd.sh produces; kube-apiserver 1.34
// needs 3.6 (RequestWatchProgress).
const etcdVersion = "v3.6.4"

// binaries are the absolute paths of the processes the harness starts.
type binaries struct {
	etcd, apiserver, controllerManager string
}

// cacheDir mirrors build/k8s: ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}.
func cacheDir() string { return cachedir.Build() }

// findBinaries locates the binaries, returning a description of what is
// missing (and how to build it) instead of an error, for testenv.Missing.
func findBinaries() (binaries, string) {
	k8s := os.Getenv("MOLT_K8S_BIN")
	if k8s == "" {
		k8s = cachedir.K8sBin(cacheDir(), DefaultVersion)
	}
	etcd := os.Getenv("MOLT_ETCD_BIN")
	if etcd == "" {
		etcd = filepath.Join(cacheDir(), "etcd", etcdVersion, "bin")
	}
	b := binaries{
		etcd:              filepath.Join(etcd, "etcd"),
		apiserver:         filepath.Join(k8s, "kube-apiserver"),
		controllerManager: filepath.Join(k8s, "kube-controller-manager"),
	}
	for _, p := range []string{b.apiserver, b.controllerManager, b.etcd} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Sprintf("%s (build with %s && build/k8s/etcd.sh, or make deps, or set MOLT_K8S_BIN/MOLT_ETCD_BIN): %v",
				filepath.Base(p), cachedir.K8sBuildOf(DefaultVersion).Command(), err)
		}
	}
	return b, ""
}
