package statemachine

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// ArtifactPathPrefix starts the paths of artifacts the coordinator serves
// from its artifact directory.
const ArtifactPathPrefix = "/artifacts/"

// replayVersion keeps the log's history: entries written while
// phases.ParseVersion still trimmed spaces and let strconv accept signs
// (" 1.36.14", "1.+36.11") were applied then, with the version stored in
// its canonical form, and must apply the same way when replayed. It
// returns that canonical form for such text and s unchanged otherwise.
// The coordinator refuses such text before proposing, so only old entries
// ever need it.
func replayVersion(s string) string {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".")
	if len(parts) != 3 {
		return s
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return s
		}
		v, err := strconv.Atoi(p)
		if err != nil {
			return s
		}
		n[i] = v
	}
	return fmt.Sprintf("%d.%d.%d", n[0], n[1], n[2])
}

// ValidateRelease checks a catalog entry: a valid version and well-formed
// artifacts (absolute http(s) URLs or /artifacts/ paths on the coordinator,
// 64-hex-digit sha256) and add-ons with distinct names and non-empty
// manifests. Reachability and the
// checksums themselves are checked by preflight, on the hosts.
func ValidateRelease(r *api.Release) (phases.Version, error) {
	v, err := phases.ParseVersion(r.Version)
	if err != nil {
		return v, &RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: ErrInvalid}
	}
	arts := map[string]api.BinaryArtifact{"kubelet": r.Components.Kubelet, "containerd": r.Components.Containerd}
	for _, name := range []string{"kubelet", "containerd"} {
		a := arts[name]
		if a.URL == "" && a.SHA256 == "" {
			continue
		}
		if err := checkArtifact(a.URL, a.SHA256); err != nil {
			return v, &RuleError{Rule: "release-artifact", Detail: fmt.Sprintf("components.%s: %v", name, err), Err: ErrInvalid}
		}
	}
	for i, img := range r.Components.Images {
		if err := checkArtifact(img.URL, img.SHA256); err != nil {
			return v, &RuleError{Rule: "release-artifact", Detail: fmt.Sprintf("components.images[%d]: %v", i, err), Err: ErrInvalid}
		}
	}
	for name, image := range r.Components.StaticPods {
		if name == "" || image == "" {
			return v, &RuleError{Rule: "release-static-pods", Detail: "static pod names and images must be non-empty", Err: ErrInvalid}
		}
	}
	if a := r.Agent; a != nil {
		if _, ok := command.VersionBelow(a.Version, a.Version); !ok {
			return v, &RuleError{Rule: "release-agent", Detail: fmt.Sprintf("agent.version %q is not a molt version (X.Y.Z)", a.Version), Err: ErrInvalid}
		}
		if err := checkArtifact(a.URL, a.SHA256); err != nil {
			return v, &RuleError{Rule: "release-agent", Detail: fmt.Sprintf("agent: %v", err), Err: ErrInvalid}
		}
	}
	seen := map[string]bool{}
	for i, a := range r.Components.Addons {
		switch {
		case a.Name == "" || strings.TrimSpace(a.YAML) == "":
			return v, &RuleError{Rule: "release-addons", Detail: fmt.Sprintf("components.addons[%d]: name and yaml must be non-empty", i), Err: ErrInvalid}
		case seen[a.Name]:
			return v, &RuleError{Rule: "release-addons", Detail: fmt.Sprintf("components.addons[%d]: add-on %q listed twice", i, a.Name), Err: ErrInvalid}
		}
		seen[a.Name] = true
	}
	return v, nil
}

// AdmitRelease checks a catalog entry a request brings: ValidateRelease,
// and on top rules the state machine does not check again when an entry
// applies, so entries written before them replay as they applied then:
// a release ships at least one component (release-components), and a
// component's own version is a version (phases.CheckComponentVersion,
// version-invalid).
func AdmitRelease(r *api.Release) (phases.Version, error) {
	v, err := ValidateRelease(r)
	if err != nil {
		return v, err
	}
	c := r.Components
	if c.Kubelet == (api.BinaryArtifact{}) && c.Containerd == (api.BinaryArtifact{}) && len(c.StaticPods) == 0 && len(c.Images) == 0 && len(c.Addons) == 0 {
		return v, &RuleError{Rule: "release-components", Detail: "a release ships at least one component: kubelet, containerd, staticPods, images or addons", Err: ErrInvalid}
	}
	for _, a := range []struct {
		name string
		art  api.BinaryArtifact
	}{{"kubelet", c.Kubelet}, {"containerd", c.Containerd}} {
		if a.art.URL == "" && a.art.SHA256 == "" && a.art.Version != "" {
			return v, &RuleError{Rule: "release-artifact", Detail: fmt.Sprintf("components.%s: a version without a url and sha256", a.name), Err: ErrInvalid}
		}
		if a.art.Version == "" {
			continue
		}
		if err := phases.CheckComponentVersion(a.art.Version); err != nil {
			return v, &RuleError{Rule: phases.RuleInvalid, Detail: fmt.Sprintf("components.%s.version: %v", a.name, err), Err: ErrInvalid}
		}
	}
	return v, nil
}

func checkArtifact(u, sum string) error {
	p, err := url.Parse(u)
	// A path names a file the coordinator serves itself (its artifact
	// directory); each agent fetches it from the members it knows, so it
	// survives the loss of any one member.
	served := err == nil && p.Scheme == "" && p.Host == "" && strings.HasPrefix(p.Path, ArtifactPathPrefix) && !strings.Contains(p.Path, "..")
	if !served && (err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "") {
		return fmt.Errorf("url %q is neither an absolute http(s) URL nor a path under %s", u, ArtifactPathPrefix)
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
		return fmt.Errorf("sha256 %q is not 64 hex digits", sum)
	}
	return nil
}
