#!/bin/sh
# install-agent.sh COORDINATOR TOKEN CLUSTER NODE — install molt-agent on
# this VM, the way docs/install.md tells an operator to: systemd/install.sh
# (synced to /opt/molt/systemd) installs bin/molt-agent (synced to
# /opt/molt/bin) as molt-agent.service and starts it, pointed at the
# coordinator URL(s) COORDINATOR with the join token, as node NODE of
# cluster CLUSTER.
#
# The Vagrantfile runs it on every VM but the coordinators;
# vagrant/provision_nspawn_test.go runs it in a systemd-nspawn host with the
# same arguments.
set -eu
[ $# -eq 4 ] || { echo "usage: install-agent.sh COORDINATOR TOKEN CLUSTER NODE" >&2; exit 2; }
coordinator=$1 token=$2 cluster=$3 node=$4

sh /opt/molt/systemd/install.sh agent --binary /opt/molt/bin/molt-agent --start \
	coordinator="$coordinator" token="$token" cluster="$cluster" node="$node"
