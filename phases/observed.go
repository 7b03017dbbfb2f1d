package phases

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Rules about what the hosts and the API server report, as opposed to what
// molt recorded. Stable names, like the version rules above.
const (
	// RuleKubeletSkew is the Kubernetes version-skew policy between a
	// kubelet and its API server: never newer, at most three minors older.
	RuleKubeletSkew = "kubelet-version-skew"
	// RuleVersionDrift names a node whose observed versions differ from
	// what molt recorded for it (upgraded by hand, reimaged, rolled back).
	RuleVersionDrift = "node-version-drift"
	// RuleObservedVersion refuses a registration whose stated version is
	// not what the cluster's nodes report.
	RuleObservedVersion = "cluster-version-observed"
)

// Sentinel errors of the rules above.
var (
	ErrKubeletSkew     = errors.New("kubelet outside the version-skew policy")
	ErrObservedVersion = errors.New("stated version differs from the observed one")
)

// MaxKubeletMinorsBehind is how many minors a kubelet may be older than
// its API server (Kubernetes' version-skew policy since 1.28).
const MaxKubeletMinorsBehind = 3

// CheckKubeletSkew applies the Kubernetes version-skew policy to a kubelet
// of node against its API server: a kubelet newer than the API server, or
// more than MaxKubeletMinorsBehind minors older, is refused.
func CheckKubeletSkew(apiServer Version, node string, kubelet Version) error {
	switch {
	case apiServer.IsZero() || kubelet.IsZero():
		return nil
	case apiServer.Less(kubelet) && !kubelet.SameMinor(apiServer):
		return ruleErr(RuleKubeletSkew, ErrKubeletSkew, "node %s runs kubelet %s, newer than its API server's %s", node, kubelet, apiServer)
	case apiServer.Minor-kubelet.Minor > MaxKubeletMinorsBehind:
		return ruleErr(RuleKubeletSkew, ErrKubeletSkew, "node %s runs kubelet %s, more than %d minors older than its API server's %s",
			node, kubelet, MaxKubeletMinorsBehind, apiServer)
	}
	return nil
}

