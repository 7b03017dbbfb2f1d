#!/bin/sh
# install-coordinator.sh NODE_ID IP TOKEN — make this VM a molt coordinator
# member, the way docs/install.md tells an operator to: systemd/install.sh
# (synced to /opt/molt/systemd) installs bin/molt-coordinator (synced to
# /opt/molt/bin) as molt-coordinator.service and starts it, with its API on
# IP:7080, Raft on IP:7081, member ID NODE_ID and the agents' join token.
#
# The Vagrantfile runs it on every coord-* VM; vagrant/provision_nspawn_test.go
# runs it in a systemd-nspawn host with the same arguments.
set -eu
[ $# -eq 3 ] || { echo "usage: install-coordinator.sh NODE_ID IP TOKEN" >&2; exit 2; }
node=$1 ip=$2 token=$3

sh /opt/molt/systemd/install.sh coordinator --binary /opt/molt/bin/molt-coordinator --start \
	http-addr="$ip:7080" raft-addr="$ip:7081" node-id="$node" agent-token="$token"
