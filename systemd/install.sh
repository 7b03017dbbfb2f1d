#!/bin/sh
# Install a molt daemon into a root directory: binary, unit, config, enabled.
#
#   install.sh [agent|coordinator] --binary PATH [--root DIR] [--start] [KEY=VALUE ...]
#
# The component defaults to agent. KEY=VALUE pairs become lines of its
# environment file, /etc/molt/agent.env (MOLT_AGENT_KEY=VALUE) or
# /etc/molt/coordinator.env (MOLT_COORDINATOR_KEY=VALUE). Keys are the
# binary's flag names (dashes become underscores, upper-cased), e.g.
#   install.sh agent --binary molt-agent coordinator=https://m1:7080 bootstrap-token=... ca-pin=sha256:... cluster=prod node=host1
#   install.sh coordinator --binary molt-coordinator http-addr=10.0.0.5:7080 raft-addr=10.0.0.5:7081 join=10.0.0.4:7080
#
# Works on a rootfs or chroot without a running systemd: enabling is done
# by creating the multi-user.target.wants symlink, exactly as
# `systemctl enable` would. With --root / and systemd running, the
# manager is reloaded too; --start also starts (or restarts) the unit.
set -eu

root=/
binary=
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
	--start) start=yes; shift ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*=*)
		key=$(printf '%s' "${1%%=*}" | tr 'a-z-' 'A-Z_')
		env_lines="${env_lines}${prefix}${key}=${1#*=}
"
		shift ;;
	*) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
done
[ -n "$binary" ] || { echo "install.sh: --binary is required" >&2; exit 2; }
[ -x "$binary" ] || { echo "install.sh: $binary is not an executable" >&2; exit 2; }

r=${root%/}
install -d -m 0755 "$r/usr/local/bin" "$r/etc/systemd/system/multi-user.target.wants" "$r/etc/molt"
# Copy then rename, so a running daemon is never replaced by a partial file.
install -m 0755 "$binary" "$r/usr/local/bin/.$name.new"
mv -f "$r/usr/local/bin/.$name.new" "$r/usr/local/bin/$name"
install -m 0644 "$here/$name.service" "$r/etc/systemd/system/$name.service"
# The env file holds tokens (an agent's bootstrap token): root-only.
umask 077
printf '# %s configuration (see docs/install.md)\n%s' "$name" "$env_lines" > "$r/etc/molt/$component.env.new"
chmod 0600 "$r/etc/molt/$component.env.new"
mv -f "$r/etc/molt/$component.env.new" "$r/etc/molt/$component.env"
ln -sfn "/etc/systemd/system/$name.service" "$r/etc/systemd/system/multi-user.target.wants/$name.service"

if [ "$r" = "" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	if [ "$start" = yes ]; then
		systemctl restart "$name.service"
	fi
fi
echo "$name installed under ${root}"
