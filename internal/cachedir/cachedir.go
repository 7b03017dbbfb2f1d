// Package cachedir names the two caches molt's tests, lab and demo use on
// a build machine, read from the environment in one place (it is test and
// lab infrastructure, not a product binary):
//
//   - Build(): ${MOLT_BUILD_CACHE}, the expensive Kubernetes and etcd
//     builds of build/k8s (k8s/vX.Y.Z/bin, a stamped release in
//     k8s/vSOURCE-as-vX.Y.Z/bin: K8sBuilds, K8sBin; etcd/vX.Y.Z/bin).
//     Defaults to Lab(), so one directory holds everything unless told
//     otherwise.
//   - Lab(): ${MOLT_CACHE} (default /var/cache/molt), what the lab makes
//     from those builds: its tools, image archives and host rootfs.
//
// CI points MOLT_CACHE at an empty directory and MOLT_BUILD_CACHE at the
// warm one, so a step that relies on another command's leftovers in the
// lab cache fails there instead of on a newcomer's machine.
package cachedir

import "os"

// Default is where both caches live when nothing is set.
const Default = "/var/cache/molt"

// Lab is ${MOLT_CACHE:-/var/cache/molt}.
func Lab() string {
	if d := os.Getenv("MOLT_CACHE"); d != "" {
		return d
	}
	return Default
}

// Build is ${MOLT_BUILD_CACHE:-$(Lab())}.
func Build() string {
	if d := os.Getenv("MOLT_BUILD_CACHE"); d != "" {
		return d
	}
	return Lab()
}
