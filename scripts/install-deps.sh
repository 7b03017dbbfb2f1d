#!/usr/bin/env bash
# Installs everything molt's tests need on a fresh Debian 12 machine, as
# root, idempotently. The Kubernetes, etcd, containerd and CoreDNS binaries
# built from Go modules (build/k8s, build/containerd, build/coredns) are
# cached under $MOLT_BUILD_CACHE (default $MOLT_CACHE,
# default /var/cache/molt); the lab makes its tools, images and Debian
# rootfs itself under $MOLT_CACHE when it first needs them.
set -euo pipefail

# One function, parsed whole before it runs: editing this file while it
# runs cannot derail it.
main() {
cd "$(dirname "$0")/.."
export MOLT_CACHE=${MOLT_CACHE:-/var/cache/molt}
export MOLT_BUILD_CACHE=${MOLT_BUILD_CACHE:-$MOLT_CACHE}
mkdir -p "$MOLT_CACHE" "$MOLT_BUILD_CACHE"
log() { printf '[deps %(%H:%M:%S)T] %s\n' -1 "$*"; }
t0=$(date +%s)

[ "$(id -u)" = 0 ] || { echo "run as root: the tests boot systemd hosts, mount and make network namespaces"; exit 1; }
command -v go >/dev/null || { echo "Go 1.26 is required on PATH (/usr/local/go/bin)"; exit 1; }

# The Kubernetes builds: the same facts as internal/cachedir/k8s.go's
# K8sBuilds, which the lab, the demo and the tests read to find them
# (TestK8sBuildsMatchInstallDeps checks the two agree).
# Compiled from their own sources: two releases a minor apart, so the lab
# can take a minor upgrade (1.33.13 → 1.34.3).
K8S_COMPILED=(1.33.13 1.34.3)
# Stamped, each entry build.sh --stamp's arguments "VERSION SOURCE
# [COMPONENT...]": SOURCE's compiled binaries linked again reporting VERSION,
# into k8s/vSOURCE-as-vVERSION/bin (a link, ~15 s for all five once SOURCE
# is compiled). 1.34.4, the patch upgrade's target (1.34.3 → 1.34.4), is
# 1.34.3 stamped: every component's binary and image and the versions the
# Nodes and the API server report change, which is what a patch upgrade
# proves (docs/e2e.md). 1.34.5 is the e2e test's deliberately broken
# release: only a kubelet.
K8S_STAMPED=("1.34.4 1.34.3" "1.34.5 1.34.3 kubelet")
# etcd as kubeadm pairs it (lab.EtcdVersionFor): 3.5.21 with 1.33, 3.6.4
# with 1.34, so the minor upgrade moves etcd 3.5 → 3.6. 17 s each warm.
ETCD_VERSIONS=(3.5.21 3.6.4)
# The 1.34 releases ship a containerd of the 1.7 line built from its module
# (build/containerd), so the minor upgrade replaces Debian's 1.6 on every
# host. Keep in step with lab.BuiltContainerdVersion.
CONTAINERD_VERSION=1.7.35
# Cluster DNS: CoreDNS built from its module with only the plugins the
# lab's Corefile uses (build/coredns). Keep in step with lab.CoreDNSVersion.
COREDNS_VERSION=1.15.0

# Say up front what is about to be built and how long it takes, so a first
# run is not mistaken for a hang. Minutes on 2 cores from nothing
# (measured 2026-11-23, docs/e2e.md): Debian packages and Go modules ~3,
# etcd ~1.5, containerd ~1.5, CoreDNS ~3.5, each compiled Kubernetes release ~6 (5.6 min for 1.33.13 with the
# cores to itself; 8-12 when they are shared; kube-proxy adds ~20 s to it);
# the stamped builds together well under 1 (measured 2026-11-28: 15 s for
# all five of 1.34.3 stamped 1.34.4, 1.34.3 compiled).
todo=() minutes=0
for v in "${ETCD_VERSIONS[@]}"; do
	[[ -x "$MOLT_BUILD_CACHE/etcd/v$v/bin/etcd" ]] || { todo+=("etcd $v"); minutes=$((minutes + 2)); }
done
[[ -x "$MOLT_BUILD_CACHE/containerd/v$CONTAINERD_VERSION/bin/containerd" ]] || { todo+=("containerd $CONTAINERD_VERSION"); minutes=$((minutes + 2)); }
[[ -x "$MOLT_BUILD_CACHE/coredns/v$COREDNS_VERSION/bin/coredns" ]] || { todo+=("coredns $COREDNS_VERSION"); minutes=$((minutes + 4)); }
for v in "${K8S_COMPILED[@]}"; do
	if [[ -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kubelet" && -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kube-apiserver" ]]; then
		[[ -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kube-proxy" ]] || { todo+=("kube-proxy $v"); minutes=$((minutes + 1)); }
		continue
	fi
	todo+=("kubernetes $v"); minutes=$((minutes + 6))
done
stamping=0
for s in "${K8S_STAMPED[@]}"; do
	read -r v src comps <<<"$s"
	for c in ${comps:-kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy}; do
		[[ -x "$MOLT_BUILD_CACHE/k8s/v$src-as-v$v/bin/$c" ]] || { todo+=("kubernetes $src stamped $v"); stamping=1; break; }
	done
done
minutes=$((minutes + stamping))
if ((${#todo[@]})); then
	minutes=$((minutes + 3))
	log "one-time build into $MOLT_BUILD_CACHE: ${todo[*]/%/,} about $minutes minutes on 2 idle cores (longer on a busy machine); progress every 30 s below"
else
	log "Kubernetes, etcd, containerd and CoreDNS builds: cached in $MOLT_BUILD_CACHE"
fi

# Debian packages: containerd and runc (agent tests, lab hosts), debootstrap
# and systemd-nspawn (hosts with a real systemd; the hosts' rootfs brings
# its own CNI plugins), iproute2 (lab network), prometheus for promtool (alert rule tests),
# vagrant and vagrant-libvirt (validating the Vagrantfile: without a
# provider plugin `vagrant validate` fails "No usable default provider"),
# ruby (vagrant's own; vagrant/'s tests evaluate the Vagrantfile with it),
# curl (the demo), chromium (the web view's browser tests, web/browsertest,
# driven headless over its DevTools protocol; ~30 s to install), nftables
# (partitions in the linearizability test).
APT_PACKAGES=(containerd runc debootstrap systemd-container iproute2 prometheus vagrant vagrant-libvirt ruby curl chromium nftables)
missing=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	log "apt: installing ${missing[*]}"
	# Packages must not start services (prometheus, containerd) on this machine.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	rm -f /usr/sbin/policy-rc.d
fi

log "go: modules"
go mod download
log "go: staticcheck"
make -s "$(go env GOPATH)/bin/staticcheck" >/dev/null

n=0
for v in "${K8S_COMPILED[@]}"; do
	n=$((n + 1))
	log "kubernetes $v ($n of ${#K8S_COMPILED[@]})"
	build/k8s/build.sh "$v" >/dev/null
done
for s in "${K8S_STAMPED[@]}"; do
	read -r v src comps <<<"$s"
	log "kubernetes $src stamped as $v${comps:+ ($comps)}"
	# shellcheck disable=SC2086 # comps: zero or more component names
	build/k8s/build.sh --stamp "$v" "$src" $comps >/dev/null
done
for v in "${ETCD_VERSIONS[@]}"; do
	log "etcd $v"
	build/k8s/etcd.sh "$v" >/dev/null
done
log "containerd $CONTAINERD_VERSION"
build/containerd/build.sh "$CONTAINERD_VERSION" >/dev/null
log "coredns $COREDNS_VERSION"
build/coredns/build.sh "$COREDNS_VERSION" >/dev/null
log "done in $(( $(date +%s) - t0 ))s"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
