package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// Preflight runs are replicated objects (SPEC §5): the leader decides the
// host operations of a run and commits them with the run, agents' results
// are committed as they come, and the leader commits the report once every
// host answered or the run's deadline passed. A new leader resumes a run
// from the log: it offers the same operation IDs and finishes it.

// maxPreflights bounds the runs kept per cluster.
const maxPreflights = 20

// PreflightRun is one stored preflight run.
type PreflightRun struct {
	ID         string                         `json:"id"`
	Cluster    string                         `json:"cluster"`
	Target     phases.Version                 `json:"target"`
	State      string                         `json:"state"` // running | done
	CreatedAt  time.Time                      `json:"createdAt"`
	Deadline   time.Time                      `json:"deadline"`
	FinishedAt time.Time                      `json:"finishedAt,omitzero"`
	Operations map[string][]api.Operation     `json:"operations"`
	Results    map[string]api.OperationResult `json:"results,omitempty"`
	Report     *preflight.Report              `json:"report,omitempty"`
}

type preflightStartCmd struct {
	Run PreflightRun `json:"run"`
}

type preflightResultCmd struct {
	Cluster string              `json:"cluster"`
	Run     string              `json:"run"`
	Node    string              `json:"node"`
	Result  api.OperationResult `json:"result"`
}

type preflightFinishCmd struct {
	Cluster string           `json:"cluster"`
	Run     string           `json:"run"`
	Report  preflight.Report `json:"report"`
	Now     time.Time        `json:"now"`
}

func (r *clusterRecord) preflight(id string) *PreflightRun {
	for _, p := range r.Preflights {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func (s *state) preflightStart(c preflightStartCmd) (any, error) {
	r, err := s.cluster(c.Run.Cluster)
	if err != nil {
		return nil, err
	}
	if r.preflight(c.Run.ID) != nil {
		return nil, fmt.Errorf("preflight %s exists: %w", c.Run.ID, phases.ErrStale)
	}
	addPreflight(r, c.Run)
	return nil, nil
}

// addPreflight stores a new running preflight run, keeping the latest
// maxPreflights.
func addPreflight(r *clusterRecord, run PreflightRun) {
	run.State = "running"
	r.PreflightSeq++
	r.Preflights = append(r.Preflights, &run)
	if len(r.Preflights) > maxPreflights {
		r.Preflights = r.Preflights[len(r.Preflights)-maxPreflights:]
	}
}

// runningPreflight finds a run that still takes results.
func (s *state) runningPreflight(cluster, id string) (*PreflightRun, error) {
	r, err := s.cluster(cluster)
	if err != nil {
		return nil, err
	}
	run := r.preflight(id)
	if run == nil || run.State != "running" {
		return nil, fmt.Errorf("preflight %s is not running: %w", id, phases.ErrStale)
	}
	return run, nil
}

func (s *state) preflightResult(c preflightResultCmd) (any, error) {
	run, err := s.runningPreflight(c.Cluster, c.Run)
	if err != nil {
		return nil, err
	}
	owned := false
	for _, op := range run.Operations[c.Node] {
		owned = owned || op.ID == c.Result.ID
	}
	if !owned {
		return nil, &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("operation %s is not node %s's in preflight %s", c.Result.ID, c.Node, c.Run), Err: ErrNotFound}
	}
	if old, ok := run.Results[c.Result.ID]; ok && old.State != api.OpRunning {
		return nil, fmt.Errorf("result of %s already recorded: %w", c.Result.ID, phases.ErrStale)
	}
	if run.Results == nil {
		run.Results = map[string]api.OperationResult{}
	}
	run.Results[c.Result.ID] = c.Result
	return nil, nil
}

func (s *state) preflightFinish(c preflightFinishCmd) (any, error) {
	run, err := s.runningPreflight(c.Cluster, c.Run)
	if err != nil {
		return nil, err
	}
	rep := c.Report
	run.Report, run.State, run.FinishedAt = &rep, "done", c.Now
	// The upgrade waiting for this run starts or is refused by the same
	// entry that stores the report: the replicated state never holds a
	// running upgrade without the passing run it names.
	r := s.Clusters[c.Cluster]
	if u := r.Upgrade; u != nil && u.State == phases.UpgradePreflight && u.Preflight == run.ID {
		u.Revision++
		if rep.Blocked() {
			u.State, u.FinishedAt, u.RefusedChecks = phases.UpgradeRefused, c.Now, slices.Clone(rep.Failed)
			r.History = append(r.History, api.UpgradeSummary{ID: u.ID, From: u.From.String(), To: u.To.String(),
				State: u.State, CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt})
		} else {
			u.State = phases.UpgradeRunning
			r.Spec.Version = u.To
		}
	}
	return nil, nil
}

// PreflightTimeout is how long a run waits for agents' host checks.
const PreflightTimeout = 2 * time.Minute

// StartPreflight starts a preflight run for an upgrade of cluster to
// version and returns its ID at once; the run finishes in the background.
func (c *Coordinator) StartPreflight(ctx context.Context, cluster, version string) (string, error) {
	to, err := phases.ParseVersion(version)
	if err != nil {
		return "", &RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: ErrInvalid}
	}
	run, err := c.newPreflightRun(cluster, to)
	if err != nil {
		return "", err
	}
	if _, err := c.apply(ctx, cmdPreflightStart, preflightStartCmd{Run: run}); err != nil {
		return "", err
	}
	return run.ID, nil
}

