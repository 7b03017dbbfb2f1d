#!/usr/bin/env bash
# Installs everything molt's tests need on a fresh Debian 12 machine, as
# root, idempotently. Heavy builds are cached under $MOLT_CACHE (default
# /var/cache/molt): the Kubernetes and etcd binaries built from Go modules
# (build/k8s) and, built by the tests themselves, the lab's Debian rootfs.
set -euo pipefail
cd "$(dirname "$0")/.."
export MOLT_CACHE=${MOLT_CACHE:-/var/cache/molt}
mkdir -p "$MOLT_CACHE"
log() { printf '[deps %(%H:%M:%S)T] %s\n' -1 "$*"; }
t0=$(date +%s)

[ "$(id -u)" = 0 ] || { echo "run as root: the tests boot systemd hosts, mount and make network namespaces"; exit 1; }
command -v go >/dev/null || { echo "Go 1.26 is required on PATH (/usr/local/go/bin)"; exit 1; }

# Debian packages: containerd and runc (agent tests, lab hosts), debootstrap
# and systemd-nspawn (hosts with a real systemd), iproute2 and the CNI
# plugins (lab network), prometheus for promtool (alert rule tests),
# vagrant and vagrant-libvirt (validating the Vagrantfile: without a
# provider plugin `vagrant validate` fails "No usable default provider"),
# curl (the demo).
APT_PACKAGES=(containerd runc debootstrap systemd-container iproute2 containernetworking-plugins prometheus vagrant vagrant-libvirt curl)
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

# Three releases: two a minor apart and a later patch of the newer, so the
# lab can take a minor upgrade (1.33.13 → 1.34.3) and then a patch upgrade
# (1.34.3 → 1.34.4). (1.34.5 is on the proxy, but its staging modules fail
# checksum-database lookups, so it does not build.)
log "kubernetes: etcd, v1.33.13, v1.34.3 and v1.34.4 from Go modules (cached; cold: ~9-11 min each on 2 idle cores)"
build/k8s/etcd.sh >/dev/null
for v in 1.33.13 1.34.3 1.34.4; do
	build/k8s/build.sh "$v" >/dev/null
done
log "done in $(( $(date +%s) - t0 ))s"
