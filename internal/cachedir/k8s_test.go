package cachedir

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestK8sBin: a compiled release is read from k8s/vVERSION, a stamped one
// only from k8s/vSOURCE-as-vVERSION, so a cache that still holds an old
// compile of 1.34.4 (k8s/v1.34.4) is not read for it.
func TestK8sBin(t *testing.T) {
	require.Equal(t, "/c/k8s/v1.34.3/bin", K8sBin("/c", "1.34.3"))
	require.Equal(t, "/c/k8s/v1.33.13/bin", K8sBin("/c", "v1.33.13"))
	require.Equal(t, "/c/k8s/v1.34.3-as-v1.34.4/bin", K8sBin("/c", "1.34.4"))
	require.Equal(t, "/c/k8s/v1.34.3-as-v1.34.4/bin", K8sBin("/c", "v1.34.4"))
	require.Equal(t, "/c/k8s/v1.34.3-as-v1.34.5/bin", K8sBin("/c", "1.34.5"))
	require.Equal(t, "/c/k8s/v1.35.0/bin", K8sBin("/c", "1.35.0"), "a release outside the table is taken as compiled")

	require.Equal(t, "build/k8s/build.sh 1.34.3", K8sBuildOf("1.34.3").Command())
	require.Equal(t, "build/k8s/build.sh --stamp 1.34.4 1.34.3", K8sBuildOf("1.34.4").Command())
	require.Equal(t, "build/k8s/build.sh --stamp 1.34.5 1.34.3 kubelet", K8sBuildOf("1.34.5").Command())
}

// TestK8sBuildsMatchInstallDeps holds K8sBuilds and scripts/install-deps.sh
// (make deps) together: the script compiles exactly the table's compiled
// releases and stamps exactly its stamped ones, from a compiled source,
// and build.sh --stamp writes where Dir says.
func TestK8sBuildsMatchInstallDeps(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-deps.sh")
	require.NoError(t, err)
	array := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=\((.*)\)$`).FindSubmatch(script)
		require.NotNil(t, m, "install-deps.sh sets %s=(...)", name)
		return string(m[1])
	}
	compiled := strings.Fields(array("K8S_COMPILED"))
	var stamped []string
	for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(array("K8S_STAMPED"), -1) {
		stamped = append(stamped, m[1])
	}

	var wantCompiled, wantStamped []string
	for _, b := range K8sBuilds {
		if b.Stamped() {
			wantStamped = append(wantStamped, strings.Join(append([]string{b.Version, b.Source}, b.Components...), " "))
			src := K8sBuildOf(b.Source)
			require.True(t, slices.ContainsFunc(K8sBuilds, func(c K8sBuild) bool { return c.Version == b.Source }) && !src.Stamped() && len(src.Components) == 0,
				"%s is stamped from %s, which the table compiles whole", b.Version, b.Source)
			continue
		}
		require.Empty(t, b.Components, "%s: a compiled release has all components", b.Version)
		wantCompiled = append(wantCompiled, b.Version)
	}
	require.Equal(t, wantCompiled, compiled, "install-deps.sh K8S_COMPILED")
	require.Equal(t, wantStamped, stamped, "install-deps.sh K8S_STAMPED")

	build, err := os.ReadFile("../../build/k8s/build.sh")
	require.NoError(t, err)
	require.Contains(t, string(build), `root="$cache/k8s/v$version-as-v$stamp"`, "build.sh --stamp STAMP VERSION writes k8s/vVERSION-as-vSTAMP, K8sBuild.Dir")
}