// newPreflightRun decides a run for an upgrade of cluster to version: its
// ID and every host's operations, from the state this member has applied.
// The entry that carries it re-checks the ID, so a run decided on stale
// state is refused, not stored twice.
func (c *Coordinator) newPreflightRun(cluster string, to phases.Version) (PreflightRun, error) {
	now := c.cfg.Clock.Now()
	var run PreflightRun
	var err error
	c.fsm.read(func(st *state) {
		var r *clusterRecord
		if r, err = st.cluster(cluster); err != nil {
			return
		}
		in := c.preflightInput(st, r, to, now)
		addrs := map[string]string{}
		for n, a := range r.Agents {
			addrs[n] = a.Address
		}
		id := fmt.Sprintf("%s-%d", strings.ReplaceAll(cluster, ".", "-"), r.PreflightSeq+1)
		run = PreflightRun{ID: id, Cluster: cluster, Target: to, CreatedAt: now, Deadline: now.Add(PreflightTimeout),
			Operations: preflight.HostOperations(id, in, "", addrs)}
	})
	return run, err
}

// Preflight returns a stored run.
func (c *Coordinator) Preflight(cluster, id string) (PreflightRun, error) {
	var out PreflightRun
	err := fmt.Errorf("preflight %s/%s: %w", cluster, id, ErrNotFound)
	c.fsm.read(func(st *state) {
		if r, ok := st.Clusters[cluster]; ok {
			if p := r.preflight(id); p != nil {
				out, err = copyPreflight(p), nil
			}
		}
	})
	return out, err
}

// preflightInput gathers, under the read lock, what the checks need from
// the replicated state and the leader's liveness.
func (c *Coordinator) preflightInput(st *state, r *clusterRecord, to phases.Version, now time.Time) preflight.Input {
	in := preflight.Input{Cluster: r.Spec, Current: r.StatusVersion, Target: to, Release: st.Releases[to.String()],
		Now: now, HeartbeatGrace: c.cfg.MissingAfter, Agents: map[string]api.AgentStatus{}}
	in.Cluster.Version = r.StatusVersion
	if admin, ok := st.Clusters[r.Spec.AdminCluster]; ok {
		in.AdminVersion = admin.StatusVersion
	}
	for _, n := range sortedKeys(st.Clusters) {
		if st.Clusters[n].Spec.AdminCluster == r.Spec.Name {
			in.UserClusters = append(in.UserClusters, phases.ClusterVersion{Name: n, Version: st.Clusters[n].StatusVersion})
		}
	}
	for node, a := range r.Agents {
		as := api.AgentStatus{Node: node, Registered: a.Registered, Missing: a.Missing, Healthy: a.Healthy, Kubelet: a.Kubelet, Containerd: a.Containerd}
		if t, ok := c.live.lastSeen(nodeKey(r.Spec.Name, node)); ok {
			as.LastSeen = t
		}
		in.Agents[node] = as
	}
	return in
}

