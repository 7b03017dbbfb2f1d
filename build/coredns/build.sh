#!/usr/bin/env bash
# build.sh [VERSION]
#
# Builds CoreDNS (default v1.15.0) from the Go module github.com/coredns/coredns
# into ${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}/coredns/vVERSION/bin/coredns
# and prints that bin directory on the last line of stdout. Skips work when
# the binary exists; concurrent runs serialise on a lock file. While it
# compiles, a line on stderr every 30 s says how far it is.
#
# Not CoreDNS's own main: that imports every plugin (cloud DNS providers,
# etcd, geoip, ...). A scratch module holds a main that imports only the
# plugins the lab's Corefile uses (lab/coredns.go) and sets
# dnsserver.Directives to them, in CoreDNS's execution order, so the build
# stays small.
set -euo pipefail

# The steps every build script shares (cache paths, the lock, the Go
# environment, the progress line).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# The whole script is one function, parsed before it runs: editing or
# replacing this file while a long build is running cannot derail it.
main() {

  version="${1:-1.15.0}"; version="${version#v}"
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "coredns build.sh: version must be X.Y.Z, got $version" >&2; exit 2; }
  # The plugins compiled in, in the order of CoreDNS's
  # core/dnsserver/zdirectives.go (the order they handle a query in).
  plugins=(reload ready health errors loadbalance cache kubernetes)

  build_dirs coredns "$version"
  log() { echo "coredns build.sh[v$version] $(date -u +%H:%M:%S) $*" >&2; }

  build_cached_or_lock announce "" test -x "$bin/coredns"
  build_go_env
  # .tidy-ok names the plugins main.go imported when go.sum was made.
  if [[ ! -f "$mod/go.sum" || "$(cat "$mod/.tidy-ok" 2>/dev/null)" != "${plugins[*]}" ]]; then
    rm -rf "$mod"; mkdir -p "$mod"
    printf 'module molt.local/corednsbuild\n\ngo %s\n\nrequire github.com/coredns/coredns v%s\n' \
      "$(build_go_minor)" "$version" >"$mod/go.mod"
    {
      echo "// Command coredns is CoreDNS with only the plugins molt's lab uses."
      echo "package main"
      echo
      echo "import ("
      echo "	\"github.com/coredns/coredns/core/dnsserver\""
      echo "	\"github.com/coredns/coredns/coremain\""
      echo
      for p in "${plugins[@]}"; do echo "	_ \"github.com/coredns/coredns/plugin/$p\""; done
      echo ")"
      echo
      echo "// directives are the compiled-in plugins in CoreDNS's execution order."
      printf 'var directives = []string{'
      sep=""
      for p in "${plugins[@]}"; do printf '%s"%s"' "$sep" "$p"; sep=", "; done
      echo "}"
      echo
      echo "func init() { dnsserver.Directives = directives }"
      echo
      echo "func main() { coremain.Run() }"
    } >"$mod/main.go"
    log "go mod tidy (github.com/coredns/coredns v$version and the modules its plugins ${plugins[*]} import)"
    (cd "$mod" && go mod tidy)
    echo "${plugins[*]}" >"$mod/.tidy-ok"
  fi

  build_tmp
  total=$(cd "$mod" && CGO_ENABLED=0 go list -deps . | wc -l)
  log "go build coredns: $total packages"
  start=$SECONDS
  build_with_progress "$total" "coredns build.sh" -trimpath -ldflags "-s -w" -o "$tmp/coredns" .
  mv -f "$tmp/coredns" "$bin/coredns"
  log "built in $((SECONDS - start))s"
  # sed, not head: head exits early and the binary dies of SIGPIPE under pipefail.
  "$bin/coredns" -version | sed -n 1p >&2
  echo "plugins registered: $("$bin/coredns" -plugins | tr -s ' \n' ' ')" >&2
  echo "$bin"
}

main "$@"; exit $?  # on the same line: bash must not read on after main returns
