package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// Queries: every read of the state from outside this package goes through
// one of these methods. Each takes the read lock once and returns copies
// that share no memory with the state (copy.go): changing what a query
// returned never changes the state, and apply functions may go on
// changing the state under it.
//
// Two queries may see two different states; a decision made on what they
// returned is re-checked by the apply function of the command that
// carries it.

// Release returns one catalog entry by canonical version ("1.34.4").
func (f *Machine) Release(version string) (api.Release, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Releases[version]
	if !ok {
		return api.Release{}, false
	}
	return copyRelease(r), true
}

// Releases lists the catalog, oldest version first.
func (f *Machine) Releases() []api.Release {
	var out []api.Release // nil when the catalog is empty, as ever
	f.mu.RLock()
	for _, r := range f.st.Releases {
		out = append(out, copyRelease(r))
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b api.Release) int {
		return phases.MustParseVersion(a.Version).Compare(phases.MustParseVersion(b.Version))
	})
	return out
}

// ClusterNames lists the registered clusters, sorted.
func (f *Machine) ClusterNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedKeys(f.st.Clusters)
}

// Cluster returns a copy of a cluster's record, or an error wrapping
// ErrNotFound. The copy leaves out the preflight runs (Preflights is nil;
// PreflightSeq is kept): ask Preflight for one.
func (f *Machine) Cluster(name string) (ClusterRecord, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(name)
	if err != nil {
		return ClusterRecord{}, err
	}
	return copyCluster(r), nil
}

// Clusters returns a copy of every cluster's record (as Cluster does),
// sorted by name.
func (f *Machine) Clusters() []ClusterRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]ClusterRecord, 0, len(f.st.Clusters))
	for _, n := range sortedKeys(f.st.Clusters) {
		out = append(out, copyCluster(f.st.Clusters[n]))
	}
	return out
}

// Upgrade returns a copy of a cluster's current (or last) upgrade; an error
// wraps ErrNotFound for an unknown cluster, ErrNoUpgrade for one that molt
// never upgraded.
func (f *Machine) Upgrade(cluster string) (*phases.Upgrade, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return nil, err
	}
	if r.Upgrade == nil {
		return nil, fmt.Errorf("cluster %s has never been upgraded by molt: %w", cluster, ErrNoUpgrade)
	}
	return copyUpgrade(r.Upgrade), nil
}

// PendingUpgradeID returns the ID of the cluster's upgrade that has not
// ended (ClusterRecord.PendingUpgrade) and of the preflight run it waits
// or waited for; both "" when there is none or the cluster is unknown.
// Agents ask for it on every poll, so it copies nothing.
func (f *Machine) PendingUpgradeID(cluster string) (id, preflight string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Clusters[cluster]
	if !ok {
		return "", ""
	}
	if u := r.PendingUpgrade(); u != nil {
		return u.ID, u.Preflight
	}
	return "", ""
}

// CheckUpgrade applies every rule an upgrade of cluster to version must
// pass, as the startUpgrade command will, and returns a copy of the
// cluster's record (as Cluster does). It changes nothing: a dry run.
func (f *Machine) CheckUpgrade(cluster string, to phases.Version) (ClusterRecord, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.checkUpgrade(cluster, to)
	if err != nil {
		return ClusterRecord{}, err
	}
	return copyCluster(r), nil
}

// ActiveUpgrade is what the leader decides a running upgrade's next
// actions on: a copy of the upgrade and of what its cluster's record
// says about it.
type ActiveUpgrade struct {
	Cluster string
	Upgrade *phases.Upgrade
	// Policy is the cluster's maintenance policy (nil: always open).
	Policy *maintenance.Policy
	// Release is the catalog entry of the upgrade's target (nil when the
	// catalog no longer holds it).
	Release *api.Release
	// Kubeconfig is the cluster's kubeconfig as stored
	// (ClusterRecord.StoredKubeconfig): sealed, or in plain text from
	// entries older than sealing.
	Kubeconfig string
	// Cloud is the cluster's cloud adapter (nil: no MIG pools), and
	// Autoscaling each MIG pool's autoscaling range (blue/green restores
	// it), by pool.
	Cloud       *phases.CloudSpec
	Autoscaling map[string]phases.Autoscaling
}

