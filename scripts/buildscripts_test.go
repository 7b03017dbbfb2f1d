package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stubGo stands in for go in the build scripts' tests: it logs each call
// with the environment the scripts set and makes the files they expect,
// so a test runs the scripts' own steps (cache paths, lock, scratch
// module, progress, move into bin) in a second.
const stubGo = `#!/usr/bin/env bash
echo "go $* | GOWORK=$GOWORK GOTOOLCHAIN=$GOTOOLCHAIN GOFLAGS=$GOFLAGS CGO_ENABLED=${CGO_ENABLED:-}" >>"$STUBLOG"
case "$1 $2" in
  "env GOVERSION") echo go1.26.6 ;;
  "mod tidy") echo sum >go.sum ;;
  "mod download")
    f="$STUBLOG.mod"
    printf 'module k8s.io/kubernetes\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n' >"$f"
    printf '{\n\t"GoMod": "%s",\n}\n' "$f" ;;
  "list -deps") printf 'a\nb\n' ;;
  build*)
    out=""; pkgs=()
    shift
    while [[ $# -gt 0 ]]; do
      case "$1" in -o) out="$2"; shift 2 ;; -ldflags|-tags) shift 2 ;; -*) shift ;; *) pkgs+=("$1"); shift ;; esac
    done
    mk() { printf '#!/bin/sh\necho "%s version 0.0.0"\n' "${1##*/}" >"$1"; chmod +x "$1"; }
    if [[ "$out" == */ ]]; then for p in "${pkgs[@]}"; do mk "$out${p##*/}"; done; else mk "$out"; fi ;;
  *) echo "stub go: $*" >&2; exit 1 ;;
esac
`

// TestBuildScriptsShareTheirSteps runs every build script (they source
// build/lib.sh) from a directory other than the checkout's, against stubGo:
// each builds into MOLT_BUILD_CACHE/NAME/vVERSION/bin, prints that
// directory last, leaves no temporary directory, runs go in module mode
// with the local toolchain and no cgo, and a second run finds the binaries
// cached without calling go build.
func TestBuildScriptsShareTheirSteps(t *testing.T) {
	stub := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(stub, "go"), []byte(stubGo), 0o755))
	build, err := filepath.Abs("../build")
	require.NoError(t, err)

	for _, tc := range []struct {
		script string
		args   []string
		dir    string // below the cache
		bins   []string
	}{
		{"k8s/etcd.sh", nil, "etcd/v3.6.4", []string{"etcd"}},
		{"containerd/build.sh", nil, "containerd/v1.7.35", []string{"containerd"}},
		{"coredns/build.sh", nil, "coredns/v1.15.0", []string{"coredns"}},
		{"k8s/build.sh", []string{"1.34.3", "kubelet", "kube-proxy"}, "k8s/v1.34.3", []string{"kubelet", "kube-proxy"}},
		{"k8s/build.sh", []string{"--stamp", "1.34.4", "1.34.3", "kubelet"}, "k8s/v1.34.3-as-v1.34.4", []string{"kubelet"}},
	} {
		t.Run(tc.script+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			cache := t.TempDir()
			goLog := filepath.Join(t.TempDir(), "go.log")
			run := func() (string, string) {
				cmd := exec.Command(filepath.Join(build, tc.script), tc.args...)
				cmd.Dir = t.TempDir()
				cmd.Env = append(os.Environ(), "PATH="+stub+":"+os.Getenv("PATH"), "STUBLOG="+goLog,
					"MOLT_BUILD_CACHE="+cache, "GOFLAGS=")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				require.NoError(t, err, "stderr: %s", stderr.String())
				return string(out), stderr.String()
			}

			out, _ := run()
			bin := filepath.Join(cache, tc.dir, "bin")
			require.Equal(t, bin, lastLine(out))
			for _, b := range tc.bins {
				require.FileExists(t, filepath.Join(bin, b))
			}
			leftovers, err := filepath.Glob(filepath.Join(cache, tc.dir, ".out.*"))
			require.NoError(t, err)
			require.Empty(t, leftovers, "the temporary build directory is removed")
			calls, err := os.ReadFile(goLog)
			require.NoError(t, err)
			for _, c := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
				require.Contains(t, c, "GOWORK=off GOTOOLCHAIN=local GOFLAGS= -mod=mod", c)
				if strings.HasPrefix(c, "go build") {
					require.Contains(t, c, "CGO_ENABLED=0", c)
				}
			}
			require.Contains(t, string(calls), "go build")

			out, stderr := run()
			require.Equal(t, bin, lastLine(out))
			require.Contains(t, stderr, "cached")
			again, err := os.ReadFile(goLog)
			require.NoError(t, err)
			require.Equal(t, string(calls), string(again), "a cached build calls no go")
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
