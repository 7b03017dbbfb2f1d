#!/bin/sh
# install-coordinator.sh NODE_ID IP FIRST_IP CLUSTER AGENTS — make this VM a
# molt coordinator member, the way docs/install.md tells an operator to:
# systemd/install.sh (synced to /opt/molt/systemd) installs the release's
# package, bin/release/molt-coordinator_*.deb (make release; bin/ is synced
# to /opt/molt/bin), and starts molt-coordinator.service, with its API (TLS
# only) on IP:7080, Raft (mutual TLS) on IP:7081, member ID NODE_ID, and
# NODE_ID in its certificate beside IP.
#
# The member at FIRST_IP (coord-1) bootstraps: it makes the cluster CA and
# an admin token in its data directory. Once its API answers, this script
# publishes in /opt/molt/shared (the folder every VM shares) what the
# others need, each file written whole and renamed into place:
#   ca.crt       the cluster CA certificate
#   admin.token  the admin API token (0600): members join with it
#   agent.token  a bootstrap token (0600) enrolling AGENTS agents of
#                CLUSTER for 24h (moltctl token create)
#   ca.pin       sha256:<hex> of the CA's public key; written last
# and gives root on this VM a moltctl configuration (~/.config/molt).
#
# Any other member waits for ca.pin (VMs may come up in parallel), then
# joins FIRST_IP:7080 with the pin and the admin token. The token reaches
# the unit, which runs as a dynamic user, as a systemd credential: a root
# copy in /etc/molt/coordinator-join.token, loaded by a drop-in and named
# by join-token-file.
#
# The Vagrantfile runs it on every coord-* VM; vagrant/provision_nspawn_test.go
# runs it in systemd-nspawn hosts with the same arguments.
set -eu
[ $# -eq 5 ] || { echo "usage: install-coordinator.sh NODE_ID IP FIRST_IP CLUSTER AGENTS" >&2; exit 2; }
node=$1 ip=$2 first=$3 cluster=$4 agents=$5
bin=/opt/molt/bin
shared=/opt/molt/shared
data=/var/lib/molt-coordinator
unit=molt-coordinator.service
umask 077

[ -x "$bin/moltctl" ] || { echo "install-coordinator: $bin/moltctl missing; run 'make build' before 'vagrant up'" >&2; exit 1; }
set -- "$bin"/release/molt-coordinator_*.deb
[ $# -eq 1 ] && [ -f "$1" ] || { echo "install-coordinator: want one $bin/release/molt-coordinator_*.deb, have: $*; run 'make release' before 'vagrant up'" >&2; exit 1; }
deb=$1
[ -d "$shared" ] || { echo "install-coordinator: $shared missing (the Vagrantfile's shared folder)" >&2; exit 1; }

# publish NAME MODE: stdin to $shared/NAME, whole or not at all.
publish() {
	cat >"$shared/.$1.new"
	chmod "$2" "$shared/.$1.new"
	mv -f "$shared/.$1.new" "$shared/$1"
}

# wait_for FILE: until it exists and is not empty, for up to 15 minutes.
wait_for() {
	i=0
	until [ -s "$1" ]; do
		i=$((i + 1))
		[ $i -le 900 ] || { echo "install-coordinator: no $1 after 15 minutes" >&2; exit 1; }
		sleep 1
	done
}

if [ "$ip" = "$first" ]; then
	# A stale pin from an earlier lab must not be read while this one
	# makes its CA.
	rm -f "$shared/ca.pin"
	sh /opt/molt/systemd/install.sh coordinator --package "$deb" --start \
		http-addr="$ip:7080" raft-addr="$ip:7081" node-id="$node" tls-san="$node"

	wait_for "$data/tls/ca.crt"
	wait_for "$data/admin.token"
	ctl() {
		"$bin/moltctl" --server "https://$ip:7080" --ca-file "$data/tls/ca.crt" --token-file "$data/admin.token" "$@"
	}
	i=0
	until ctl member list >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 120 ] || { ctl member list; echo "install-coordinator: the API on https://$ip:7080 never answered" >&2; exit 1; }
		sleep 1
	done
	pin=sha256:$(openssl x509 -pubkey -noout -in "$data/tls/ca.crt" | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)
	token=$(ctl token create --cluster "$cluster" --uses "$agents" --ttl 24h --description "vagrant lab agents" | head -n 1)
	[ -n "$token" ] || { echo "install-coordinator: moltctl token create printed no token" >&2; exit 1; }

	publish ca.crt 0644 <"$data/tls/ca.crt"
	publish admin.token 0600 <"$data/admin.token"
	printf '%s\n' "$token" | publish agent.token 0600
	printf '%s\n' "$pin" | publish ca.pin 0600

	install -d -m 0700 /root/.config/molt
	install -m 0644 "$data/tls/ca.crt" /root/.config/molt/ca.crt
	printf 'server: https://%s:7080\ncaFile: /root/.config/molt/ca.crt\ntokenFile: %s/admin.token\n' "$ip" "$data" \
		>/root/.config/molt/config.yaml
	echo "install-coordinator: $node bootstrapped cluster CA $pin; pin and tokens in $shared"
	exit 0
fi

wait_for "$shared/ca.pin"
pin=$(cat "$shared/ca.pin")
install -d -m 0755 /etc/molt "/etc/systemd/system/$unit.d"
install -m 0600 "$shared/admin.token" /etc/molt/coordinator-join.token
printf '# The join token (install-coordinator.sh), readable by the dynamic user as a credential.\n[Service]\nLoadCredential=join-token:/etc/molt/coordinator-join.token\n' \
	>"/etc/systemd/system/$unit.d/join-token.conf"
chmod 0644 "/etc/systemd/system/$unit.d/join-token.conf"
sh /opt/molt/systemd/install.sh coordinator --package "$deb" --start \
	http-addr="$ip:7080" raft-addr="$ip:7081" node-id="$node" tls-san="$node" \
	join="$first:7080" ca-pin="$pin" join-token-file="/run/credentials/$unit/join-token"
echo "install-coordinator: $node joining $first:7080 (CA $pin)"
