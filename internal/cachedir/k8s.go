package cachedir

import (
	"path/filepath"
	"strings"
)

// K8sBuild is one Kubernetes release in the build cache: the version its
// binaries report, and the release whose sources build/k8s/build.sh
// compiled them from.
type K8sBuild struct {
	// Version is what the binaries report (--version, the Node's
	// kubeletVersion, the API server's /version).
	Version string
	// Source is the release compiled. When it is not Version, the binaries
	// are Source's linked again with Version's -X version flags
	// (build.sh --stamp Version Source): a link of seconds once Source is
	// compiled, instead of a compile of minutes.
	Source string
	// Components are the binaries built; empty means all five
	// (K8sComponents).
	Components []string
}

// Stamped says the build is another release's sources reporting Version.
func (b K8sBuild) Stamped() bool { return b.Source != b.Version }

// Dir is the build's directory under the build cache, relative to it:
// k8s/vVERSION for a release compiled from its own sources, and
// k8s/vSOURCE-as-vVERSION for a stamped one (where build.sh --stamp puts
// it). The stamped name differs from the compiled one on purpose: a
// machine that still has a real compile of Version from before it became
// stamped (k8s/vVERSION) is not read, so every lab and test on it runs
// the stamped binaries, never a mix of both.
func (b K8sBuild) Dir() string {
	if b.Stamped() {
		return filepath.Join("k8s", "v"+b.Source+"-as-v"+b.Version)
	}
	return filepath.Join("k8s", "v"+b.Version)
}

// Command is the build/k8s/build.sh command that makes the build.
func (b K8sBuild) Command() string {
	cmd := "build/k8s/build.sh " + b.Version
	if b.Stamped() {
		cmd = "build/k8s/build.sh --stamp " + b.Version + " " + b.Source
	}
	if len(b.Components) > 0 {
		cmd += " " + strings.Join(b.Components, " ")
	}
	return cmd
}

// K8sComponents are the binaries of a whole release.
var K8sComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// K8sBuilds are the Kubernetes releases the lab, the demo and the tests
// run, and how each is made; scripts/install-deps.sh (make deps) builds
// exactly these (TestK8sBuildsMatchInstallDeps holds the two together).
//
// Two releases are compiled, a minor apart, for the minor upgrade
// (1.33.13 → 1.34.3). The patch upgrade's target (1.34.4) is 1.34.3's
// sources stamped 1.34.4: what a patch upgrade by molt proves does not
// depend on the code between two patches but on every component's binary
// and image changing and on the versions the Nodes and the API server
// report changing, and a stamped build does both for seconds of linking
// instead of minutes of compiling (docs/e2e.md, "Releases"). 1.34.5 is
// only a kubelet, for the end-to-end test's deliberately broken release.
var K8sBuilds = []K8sBuild{
	{Version: "1.33.13", Source: "1.33.13"},
	{Version: "1.34.3", Source: "1.34.3"},
	{Version: "1.34.4", Source: "1.34.3"},
	{Version: "1.34.5", Source: "1.34.3", Components: []string{"kubelet"}},
}

// K8sBuildOf is version's entry of K8sBuilds ("v" prefix or not). A
// version outside the table is taken as compiled from its own sources
// (build/k8s/build.sh VERSION), so a lab at a release built by hand still
// finds it.
func K8sBuildOf(version string) K8sBuild {
	version = strings.TrimPrefix(version, "v")
	for _, b := range K8sBuilds {
		if b.Version == version {
			return b
		}
	}
	return K8sBuild{Version: version, Source: version}
}

// K8sBin is the directory holding version's Kubernetes binaries under the
// build cache buildCache.
func K8sBin(buildCache, version string) string {
	return filepath.Join(buildCache, K8sBuildOf(version).Dir(), "bin")
}
