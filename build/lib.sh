# build/lib.sh: the steps molt's build scripts share (build/k8s/build.sh,
# build/k8s/etcd.sh, build/containerd/build.sh, build/coredns/build.sh).
# Each script sources it before its main runs; bash reads a sourced file
# whole before running it, so editing this file while a long build runs
# cannot derail the build either. The functions read and set the calling
# script's variables: root, bin, mod, tmp, start, and call its log.

# build_dirs NAME VERSION sets cache (MOLT_BUILD_CACHE, else MOLT_CACHE,
# else /var/cache/molt), root ($cache/NAME/vVERSION), bin ($root/bin) and
# mod ($root/src, the scratch module the build resolves in).
build_dirs() {
  cache="${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}"
  root="$cache/$1/v$2"
  bin="$root/bin"
  mod="$root/src"
}

# build_cached_or_lock ANNOUNCE SUFFIX CHECK [ARG...]: when CHECK holds (the
# binaries are there) logs "cached" and SUFFIX, prints $bin and exits 0.
# Otherwise takes $root/.lock on fd 9 (logging the wait when ANNOUNCE is
# "announce"), so concurrent runs build once, and checks again.
build_cached_or_lock() {
  local announce="$1" suffix="$2"
  shift 2
  if "$@"; then log "cached$suffix"; echo "$bin"; exit 0; fi
  mkdir -p "$root" "$bin"
  exec 9>"$root/.lock"
  if [[ "$announce" == announce ]]; then log "waiting for build lock $root/.lock"; fi
  flock 9
  if "$@"; then log "cached (built by a concurrent run)$suffix"; echo "$bin"; exit 0; fi
}

# build_go_env: module mode, the local toolchain, no workspace.
build_go_env() {
  export GOWORK=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=mod"
}

# build_go_minor prints the Go release the scratch module declares: the
# local toolchain's X.Y.0.
build_go_minor() {
  echo "$(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/').0"
}

# build_tmp sets tmp, the directory the build writes to before its
# binaries move into $bin, and removes it (and $tmp.progress) on exit.
build_tmp() {
  tmp="$root/.out.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  trap 'rm -rf "$tmp" "$tmp.progress"' EXIT
}

# wait_or_tick PID SECONDS: true once PID has exited, false after SECONDS
# while it still runs.
wait_or_tick() {
  local i
  for ((i = 0; i < $2; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 1
  done
  ! kill -0 "$1" 2>/dev/null
}

# build_with_progress TOTAL WHO GO_BUILD_ARG...: runs `go build -v
# GO_BUILD_ARG...` without cgo in $mod, logging every 30 s how many of at
# most TOTAL packages it compiled (since $start); -v names each package as
# it is compiled, not those the build cache already has. On failure it
# prints the compiler's errors and exits 1 ("WHO: go build failed").
build_with_progress() {
  local total="$1" who="$2" builder
  shift 2
  (cd "$mod" && CGO_ENABLED=0 go build -v "$@") 2>"$tmp.progress" &
  builder=$!
  while ! wait_or_tick "$builder" 30; do
    log "compiling: $(grep -vc '^#\|: ' "$tmp.progress" || true) of at most $total packages, $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
  done
  if ! wait "$builder"; then
    grep -v '^[a-zA-Z0-9_./-]*$' "$tmp.progress" >&2 || true
    rm -f "$tmp.progress"
    echo "$who: go build failed" >&2; exit 1
  fi
  rm -f "$tmp.progress"
}
