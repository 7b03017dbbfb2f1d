package preflight

import (
	"errors"
	"fmt"
)

// Check IDs. They are stable: clients, metrics and stored runs use them.
const (
	IDVersionRules        = "version-rules"
	IDReleaseInCatalog    = "release-in-catalog"
	IDArtifacts           = "artifacts"
	IDNodesReady          = "nodes-ready"
	IDAgentsReporting     = "agents-reporting"
	IDControlPlaneHealth  = "control-plane-health"
	IDDiskSpace           = "disk-space"
	IDNetworkReachability = "network-reachability"
	IDPDBsBlockingDrain   = "pdbs-blocking-drain"
	IDProtectedPods       = "protected-pods"
	IDDeprecatedAPIs      = "deprecated-apis"
)

// ErrUnknownCheck is returned by RunOnly for an ID that is not registered.
var ErrUnknownCheck = errors.New("unknown preflight check")

// Check is one registered preflight check.
type Check struct {
	ID          string
	Severity    Severity
	Description string
	// Run judges the input. It must be pure; Run (the package function)
	// fills the result's Check, Severity and Blocks.
	Run func(Input) Result
}

// severityOf decides, for the checks it names, the severity from the
// input instead of Check.Severity (which then says the usual one): a
// deprecated API still in use blocks an automatic minor upgrade and only
// warns an operator.
var severityOf = map[string]func(Input) Severity{
	IDDeprecatedAPIs: deprecatedAPIsSeverity,
}

// liveChecks judge what changes by itself from one reading to the next:
// the API server's answers and the agents' heartbeats. The others judge
// what is fixed for a run: the catalog, the version rules, and the hosts'
// answers to the run's operations.
var liveChecks = map[string]bool{
	IDAgentsReporting: true, IDControlPlaneHealth: true, IDDeprecatedAPIs: true,
	IDNodesReady: true, IDPDBsBlockingDrain: true, IDProtectedPods: true,
}

// LiveBlocking returns, in report order, the checks that block r and judge
// live data: those a new reading, seconds later, may pass. The coordinator
// reads again a few times before it commits a report that blocks on one.
func (r Report) LiveBlocking() []string {
	var out []string
	for _, res := range r.Results {
		if res.Blocks && liveChecks[res.Check] {
			out = append(out, res.Check)
		}
	}
	return out
}

// Checks returns the registry, a fresh slice each call, ordered by ID.
func Checks() []Check {
	return []Check{
		{IDAgentsReporting, Blocking, "every node's agent is registered, not missing, and seen within the heartbeat grace", checkAgentsReporting},
		{IDArtifacts, Blocking, "every host downloaded the target release's artifacts and their sha256 matched", checkArtifacts},
		{IDControlPlaneHealth, Blocking, "the API server's /readyz is ok, etcd included", checkControlPlaneHealth},
		{IDDeprecatedAPIs, Warning, "no API still in use (apiserver_requested_deprecated_apis) is removed in the target minor; blocking for automatic minor upgrades, a warning otherwise", checkDeprecatedAPIs},
		{IDDiskSpace, Blocking, "every host has the free space the new artifacts need", checkDiskSpace},
		{IDNetworkReachability, Blocking, fmt.Sprintf("every host reaches the agents of the up to %d peers it probes (every agent is probed by another host) and, when the coordinator gives one, the API endpoint", ProbeFanout), checkNetworkReachability},
		{IDNodesReady, Blocking, "every node of the cluster exists in the API server and is Ready", checkNodesReady},
		{IDPDBsBlockingDrain, Warning, "PodDisruptionBudgets that would refuse evictions during drains", checkPDBs},
		{IDProtectedPods, Warning, "pods protected from eviction by safe-to-evict=false, with the date each frees up", checkProtectedPods},
		{IDReleaseInCatalog, Blocking, "the target version is in the release catalog with complete artifacts", checkReleaseInCatalog},
		{IDVersionRules, Blocking, "the upgrade obeys the version rules and admin/user skew (SPEC §3)", checkVersionRules},
	}
}

// Run runs every registered check on in and aggregates the results.
func Run(in Input) Report {
	checks := Checks()
	results := make([]Result, 0, len(checks))
	for _, c := range checks {
		results = append(results, runOne(c, in))
	}
	return Aggregate(results)
}

// RunOnly runs the checks with the given IDs alone (a dry run of part of
// a preflight), in registry order.
func RunOnly(in Input, ids ...string) (Report, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var results []Result
	for _, c := range Checks() {
		if want[c.ID] {
			results = append(results, runOne(c, in))
			delete(want, c.ID)
		}
	}
	for _, id := range ids {
		if want[id] {
			return Report{}, fmt.Errorf("%w: %q", ErrUnknownCheck, id)
		}
	}
	return Aggregate(results), nil
}

// runOne runs c and stamps its identity on the result. A panicking check
// fails instead of taking the coordinator's leader down with it.
func runOne(c Check, in Input) (r Result) {
	defer func() {
		if p := recover(); p != nil {
			r = Result{Status: Fail, Message: fmt.Sprintf("check panicked: %v", p)}
		}
		r.Check, r.Severity = c.ID, c.Severity
		if sev, ok := severityOf[c.ID]; ok {
			r.Severity = sev(in)
		}
		r.Blocks = blocks(r)
	}()
	return c.Run(in)
}
