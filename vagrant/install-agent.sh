#!/bin/sh
# install-agent.sh COORDINATORS CLUSTER NODE — install molt-agent on this
# VM, the way docs/install.md tells an operator to: systemd/install.sh
# (synced to /opt/molt/systemd) installs the release's package,
# bin/release/molt-agent_*.deb (make release; bin/ is synced to
# /opt/molt/bin), and starts molt-agent.service, pointed at the
# coordinator members' https URLs COORDINATORS (comma-separated), as node
# NODE of cluster CLUSTER. It enrolls with the bootstrap token and the
# cluster CA's pin (sha256:<hex>) that coord-1 published in
# /opt/molt/shared (agent.token, ca.pin; see install-coordinator.sh):
# bootstrap-token= and ca-pin= in /etc/molt/agent.env (0600). Once
# enrolled it talks to the coordinator with its own certificate (under
# /var/lib/molt-agent) and renews it itself. It waits for those files, as
# VMs may come up in parallel.
#
# The Vagrantfile runs it on every VM but the coordinators;
# vagrant/provision_nspawn_test.go runs it in a systemd-nspawn host with the
# same arguments.
set -eu
[ $# -eq 3 ] || { echo "usage: install-agent.sh COORDINATORS CLUSTER NODE" >&2; exit 2; }
coordinator=$1 cluster=$2 node=$3
shared=/opt/molt/shared

[ -d "$shared" ] || { echo "install-agent: $shared missing (the Vagrantfile's shared folder)" >&2; exit 1; }
# ca.pin is written last: once it is there, agent.token is too.
i=0
until [ -s "$shared/ca.pin" ]; do
	i=$((i + 1))
	[ $i -le 900 ] || { echo "install-agent: no $shared/ca.pin after 15 minutes: is coord-1 up?" >&2; exit 1; }
	sleep 1
done
token=$(cat "$shared/agent.token") ca_pin=$(cat "$shared/ca.pin")

set -- /opt/molt/bin/release/molt-agent_*.deb
[ $# -eq 1 ] && [ -f "$1" ] || { echo "install-agent: want one /opt/molt/bin/release/molt-agent_*.deb, have: $*; run 'make release' before 'vagrant up'" >&2; exit 1; }
sh /opt/molt/systemd/install.sh agent --package "$1" --start \
	coordinator="$coordinator" bootstrap-token="$token" ca-pin="$ca_pin" cluster="$cluster" node="$node"