// ActiveUpgrades returns every running upgrade (phases.Upgrade.Active),
// sorted by cluster.
func (f *Machine) ActiveUpgrades() []ActiveUpgrade {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []ActiveUpgrade
	for _, n := range sortedKeys(f.st.Clusters) {
		r := f.st.Clusters[n]
		u := r.ActiveUpgrade()
		if u == nil {
			continue
		}
		a := ActiveUpgrade{Cluster: n, Upgrade: copyUpgrade(u), Policy: copyPolicy(r.Policy), Kubeconfig: r.StoredKubeconfig()}
		if r.Spec.Cloud != nil {
			a.Cloud = clonePtr(r.Spec.Cloud)
			a.Autoscaling = map[string]phases.Autoscaling{}
			for _, p := range r.Spec.Pools {
				if p.Autoscaling != nil {
					a.Autoscaling[p.Name] = *p.Autoscaling
				}
			}
		}
		if rel, ok := f.st.Releases[u.To.String()]; ok {
			cp := copyRelease(rel)
			a.Release = &cp
		}
		out = append(out, a)
	}
	return out
}

// NodeAgent is one node's agent record.
type NodeAgent struct {
	Cluster string
	Node    string
	AgentRecord
}

// Agent returns a copy of one node's agent record; false when the cluster
// or the agent is unknown.
func (f *Machine) Agent(cluster, node string) (AgentRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if r, ok := f.st.Clusters[cluster]; ok {
		if a := r.Agents[node]; a != nil {
			return copyAgent(a), true
		}
	}
	return AgentRecord{}, false
}

// Agents returns every agent record, sorted by cluster, then node.
func (f *Machine) Agents() []NodeAgent {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, r := range f.st.Clusters {
		n += len(r.Agents)
	}
	if n == 0 {
		return nil
	}
	out := make([]NodeAgent, 0, n)
	for _, cn := range sortedKeys(f.st.Clusters) {
		r := f.st.Clusters[cn]
		for _, node := range sortedKeys(r.Agents) {
			out = append(out, NodeAgent{Cluster: cn, Node: node, AgentRecord: copyAgent(r.Agents[node])})
		}
	}
	return out
}

// Policy returns a cluster's maintenance policy (the zero policy, always
// open, when it has none).
func (f *Machine) Policy(cluster string) (maintenance.Policy, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil || r.Policy == nil {
		return maintenance.Policy{}, err
	}
	return *copyPolicy(r.Policy), nil
}

// ValidatePolicy checks a policy a request brings for a cluster at now:
// what the setPolicy command will check, and the rules only new policies
// are held to (maintenance.Policy.Admit). A refusal names its rule and
// wraps ErrPolicyInvalid.
func (f *Machine) ValidatePolicy(cluster string, p maintenance.Policy, now time.Time) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return err
	}
	return PolicyError(p.Admit(f.st.policyContext(r, now)))
}

// PolicyContext is what validating a cluster's policy at now depends on
// (its release channel; when its current minor's support ends).
func (f *Machine) PolicyContext(cluster string, now time.Time) (maintenance.ValidationContext, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return maintenance.ValidationContext{}, err
	}
	return f.st.policyContext(r, now), nil
}

// Preflight returns a copy of a stored preflight run, or an error wrapping
// ErrNotFound.
func (f *Machine) Preflight(cluster, id string) (PreflightRun, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if r, ok := f.st.Clusters[cluster]; ok {
		if p := r.preflight(id); p != nil {
			return copyPreflight(p), nil
		}
	}
	return PreflightRun{}, fmt.Errorf("preflight %s/%s: %w", cluster, id, ErrNotFound)
}

// Preflights returns the cluster's stored preflight runs, newest first,
// without their host operations and results (Operations, Results nil;
// the Report is a copy), or an error wrapping ErrNotFound. Hosts counts
// each run's nodes with operations.
func (f *Machine) Preflights(cluster string) ([]PreflightSummary, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return nil, err
	}
	out := make([]PreflightSummary, 0, len(r.Preflights))
	for i := len(r.Preflights) - 1; i >= 0; i-- {
		p := r.Preflights[i]
		run := *p
		run.Operations, run.Results, run.Report = nil, nil, copyReport(p.Report)
		out = append(out, PreflightSummary{Run: run, Hosts: len(p.Operations)})
	}
	return out, nil
}

// PreflightSummary is a stored run without its operations and results,
// and how many hosts it sent checks to.
type PreflightSummary struct {
	Run   PreflightRun
	Hosts int
}