// preflightOffers adds the host operations of running preflights that have
// no final result yet, and finishes runs that are complete or overdue.
func (c *Coordinator) preflightWork(ctx context.Context, now time.Time, offers map[string]map[string][]api.Operation) {
	type finish struct {
		cluster, run string
	}
	var due []finish
	c.fsm.read(func(st *state) {
		for _, cn := range sortedKeys(st.Clusters) {
			for _, run := range st.Clusters[cn].Preflights {
				if run.State != "running" {
					continue
				}
				pending := 0
				// In map order: each node's offers keep the order of its
				// operations, and sorting 15,000 names every tick cost a
				// fifth of the leader's CPU in BenchmarkPreflight15k.
				for node, ops := range run.Operations {
					// An agent that is not registered, or missing, cannot
					// answer: waiting for it only delays the verdict, which
					// agents-reporting already decides.
					a := st.Clusters[cn].Agents[node]
					able := a != nil && a.Registered && !a.Missing
					for _, op := range ops {
						if res, ok := run.Results[op.ID]; ok && res.State != api.OpRunning {
							continue
						}
						if able {
							pending++
						}
						if offers[cn] == nil {
							offers[cn] = map[string][]api.Operation{}
						}
						offers[cn][node] = append(offers[cn][node], op)
					}
				}
				// A new leader has seen no agent's heartbeat yet; the
				// agents-reporting check would fail every agent that the
				// last leader saw. Wait for the first beats (or for the
				// sweep to declare the silent ones missing), at most
				// MissingAfter after the term began.
				for node, a := range st.Clusters[cn].Agents {
					if a.Registered && !a.Missing && c.live.awaiting(nodeKey(cn, node), now, c.cfg.MissingAfter) {
						pending++
					}
				}
				if pending == 0 || !now.Before(run.Deadline) {
					due = append(due, finish{cn, run.ID})
				}
			}
		}
	})
	for _, f := range due {
		c.startWork(ctx, "preflight/"+f.cluster+"/"+f.run, func(ctx context.Context) { c.finishPreflight(ctx, f.cluster, f.run) })
	}
}

// finishPreflight reads the cluster, runs every check and commits the report.
func (c *Coordinator) finishPreflight(ctx context.Context, cluster, id string) {
	now := c.cfg.Clock.Now()
	var in preflight.Input
	var kubeconfig string
	found := false
	c.fsm.read(func(st *state) {
		r, ok := st.Clusters[cluster]
		if !ok {
			return
		}
		run := r.preflight(id)
		if run == nil || run.State != "running" {
			return
		}
		found = true
		in = c.preflightInput(st, r, run.Target, now)
		in.HostChecks = map[string]preflight.HostCheck{}
		for node, ops := range run.Operations {
			var results []api.OperationResult
			for _, op := range ops {
				if res, ok := run.Results[op.ID]; ok {
					results = append(results, res)
				}
			}
			if len(results) > 0 {
				in.HostChecks[node] = preflight.HostCheckFromResults(results)
			}
		}
		kubeconfig = r.Kubeconfig
	})
	if !found {
		return
	}
	var reader preflight.ClusterReader
	if ops, err := c.clusterOps(cluster, kubeconfig); err == nil {
		reader = ops.PreflightReader()
	}
	preflight.GatherCluster(ctx, reader, &in)
	rep := preflight.Run(in)
	if c.cfg.Recorder != nil {
		for _, r := range rep.Results {
			c.cfg.Recorder.PreflightCheck(cluster, r.Check, string(r.Status))
		}
	}
	if _, err := c.apply(ctx, cmdPreflightFinish, preflightFinishCmd{Cluster: cluster, Run: id, Report: rep, Now: now}); err != nil && !isStale(err) {
		c.log.Warn("commit preflight report", "cluster", cluster, "run", id, "err", err)
	}
}

// reportPreflightResult commits an agent's result of a preflight operation.
func (c *Coordinator) reportPreflightResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	var run string
	c.fsm.read(func(st *state) {
		if rec, ok := st.Clusters[cluster]; ok {
			for _, p := range rec.Preflights {
				if strings.HasPrefix(r.ID, "preflight-"+p.ID+"-") {
					run = p.ID
				}
			}
		}
	})
	if run == "" {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("no preflight run has operation %s", r.ID), Err: ErrNotFound}
	}
	_, err := c.apply(ctx, cmdPreflightResult, preflightResultCmd{Cluster: cluster, Run: run, Node: node, Result: r})
	if isStale(err) {
		return nil
	}
	return err
}

// copyPreflight copies a run so the FSM may go on recording results.
func copyPreflight(p *PreflightRun) PreflightRun {
	out := *p
	out.Operations = maps.Clone(p.Operations)
	out.Results = maps.Clone(p.Results)
	if p.Report != nil {
		rep := *p.Report
		out.Report = &rep
	}
	return out
}
