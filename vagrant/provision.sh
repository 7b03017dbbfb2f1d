#!/usr/bin/env bash
# provision.sh NAME IP VERSION — turn a Debian 12 VM into a lab node.
#
# The same steps `molt-lab up` does inside an nspawn host (lab/host.go):
# containerd + CNI plugins from Debian, the host's rendered files
# (`molt-lab render`, synced to /opt/molt-lab), kubelet from the build
# cache (synced to /var/cache/molt), images imported without a registry,
# kubelet started as a systemd unit. Idempotent.
set -euo pipefail
name="$1"; ip="$2"; version="${3#v}"
lab=/opt/molt-lab
cache=/var/cache/molt

[[ -d "$lab/root" ]] || { echo "provision: $lab/root missing; run 'molt-lab render' before 'vagrant up'" >&2; exit 1; }
[[ -x "$cache/k8s/v$version/bin/kubelet" ]] || { echo "provision: kubelet v$version missing in $cache (build/k8s/build.sh $version)" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq containerd runc containernetworking-plugins >/dev/null

cp -a "$lab/root/." /
install -m 0755 "$cache/k8s/v$version/bin/kubelet" /usr/bin/kubelet
swapoff -a || true
systemctl restart containerd
for i in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
while read -r img; do
  [[ -n "$img" ]] || continue
  ctr -n k8s.io images import "$cache/lab/images/$img"
done <"$lab/images"
systemctl daemon-reload
systemctl enable --now kubelet.service
echo "provision: $name ($ip) kubelet v$version started"
