#!/bin/sh
# Install a molt daemon: binary, unit, config, enabled.
#
#   install.sh [agent|coordinator] --package FILE.deb [--start] [KEY=VALUE ...]
#   install.sh [agent|coordinator] --binary PATH [--root DIR] [--start] [KEY=VALUE ...]
#
# The component defaults to agent. --package installs the release's
# package (make release: molt-agent_VERSION_ARCH.deb) with dpkg on this
# host: binary in /usr/bin, unit in /lib/systemd/system (docs/release.md).
# --binary copies a binary built from the tree to /usr/local/bin and the
# unit beside this script to /etc/systemd/system: what the lab and the
# tests install. KEY=VALUE pairs become lines of the environment file,
# /etc/molt/agent.env (MOLT_AGENT_KEY=VALUE) or /etc/molt/coordinator.env
# (MOLT_COORDINATOR_KEY=VALUE), which they replace (with --package and
# none given, the file is left as it is). Keys are the binary's flag names
# (dashes become underscores, upper-cased), e.g.
#   install.sh agent --package molt-agent_0.2.0_amd64.deb coordinator=https://m1:7080 bootstrap-token=... ca-pin=sha256:... cluster=prod node=host1
#   install.sh coordinator --binary molt-coordinator http-addr=10.0.0.5:7080 raft-addr=10.0.0.5:7081 join=10.0.0.4:7080
#
# Either way the unit is enabled. --binary works on a rootfs or chroot
# without a running systemd (--root): enabling is done by creating the
# multi-user.target.wants symlink, exactly as `systemctl enable` would.
# With --root / and systemd running, the manager is reloaded too; --start
# also starts (or restarts) the unit.
set -eu

root=/
binary=
package=
start=no
here=$(cd "$(dirname "$0")" && pwd)
env_lines=
component=agent
case "${1:-}" in
agent|coordinator) component=$1; shift ;;
esac
case $component in
agent) prefix=MOLT_AGENT_ ;;
coordinator) prefix=MOLT_COORDINATOR_ ;;
esac
name=molt-$component

while [ $# -gt 0 ]; do
	case "$1" in
	--root) root=$2; shift 2 ;;
	--binary) binary=$2; shift 2 ;;
	--package) package=$2; shift 2 ;;
	--start) start=yes; shift ;;
	-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
	*=*)
		key=$(printf '%s' "${1%%=*}" | tr 'a-z-' 'A-Z_')
		env_lines="${env_lines}${prefix}${key}=${1#*=}
"
		shift ;;
	*) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
done
r=${root%/}
wants=$r/etc/systemd/system/multi-user.target.wants

# env_write: the KEY=VALUE lines as the environment file, root's alone
# (an agent's holds its bootstrap token), whole or not at all.
env_write() {
	install -d -m 0755 "$r/etc/molt"
	(
		umask 077
		printf '# %s configuration (see docs/install.md)\n%s' "$name" "$env_lines" >"$r/etc/molt/$component.env.new"
	)
	chmod 0600 "$r/etc/molt/$component.env.new"
	mv -f "$r/etc/molt/$component.env.new" "$r/etc/molt/$component.env"
}

# reload_start: with a running systemd on /, reload it and (--start) restart the unit.
reload_start() {
	if [ "$r" = "" ] && [ -d /run/systemd/system ]; then
		systemctl daemon-reload
		if [ "$start" = yes ]; then
			systemctl restart "$name.service"
		fi
	fi
}

if [ -n "$package" ]; then
	[ -z "$binary" ] || { echo "install.sh: --package or --binary, not both" >&2; exit 2; }
	[ -f "$package" ] || { echo "install.sh: $package is not a file" >&2; exit 2; }
	[ "$r" = "" ] || { echo "install.sh: --package installs on this host only (no --root): run it inside the host" >&2; exit 2; }
	# An earlier install.sh --binary's unit in /etc/systemd/system would
	# hide the package's and run the old binary: both go first.
	if grep -qs "^ExecStart=/usr/local/bin/$name\$" "/etc/systemd/system/$name.service"; then
		rm -f "/etc/systemd/system/$name.service" "$wants/$name.service" "/usr/local/bin/$name"
	fi
	# An environment file already there is kept as it is (the package's
	# is the commented template); the KEY=VALUE pairs are written after.
	dpkg --force-confdef --force-confold -i "$package"
	[ -z "$env_lines" ] || env_write
	systemctl enable "$name.service"
	reload_start
	echo "$name installed from $package"
	exit 0
fi

[ -n "$binary" ] || { echo "install.sh: --package or --binary is required" >&2; exit 2; }
[ -x "$binary" ] || { echo "install.sh: $binary is not an executable" >&2; exit 2; }

install -d -m 0755 "$r/usr/local/bin" "$wants" "$r/etc/molt"
# Copy then rename, so a running daemon is never replaced by a partial file.
install -m 0755 "$binary" "$r/usr/local/bin/.$name.new"
mv -f "$r/usr/local/bin/.$name.new" "$r/usr/local/bin/$name"
install -m 0644 "$here/$name.service" "$r/etc/systemd/system/$name.service"
env_write
ln -sfn "/etc/systemd/system/$name.service" "$wants/$name.service"
reload_start
echo "$name installed under ${root}"