// PreflightOfOperation returns the ID of the cluster's stored preflight run
// that operation id belongs to ("preflight-<run>-…"), or "" when none does.
func (f *Machine) PreflightOfOperation(cluster, id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	run := ""
	if r, ok := f.st.Clusters[cluster]; ok {
		for _, p := range r.Preflights {
			if strings.HasPrefix(id, "preflight-"+p.ID+"-") {
				run = p.ID
			}
		}
	}
	return run
}

// PreflightProgress is where a running preflight run stands.
type PreflightProgress struct {
	Cluster  string
	Run      string
	Deadline time.Time
	// Waiting holds, per node, the run's operations that have no final
	// result yet, in the order of the node's operations.
	Waiting map[string][]api.Operation
	// Pending counts the waiting operations of nodes whose agent can
	// answer (registered and not missing).
	Pending int
	// Reporting are the cluster's agents that are registered and not
	// missing, in no particular order.
	Reporting []string
	// Started holds the nodes whose agent reported the run's artifact
	// check (CheckArtifacts) as started and not yet finished.
	Started map[string]bool
}

// RunningPreflights returns the progress of every running preflight run,
// sorted by cluster, then in the order the cluster stores its runs.
func (f *Machine) RunningPreflights() []PreflightProgress {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []PreflightProgress
	for _, cn := range sortedKeys(f.st.Clusters) {
		r := f.st.Clusters[cn]
		var reporting []string
		for node, a := range r.Agents {
			if a.Registered && !a.Missing {
				reporting = append(reporting, node)
			}
		}
		for _, run := range r.Preflights {
			if run.State != "running" {
				continue
			}
			p := PreflightProgress{Cluster: cn, Run: run.ID, Deadline: run.Deadline, Waiting: map[string][]api.Operation{}, Reporting: reporting}
			// In map order: each node's operations keep their order, and
			// sorting 15,000 names every tick cost a fifth of the leader's
			// CPU in BenchmarkPreflight15k. Each operation is copied with
			// its parameters (pointers), like every query's result: the
			// leader offers them on and never holds the stored run's.
			for node, ops := range run.Operations {
				// An agent that is not registered, or missing, cannot
				// answer: waiting for it only delays the verdict, which
				// agents-reporting already decides.
				a := r.Agents[node]
				able := a != nil && a.Registered && !a.Missing
				for _, op := range ops {
					res, ok := run.Results[op.ID]
					if ok && res.State != api.OpRunning {
						continue
					}
					if ok && op.Kind == api.OpCheckArtifacts {
						if p.Started == nil {
							p.Started = map[string]bool{}
						}
						p.Started[node] = true
					}
					if able {
						p.Pending++
					}
					p.Waiting[node] = append(p.Waiting[node], copyOperation(op))
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// PreflightInput gathers what preflight's checks of an upgrade of cluster
// to version need from the replicated state: the cluster's spec at its
// status version, the target's release, the admin cluster's version and
// the user clusters', and the agents' replicated liveness. The caller adds
// what the state does not hold (Now, HeartbeatGrace, agents' LastSeen,
// host checks, the cluster's own state).
func (f *Machine) PreflightInput(cluster string, to phases.Version) (preflight.Input, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return preflight.Input{}, err
	}
	return f.st.preflightInput(r, to), nil
}

// preflightInput is PreflightInput for cluster record r; the caller holds
// the lock.
func (s *state) preflightInput(r *ClusterRecord, to phases.Version) preflight.Input {
	in := preflight.Input{Cluster: copySpec(r.Spec), Current: r.StatusVersion, Target: to, Agents: map[string]preflight.Agent{}}
	in.Cluster.Version = r.StatusVersion
	if rel, ok := s.Releases[to.String()]; ok {
		r := convert.PreflightRelease(*rel)
		in.Release = &r
	}
	if admin, ok := s.Clusters[r.Spec.AdminCluster]; ok {
		in.AdminVersion = admin.StatusVersion
	}
	for _, n := range sortedKeys(s.Clusters) {
		if s.Clusters[n].Spec.AdminCluster == r.Spec.Name {
			in.UserClusters = append(in.UserClusters, phases.ClusterVersion{Name: n, Version: s.Clusters[n].StatusVersion})
		}
	}
	for node, a := range r.Agents {
		in.Agents[node] = preflight.Agent{Registered: a.Registered, Missing: a.Missing, Healthy: a.Healthy}
	}
	return in
}