// CheckKubeletsSkew applies CheckKubeletSkew to every node's kubelet
// (by node name), in node order, and returns every refusal joined.
func CheckKubeletsSkew(apiServer Version, kubelets map[string]Version) error {
	var errs []error
	for _, n := range sortedKeys(kubelets) {
		if err := CheckKubeletSkew(apiServer, n, kubelets[n]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Lowest returns the oldest of vs (zero versions ignored), or the zero
// version when there is none: a cluster runs what its oldest node runs.
func Lowest(vs []Version) Version {
	var low Version
	for _, v := range vs {
		if !v.IsZero() && (low.IsZero() || v.Less(low)) {
			low = v
		}
	}
	return low
}

// ParseKubelet parses a kubelet's version as the kubelet or the Node object
// reports it ("v1.34.4"); a build suffix ("v1.34.4+k3s1", "-gke.100") is
// dropped, since it names a distribution's build of that release. ok is
// false when s says no version.
func ParseKubelet(s string) (Version, bool) {
	if i := strings.IndexAny(s, "+-"); i >= 0 {
		s = s[:i]
	}
	v, err := ParseVersion(s)
	return v, err == nil
}

// Observed is what one node reports of itself, through its agent or its
// Node object; empty fields were not reported.
type Observed struct {
	Kubelet    string
	Containerd string
	// StaticPods is the image each static pod's running container was
	// created from, by pod name as the agent recorded it (the node's name
	// trimmed: "kube-apiserver", "etcd").
	StaticPods map[string]string
}

// Expected is what molt's record says one node runs: Kubelet any of the
// versions listed (two while an upgrade moves the node's pool: the one it
// leaves and the one it goes to), Containerd the release's containerd
// when the release names one.
type Expected struct {
	Kubelet    []Version
	Containerd []string
	// StaticPods lists, by component (a release's components.staticPods
	// key), the images the recorded releases name for it.
	StaticPods map[string][]string
}

// Drift says how a node's observed versions differ from the record, one
// sentence per component, or "" when they agree. What was not observed
// is not drift: a node whose agent has not reported yet is unknown, not
// wrong.
func Drift(want Expected, got Observed) string {
	var out []string
	if v, ok := ParseKubelet(got.Kubelet); ok && len(want.Kubelet) > 0 && !slices.Contains(want.Kubelet, v) {
		out = append(out, fmt.Sprintf("kubelet %s, recorded %s", v, joinVersions(want.Kubelet)))
	}
	if c := componentCore(got.Containerd); c != "" && len(want.Containerd) > 0 {
		match := false
		for _, w := range want.Containerd {
			if componentCore(w) == c {
				match = true
			}
		}
		if !match {
			out = append(out, fmt.Sprintf("containerd %s, recorded %s", strings.TrimPrefix(got.Containerd, "v"), strings.Join(want.Containerd, " or ")))
		}
	}
	for _, pod := range sortedKeys(got.StaticPods) {
		images, ok := want.StaticPods[StaticPodComponent(pod, want.StaticPods)]
		image := got.StaticPods[pod]
		if !ok || image == "" || slices.ContainsFunc(images, func(w string) bool { return SameImage(w, image) }) {
			continue
		}
		out = append(out, fmt.Sprintf("static pod %s runs %s, recorded %s", pod, image, strings.Join(images, " or ")))
	}
	return strings.Join(out, "; ")
}

// StaticPodComponent is the component of known (a release's
// components.staticPods keys) that pod is: the key itself, or the
// longest key that pod starts with followed by "-" (a static pod keeps
// its manifest's name, which may carry a suffix); "" for none.
func StaticPodComponent[V any](pod string, known map[string]V) string {
	if _, ok := known[pod]; ok {
		return pod
	}
	best := ""
	for k := range known {
		if strings.HasPrefix(pod, k+"-") && len(k) > len(best) {
			best = k
		}
	}
	return best
}

// SameImage says whether two image references name the same image as
// containerd names it: equal once Docker Hub's implicit registry and
// library path are spelled out ("pause:3.10" is
// "docker.io/library/pause:3.10").
func SameImage(a, b string) bool { return normalImage(a) == normalImage(b) }

func normalImage(ref string) string {
	ref = strings.TrimSpace(ref)
	first, _, found := strings.Cut(ref, "/")
	if !found || !strings.ContainsAny(first, ".:") && first != "localhost" {
		// No registry: Docker Hub, and its library for a one-part name.
		if !found {
			ref = "library/" + ref
		}
		ref = "docker.io/" + ref
	}
	return ref
}

// componentCore is a component version's MAJOR.MINOR.PATCH without "v" and
// without a suffix: a distribution's "1.7.27~ds1" runs release 1.7.27.
func componentCore(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+~"); i >= 0 {
		s = s[:i]
	}
	return s
}

func joinVersions(vs []Version) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, " or ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// CheckStatedVersion compares the version an operator states for a
// cluster with the kubelets its nodes report (by node name): the cluster
// runs the lowest of them, and a stated version that is not it is refused
// with every node's version in the detail. No observation passes: the
// stated version is then a claim that the first reports confirm or show
// as drift.
func CheckStatedVersion(stated Version, observed map[string]Version) error {
	var vs []Version
	for _, v := range observed {
		vs = append(vs, v)
	}
	low := Lowest(vs)
	if low.IsZero() || low == stated {
		return nil
	}
	var each []string
	for _, n := range sortedKeys(observed) {
		each = append(each, fmt.Sprintf("%s: %s", n, observed[n]))
	}
	return ruleErr(RuleObservedVersion, ErrObservedVersion, "stated %s, but the nodes run %s (%s); register it at %s, or ask to adopt the observed version",
		stated, low, strings.Join(each, ", "), low)
}
