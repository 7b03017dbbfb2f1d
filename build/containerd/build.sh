#!/usr/bin/env bash
# build.sh [VERSION]
#
# Builds the containerd daemon (default v1.7.35, the 1.7 line) from the
# github.com/containerd/containerd Go module into
# ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}/containerd/vVERSION/bin/containerd
# and prints that directory on the last line of stdout. Skips work when the
# binary exists; concurrent runs serialise on a lock file.
#
# Why: the lab's hosts boot Debian's containerd 1.6.20. The lab's 1.34
# releases ship this newer daemon, so the minor upgrade really replaces
# containerd on every host (the runc shim and runc stay Debian's).
#
# Static, without cgo: the snapshotters that need C (btrfs) or kernel
# features the lab does not use (devmapper, zfs, aufs) are left out with
# containerd's own build tags; the lab uses overlayfs.
set -euo pipefail

# The steps every build script shares (cache paths, the lock, the Go
# environment, the progress line).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The whole script is one function, parsed before it runs: editing or
# replacing this file while a long build is running cannot derail it.
main() {

  version="${1:-1.7.35}"; version="${version#v}"
  [[ "$version" =~ ^1\.[0-9]+\.[0-9]+$ ]] || { echo "build.sh: containerd version must be 1.Y.Z (the v1 module), got $version" >&2; exit 2; }
  build_dirs containerd "$version"
  log() { echo "containerd/build.sh[v$version] $(date -u +%H:%M:%S) $*" >&2; }

  build_cached_or_lock quiet "" test -x "$bin/containerd"
  build_go_env
  # A scratch module: the v1 line is a different module from the v2 client
  # molt's agent links, so it is never a dependency of molt itself.
  if [[ ! -f "$mod/.tidy-ok" ]]; then
    rm -rf "$mod"; mkdir -p "$mod"
    printf 'module molt.local/containerdbuild\n\ngo 1.23.0\n\nrequire github.com/containerd/containerd v%s\n' "$version" >"$mod/go.mod"
    printf '//go:build tools\n\n// Package tools pins the containerd daemon command.\npackage tools\n\nimport _ "github.com/containerd/containerd/cmd/containerd"\n' >"$mod/tools.go"
    log "go mod tidy"
    (cd "$mod" && go mod tidy)
    touch "$mod/.tidy-ok"
  fi
  build_tmp
  log "go build github.com/containerd/containerd/cmd/containerd (cold: about 2 min on 2 idle cores)"
  start=$SECONDS
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs" \
    -ldflags "-s -w -X github.com/containerd/containerd/version.Version=$version" \
    -o "$tmp/containerd" github.com/containerd/containerd/cmd/containerd)
  mv -f "$tmp/containerd" "$bin/containerd"
  log "built in $((SECONDS - start))s: $("$bin/containerd" --version | sed -n 1p)"
  echo "$bin"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
