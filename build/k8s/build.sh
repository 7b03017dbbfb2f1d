#!/usr/bin/env bash
# build.sh [--stamp STAMP] VERSION [COMPONENTS...]
#
# Builds real Kubernetes binaries from the Go module proxy (no git, no
# kubernetes checkout) into ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}/k8s/vVERSION/bin/
# and prints that directory on the last line of stdout. While it compiles,
# a line on stderr every 30 s says how far it is (packages compiled of the
# packages the commands need).
#
# COMPONENTS default to kube-apiserver kube-controller-manager kube-scheduler
# kubelet kube-proxy. Work is skipped when every requested binary already exists, so
# callers (kubetest, the lab, e2e) may run this unconditionally. Concurrent
# runs for the same version serialise on a lock file.
#
# --stamp STAMP builds VERSION's sources but stamps them as version STAMP
# (the -X version flags), into .../k8s/vVERSION-as-vSTAMP/bin/: binaries
# that report a release nobody compiled — the patch upgrade's target 1.34.4
# and the e2e test's deliberately broken release 1.34.5 are 1.34.3 stamped
# (internal/cachedir/k8s.go, docs/e2e.md). With VERSION's build cached this
# is a link, not a compile (15 s for all five).
#
# Why a scratch module: k8s.io/kubernetes pins its staging modules
# (k8s.io/api, k8s.io/client-go, ...) to v0.0.0 and resolves them with
# filesystem replaces that do not apply to a dependency. The scratch module
# repeats those replaces pointing at the published v0.MINOR.PATCH, and a
# tools.go blank-imports every cmd package so `go mod tidy` records all
# go.sum entries (kube-controller-manager otherwise misses k8s.io/metrics).
set -euo pipefail

# The steps every build script shares (cache paths, the lock, the Go
# environment, the progress line).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The whole script is one function, parsed before it runs: editing or
# replacing this file while a long build is running cannot derail it.
main() {

  usage() { echo "usage: $0 [--stamp X.Y.Z] VERSION [kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy ...]" >&2; exit 2; }
  [[ $# -ge 1 ]] || usage
  stamp=""
  if [[ "$1" == --stamp ]]; then
    [[ $# -ge 3 ]] || usage
    stamp="${2#v}"; shift 2
    [[ "$stamp" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build.sh: --stamp must be X.Y.Z, got $stamp" >&2; exit 2; }
  fi

  version="${1#v}"; shift
  [[ "$version" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || { echo "build.sh: version must be X.Y.Z, got $version" >&2; exit 2; }
  major="${BASH_REMATCH[1]}"; minor="${BASH_REMATCH[2]}"; patch="${BASH_REMATCH[3]}"
  staging="v0.${minor}.${patch}"
  label="$version"
  if [[ -n "$stamp" ]]; then
    [[ "$stamp" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]
    label="$stamp"; major="${BASH_REMATCH[1]}"; minor="${BASH_REMATCH[2]}"
  fi

  all=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
  if [[ $# -eq 0 ]]; then comps=("${all[@]}"); else comps=("$@"); fi
  for c in "${comps[@]}"; do
    case "$c" in kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy) ;; *) echo "build.sh: unknown component $c" >&2; usage ;; esac
  done

  build_dirs k8s "$version"
  # A stamped build resolves in VERSION's module, into a root of its own.
  if [[ -n "$stamp" ]]; then root="$cache/k8s/v$version-as-v$stamp"; bin="$root/bin"; fi
  log() { echo "build.sh[v$version${stamp:+ as v$stamp}] $(date -u +%H:%M:%S) $*" >&2; }

  have_all() {
    local c
    for c in "${comps[@]}"; do [[ -x "$bin/$c" ]] || return 1; done
  }

  build_cached_or_lock announce ": ${comps[*]}" have_all
  build_go_env

  # .tidy-ok names the commands tools.go imported when go.sum was made: a
  # module tidied for fewer commands (before kube-proxy was added) is made
  # again, so go.sum has every entry the new command needs.
  if [[ ! -f "$mod/go.sum" || "$(cat "$mod/.tidy-ok" 2>/dev/null)" != "${all[*]}" ]]; then
    log "resolving k8s.io/kubernetes v$version from the module proxy"
    rm -rf "$mod"; mkdir -p "$mod"
    gomod="$(cd "$mod" && go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -f "$gomod" ]] || { echo "build.sh: could not download k8s.io/kubernetes@v$version" >&2; exit 1; }
    # Every k8s.io module that kubernetes' go.mod replaces with ./staging/...
    mapfile -t stage < <(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9./-]*\) => \./staging/.*#\1#p' "$gomod" | sort -u)
    [[ ${#stage[@]} -gt 0 ]] || { echo "build.sh: no staging replaces found in $gomod" >&2; exit 1; }
    log "${#stage[@]} staging modules -> $staging"
    {
      echo "module molt.local/k8sbuild"
      echo
      echo "go $(build_go_minor)"
      echo
      echo "require k8s.io/kubernetes v$version"
      echo
      echo "replace ("
      for m in "${stage[@]}"; do echo "	$m => $m $staging"; done
      echo ")"
    } >"$mod/go.mod"
    {
      echo "//go:build tools"
      echo
      echo "// Package tools pins the Kubernetes commands this module builds."
      echo "package tools"
      echo
      echo "import ("
      for c in "${all[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
      echo ")"
    } >"$mod/tools.go"
    log "go mod tidy (downloads ~550 MB on a cold module cache)"
    (cd "$mod" && go mod tidy)
    echo "${all[*]}" >"$mod/.tidy-ok"
  fi

  pkgs=()
  for c in "${comps[@]}"; do [[ -x "$bin/$c" ]] || pkgs+=("k8s.io/kubernetes/cmd/$c"); done

  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$label -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done

  build_tmp
  total=$(cd "$mod" && CGO_ENABLED=0 go list -deps "${pkgs[@]}" | wc -l)
  cost="cold: 6-7 min on 2 idle cores, far longer when shared; ~2 GB RSS"
  [[ -z "$stamp" ]] || cost="a link, 15-40 s, when v$version was compiled before and is in the Go build cache; else $cost"
  log "go build ${pkgs[*]##*/}: $total packages ($cost)"
  start=$SECONDS
  build_with_progress "$total" build.sh -trimpath -ldflags "$ld" -o "$tmp/" "${pkgs[@]}"
  for f in "$tmp"/*; do mv -f "$f" "$bin/"; done
  log "built ${pkgs[*]} in $((SECONDS - start))s"
  have_all || { echo "build.sh: binaries missing after build" >&2; exit 1; }
  echo "$bin"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
