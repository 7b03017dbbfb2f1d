#!/bin/sh
# Install molt-agent into a root directory: binary, unit, config, enabled.
#
#   install.sh --binary PATH [--root DIR] [--start] [KEY=VALUE ...]
#
# KEY=VALUE pairs become /etc/molt/agent.env lines MOLT_AGENT_KEY=VALUE,
# e.g. coordinator=https://molt:7080 token=... cluster=prod node=host1.
# Keys are flag names (dashes become underscores, upper-cased).
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

while [ $# -gt 0 ]; do
	case "$1" in
	--root) root=$2; shift 2 ;;
	--binary) binary=$2; shift 2 ;;
	--start) start=yes; shift ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*=*)
		key=$(printf '%s' "${1%%=*}" | tr 'a-z-' 'A-Z_')
		env_lines="${env_lines}MOLT_AGENT_${key}=${1#*=}
"
		shift ;;
	*) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
done
[ -n "$binary" ] || { echo "install.sh: --binary is required" >&2; exit 2; }
[ -x "$binary" ] || { echo "install.sh: $binary is not an executable" >&2; exit 2; }

r=${root%/}
install -d -m 0755 "$r/usr/local/bin" "$r/etc/systemd/system/multi-user.target.wants" "$r/etc/molt"
# Copy then rename, so a running agent is never replaced by a partial file.
install -m 0755 "$binary" "$r/usr/local/bin/.molt-agent.new"
mv -f "$r/usr/local/bin/.molt-agent.new" "$r/usr/local/bin/molt-agent"
install -m 0644 "$here/molt-agent.service" "$r/etc/systemd/system/molt-agent.service"
# The env file holds the join token: root-only.
umask 077
printf '# molt-agent configuration (see docs/agent.md)\n%s' "$env_lines" > "$r/etc/molt/agent.env.new"
chmod 0600 "$r/etc/molt/agent.env.new"
mv -f "$r/etc/molt/agent.env.new" "$r/etc/molt/agent.env"
ln -sfn /etc/systemd/system/molt-agent.service "$r/etc/systemd/system/multi-user.target.wants/molt-agent.service"

if [ "$r" = "" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	if [ "$start" = yes ]; then
		systemctl restart molt-agent.service
	fi
fi
echo "molt-agent installed under ${root}"
