#!/usr/bin/env bash
# kwok.sh [VERSION]
#
# Builds kwok (default v0.7.0), the fake kubelet that drives Nodes and Pods
# at scale against a real kube-apiserver, into
# ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}/kwok/vVERSION/bin/kwok and prints the bin
# directory on the last line of stdout. Skips work when the binary exists.
# kwok runs as its own process (the drain measurement, make perf-kwok): it
# is built apart from molt's module so its Kubernetes pins never meet ours.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

main() {

  version="${1:-0.7.0}"; version="${version#v}"
  build_dirs kwok "$version"
  log() { echo "kwok.sh[v$version] $(date -u +%H:%M:%S) $*" >&2; }

  build_cached_or_lock quiet "" test -x "$bin/kwok"
  build_go_env
  build_tmp
  log "go install sigs.k8s.io/kwok/cmd/kwok@v$version"
  start=$SECONDS
  # go install pkg@version builds in kwok's own module graph, outside ours.
  (cd "$tmp" && GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$version")
  mv -f "$tmp/kwok" "$bin/kwok"
  log "built in $((SECONDS - start))s"
  echo "$bin"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
