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

# Three releases: two a minor apart and a later patch of the newer, so the
# lab can take a minor upgrade (1.33.13 → 1.34.3) and then a patch upgrade
# (1.34.3 → 1.34.4). (1.34.5 is on the proxy, but its staging modules fail
# checksum-database lookups, so it does not build.)
K8S_RELEASES=(1.33.13 1.34.3 1.34.4)
# The e2e test's deliberately broken release (docs/e2e.md) needs a kubelet
# that reports a newer patch than the last release: the last release's
# kubelet linked again with its version stamped as this one (build.sh
# --stamp; a link, ~1 min, once the release's build is cached).
K8S_STAMPED=(1.34.4 1.34.5)
ETCD_VERSION=3.6.4
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
# etcd ~1.5, containerd ~1.5, CoreDNS ~3.5, each Kubernetes release ~6 (5.6 min for 1.33.13 with the
# cores to itself; 8-12 when they are shared; kube-proxy adds ~20 s to it).
todo=() minutes=0
[[ -x "$MOLT_BUILD_CACHE/etcd/v$ETCD_VERSION/bin/etcd" ]] || { todo+=("etcd $ETCD_VERSION"); minutes=$((minutes + 2)); }
[[ -x "$MOLT_BUILD_CACHE/containerd/v$CONTAINERD_VERSION/bin/containerd" ]] || { todo+=("containerd $CONTAINERD_VERSION"); minutes=$((minutes + 2)); }
[[ -x "$MOLT_BUILD_CACHE/coredns/v$COREDNS_VERSION/bin/coredns" ]] || { todo+=("coredns $COREDNS_VERSION"); minutes=$((minutes + 4)); }
for v in "${K8S_RELEASES[@]}"; do
	if [[ -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kubelet" && -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kube-apiserver" ]]; then
		[[ -x "$MOLT_BUILD_CACHE/k8s/v$v/bin/kube-proxy" ]] || { todo+=("kube-proxy $v"); minutes=$((minutes + 1)); }
		continue
	fi
	todo+=("kubernetes $v"); minutes=$((minutes + 6))
done
[[ -x "$MOLT_BUILD_CACHE/k8s/v${K8S_STAMPED[0]}-as-v${K8S_STAMPED[1]}/bin/kubelet" ]] || { todo+=("kubelet ${K8S_STAMPED[0]} stamped ${K8S_STAMPED[1]}"); minutes=$((minutes + 1)); }
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
for v in "${K8S_RELEASES[@]}"; do
	n=$((n + 1))
	log "kubernetes $v ($n of ${#K8S_RELEASES[@]})"
	build/k8s/build.sh "$v" >/dev/null
done
log "kubelet ${K8S_STAMPED[0]} stamped as ${K8S_STAMPED[1]}"
build/k8s/build.sh --stamp "${K8S_STAMPED[1]}" "${K8S_STAMPED[0]}" kubelet >/dev/null
log "etcd $ETCD_VERSION"
build/k8s/etcd.sh "$ETCD_VERSION" >/dev/null
log "containerd $CONTAINERD_VERSION"
build/containerd/build.sh "$CONTAINERD_VERSION" >/dev/null
log "coredns $COREDNS_VERSION"
build/coredns/build.sh "$COREDNS_VERSION" >/dev/null
log "done in $(( $(date +%s) - t0 ))s"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
