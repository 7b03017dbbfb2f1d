#!/usr/bin/env bash
# provision.sh NAME IP VERSION — turn a Debian 12 VM into a lab node.
#
# The same node `molt-lab up` makes of an nspawn host (lab/host.go):
# containerd, runc and the CNI plugins from Debian, the host's rendered
# files (`molt-lab render`, synced to /opt/molt-lab), the kernel settings
# the kubelet checks, the kubelet of VERSION from the build cache (synced to
# /var/cache/molt/k8s/vVERSION/bin), the host's images imported without a
# registry (synced to /var/cache/molt/lab/images), kubelet started as a
# systemd unit. Idempotent: a second run leaves the same node and downloads
# nothing (apt runs only for a package that is not installed).
#
# What an nspawn host needs on top of this — writable cgroup controllers,
# containerd's state on a tmpfs, /dev/kmsg, private copies of the /proc/sys
# files below — a VM has; vagrant/provision_nspawn_test.go prepares its
# host that way before it runs this script, as lab/host.go prepareHost does.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: provision.sh NAME IP VERSION" >&2; exit 2; }
name="$1"; ip="$2"; version="${3#v}"
lab=/opt/molt-lab
cache=/var/cache/molt
kubelet="$cache/k8s/v$version/bin/kubelet"

[[ -d "$lab/root" ]] || { echo "provision: $lab/root missing; run 'molt-lab render' before 'vagrant up'" >&2; exit 1; }
[[ -x "$kubelet" ]] || { echo "provision: $kubelet missing (build/k8s/build.sh $version)" >&2; exit 1; }

missing=()
for p in containerd runc containernetworking-plugins; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "provision: apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Root owns what it installs, whoever owns the synced copy.
cp -a --no-preserve=ownership "$lab/root/." /

# The kubelet config sets protectKernelDefaults: the kubelet refuses to
# start unless the kernel already has these values (kubelet's
# setupKernelTunables; lab/host.go kernelTunables is the same list). Kept
# across reboots by systemd-sysctl; applied now, and checked, because
# systemd-sysctl says nothing when the kernel refuses a value.
sysctl_conf=/etc/sysctl.d/90-molt-kubelet.conf
cat >"$sysctl_conf" <<'EOF'
vm.overcommit_memory = 1
vm.panic_on_oom = 0
kernel.panic = 10
kernel.panic_on_oops = 1
kernel.keys.root_maxkeys = 1000000
kernel.keys.root_maxbytes = 25000000
EOF
/lib/systemd/systemd-sysctl "$sysctl_conf"
while IFS=' =' read -r key want; do
	got=$(<"/proc/sys/${key//.//}")
	[[ "$got" == "$want" ]] || { echo "provision: kernel setting $key is $got, the kubelet needs $want" >&2; exit 1; }
done <"$sysctl_conf"

# Replaced by rename: the old binary may be running.
install -m 0755 "$kubelet" /usr/bin/.kubelet.new
mv -f /usr/bin/.kubelet.new /usr/bin/kubelet
swapoff -a || true

systemctl enable --quiet containerd
systemctl restart containerd
for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
while read -r img; do
	[[ -n "$img" ]] || continue
	ctr -n k8s.io images import "$cache/lab/images/$img"
done <"$lab/images"

systemctl daemon-reload
systemctl enable --quiet kubelet.service
systemctl restart kubelet.service
echo "provision: $name ($ip) kubelet v$version started"
