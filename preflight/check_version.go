package preflight

import (
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/moltproject/molt/phases"
)

// checkVersionRules applies SPEC §3 rules 1–3 (phases.CheckUpgrade) and
// the admin/user skew of rule 4: an admin or hybrid cluster against the
// user clusters it manages, a user cluster against its admin. The message
// names the refusing rule, and Data["rule"] carries it for clients.
//
// When the Nodes were read, the rules also hold for what the kubelets
// report (observedRules): the upgrade from the lowest observed kubelet,
// and the Kubernetes version-skew policy of every kubelet against the API
// server once it runs the target.
func checkVersionRules(in Input) Result {
	switch {
	case in.Current.IsZero():
		return missing("the cluster's current version is unknown")
	case in.Target.IsZero():
		return missing("no target version was given")
	}
	err := phases.CheckUpgrade(in.Current, in.Target)
	if err == nil {
		switch in.Cluster.Kind {
		case phases.KindAdmin, phases.KindHybrid:
			err = phases.CheckAdminUpgrade(in.Current, in.Target, in.UserClusters)
		case phases.KindUser:
			if in.AdminVersion.IsZero() {
				return missing(fmt.Sprintf("the version of admin cluster %q is unknown, so the admin/user skew rule cannot be checked", in.Cluster.AdminCluster))
			}
			err = phases.CheckUserUpgrade(in.Target, in.AdminVersion)
		}
	}
	if err == nil {
		err = observedRules(in)
	}
	data := map[string]string{"current": in.Current.String(), "target": in.Target.String()}
	if err != nil {
		rule := phases.RuleOf(err)
		data["rule"] = rule
		return fail(fmt.Sprintf("rule %s: %v", rule, err), data)
	}
	return pass(fmt.Sprintf("%s → %s obeys the version and skew rules", in.Current, in.Target), data)
}

// observedRules applies the version rules to the kubelets the Node
// objects report, when they were read: a cluster recorded at one version
// whose nodes run an older one would otherwise pass a skipped minor.
func observedRules(in Input) error {
	if in.gap(SourceNodes) != "" {
		return nil
	}
	kubelets := map[string]phases.Version{}
	var vs []phases.Version
	for _, n := range NodeNames(in.Cluster) {
		if v, ok := phases.ParseKubelet(in.Nodes[n].KubeletVersion); ok {
			kubelets[n] = v
			vs = append(vs, v)
		}
	}
	if low := phases.Lowest(vs); !low.IsZero() && low != in.Current {
		if err := phases.CheckUpgrade(low, in.Target); err != nil && phases.RuleOf(err) != phases.RuleSame {
			return err
		}
	}
	// Against the target only: the API servers run it once the control
	// plane moved, and a node a failed upgrade left at the target is not
	// newer than its API server then.
	return phases.CheckKubeletsSkew(in.Target, kubelets)
}

// checkReleaseInCatalog requires the target's catalog entry with complete
// artifacts: an entry without a kubelet URL or with a malformed sum would
// only fail later, on a host, in the middle of the upgrade.
func checkReleaseInCatalog(in Input) Result {
	if in.Target.IsZero() {
		return missing("no target version was given")
	}
	r := in.Release
	if r == nil {
		return fail(fmt.Sprintf("version %s is not in the release catalog", in.Target), nil)
	}
	if v, err := phases.ParseVersion(r.Version); err != nil || v != in.Target {
		return fail(fmt.Sprintf("the catalog entry given is for %q, not %s", r.Version, in.Target), nil)
	}
	bad := map[string]string{}
	for _, a := range r.Artifacts {
		switch {
		case a.URL == "":
			bad[a.Name] = "no URL"
		case !validSHA256(a.SHA256):
			bad[a.Name] = "sha256 is not 64 hex digits"
		}
	}
	for _, name := range []string{ArtifactKubelet, ArtifactContainerd} {
		if !slices.ContainsFunc(r.Artifacts, func(a Artifact) bool { return a.Name == name && a.URL != "" }) {
			bad[name] = "no URL"
		}
	}
	if len(bad) > 0 {
		return fail(fmt.Sprintf("release %s has incomplete artifacts: %s", in.Target, describe(bad)), bad)
	}
	return pass(fmt.Sprintf("release %s is in the catalog with %s", in.Target,
		plural(len(r.Artifacts), "artifact", "artifacts")), nil)
}

func validSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}
