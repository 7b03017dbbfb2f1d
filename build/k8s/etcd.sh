#!/usr/bin/env bash
# etcd.sh [VERSION]
#
# Builds etcd (default v3.6.4) from go.etcd.io/etcd/server/v3 into
# ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}/etcd/vVERSION/bin/etcd and prints the bin
# directory on the last line of stdout. Skips work when the binary exists.
# kube-apiserver 1.34 needs etcd 3.6 (RequestWatchProgress); Debian's 3.4
# starts but makes watches slow and flaky.
set -euo pipefail

# The steps every build script shares (cache paths, the lock, the Go
# environment, the progress line).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The whole script is one function, parsed before it runs: editing or
# replacing this file while a long build is running cannot derail it.
main() {

  version="${1:-3.6.4}"; version="${version#v}"
  build_dirs etcd "$version"
  log() { echo "etcd.sh[v$version] $(date -u +%H:%M:%S) $*" >&2; }

  build_cached_or_lock quiet "" test -x "$bin/etcd"
  build_go_env
  # go install pkg@version refuses etcd/server: its go.mod replaces the sibling
  # etcd modules with ../ paths. A scratch module ignores those replaces and
  # takes the versions server's go.mod requires (all the same release).
  if [[ ! -f "$mod/.tidy-ok" ]]; then
    rm -rf "$mod"; mkdir -p "$mod"
    printf 'module molt.local/etcdbuild\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$version" >"$mod/go.mod"
    printf '//go:build tools\n\n// Package tools pins the etcd server command.\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$mod/tools.go"
    log "go mod tidy"
    (cd "$mod" && go mod tidy)
    touch "$mod/.tidy-ok"
  fi
  build_tmp
  log "go build go.etcd.io/etcd/server/v3"
  start=$SECONDS
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  mv -f "$tmp/etcd" "$bin/etcd"
  log "built in $((SECONDS - start))s"
  # sed, not head: head exits early and etcd dies of SIGPIPE under pipefail.
  "$bin/etcd" --version | sed -n 1p >&2
  echo "$bin"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
