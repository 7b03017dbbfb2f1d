#!/usr/bin/env bash
# Installs everything molt's tests need on a fresh Debian machine, idempotently.
# Heavy builds are cached under $MOLT_CACHE (default /var/cache/molt).
set -euo pipefail
cd "$(dirname "$0")/.."
export MOLT_CACHE=${MOLT_CACHE:-/var/cache/molt}
mkdir -p "$MOLT_CACHE"
log() { printf '[deps %(%H:%M:%S)T] %s\n' -1 "$*"; }

command -v go >/dev/null || { echo "Go 1.26 is required on PATH (/usr/local/go/bin)"; exit 1; }

APT_PACKAGES=(containerd runc)
missing=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	log "apt: installing ${missing[*]}"
	# Packages must not start services on the build machine.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

log "go: module download"
go mod download
log "go: staticcheck"
make -s "$(go env GOPATH)/bin/staticcheck" >/dev/null
log "done"
