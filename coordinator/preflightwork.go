package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/preflight"
)

// preflightTimeout is how long a run with ops waits for its hosts:
// PreflightTimeout for each wave of artifact checks (one wave when they
// are not bounded).
func preflightTimeout(ops map[string][]api.Operation, wave int) time.Duration {
	hosts := 0
	for _, hops := range ops {
		if slices.ContainsFunc(hops, func(op api.Operation) bool { return op.Kind == api.OpCheckArtifacts }) {
			hosts++
		}
	}
	waves := 1
	if wave > 0 && hosts > wave {
		waves = (hosts + wave - 1) / wave
	}
	return PreflightTimeout * time.Duration(waves)
}

// artifactWave picks the hosts of a running preflight that are offered
// their CheckArtifacts now, at most size at a time (nil: no bound, size
// <= 0): every host whose check has started and not finished, then, in
// the order of their names, hosts whose check has not started, up to
// size. Every host fetches and hashes the whole release in its check; all
// at once, that is the whole cluster downloading from the artifact server
// at one moment, and on the lab's shared cores a stalled API server.
// Hosts whose agent cannot answer (not registered, or missing) take no
// place: agents-reporting decides for them. The order of names makes the
// pick the same on every tick and on a new leader; a host whose agent
// takes the offer but never reports keeps its place until the run's
// deadline, so the wave shrinks by one rather than stopping.
func artifactWave(p statemachine.PreflightProgress, size int) map[string]bool {
	if size <= 0 {
		return nil
	}
	able := make(map[string]bool, len(p.Reporting))
	for _, n := range p.Reporting {
		able[n] = true
	}
	wave := map[string]bool{}
	var next []string // the smallest names not started, sorted, at most size
	for node, ops := range p.Waiting {
		if !able[node] || !slices.ContainsFunc(ops, func(op api.Operation) bool { return op.Kind == api.OpCheckArtifacts }) {
			continue
		}
		if p.Started[node] {
			wave[node] = true
			continue
		}
		if len(next) == size && node > next[size-1] {
			continue
		}
		i, _ := slices.BinarySearch(next, node)
		next = slices.Insert(next, i, node)
		if len(next) > size {
			next = next[:size]
		}
	}
	for _, node := range next {
		if len(wave) >= size {
			break
		}
		wave[node] = true
	}
	return wave
}

// preflightWork adds the host operations of running preflights that have
// no final result yet, and finishes runs that are complete or overdue.
func (l *leader) preflightWork(ctx context.Context, now time.Time, offers map[string]map[string][]api.Operation) {
	for _, p := range l.sm.RunningPreflights() {
		if offers[p.Cluster] == nil && len(p.Waiting) > 0 {
			offers[p.Cluster] = map[string][]api.Operation{}
		}
		wave := artifactWave(p, l.cfg.PreflightArtifactWave)
		for node, ops := range p.Waiting {
			for _, op := range ops {
				if op.Kind == api.OpCheckArtifacts && wave != nil && !wave[node] {
					continue // not its turn: offered in a later wave
				}
				offers[p.Cluster][node] = append(offers[p.Cluster][node], op)
			}
		}
		pending := p.Pending
		// A new leader has seen no agent's heartbeat yet; the
		// agents-reporting check would fail every agent that the last
		// leader saw. Wait for the first beats (or for the sweep to
		// declare the silent ones missing), at most MissingAfter after the
		// term began.
		for _, node := range p.Reporting {
			if l.live.awaiting(nodeKey(p.Cluster, node), now, l.cfg.MissingAfter) {
				pending++
			}
		}
		if pending == 0 || !now.Before(p.Deadline) {
			cluster, run := p.Cluster, p.Run
			l.startWork(ctx, "preflight/"+cluster+"/"+run, func(ctx context.Context) { l.finishPreflight(ctx, cluster, run) })
		}
	}
}

// finishPreflight reads the cluster, runs every check and commits the
// report. A report that blocks only on live checks (preflight's
// LiveBlocking: the API server's answers, the agents' heartbeats) is made
// again, up to
// WorkRetries times RetryBackoff apart as any cluster call is retried,
// before it is committed: the report is made right after the last host
// answered, when every host has just fetched the release, and an API
// server or an agent's kubelet that stalled for those seconds would refuse
// an upgrade for nothing. The last report is the one committed, so a
// control plane that stays unhealthy still refuses the upgrade, about 12 s
// later by default.
func (l *leader) finishPreflight(ctx context.Context, cluster, id string) {
	run, err := l.sm.Preflight(cluster, id)
	if err != nil || run.State != "running" {
		return
	}
	r, err := l.sm.Cluster(cluster)
	if err != nil {
		return
	}
	// The run an automatic upgrade waits for blocks on what would only warn
	// an operator (preflight's deprecated-apis).
	automatic := false
	if u := r.Upgrade; u != nil && u.Preflight == id && u.Options.Automatic {
		automatic = true
	}
	hosts := map[string]preflight.HostCheck{}
	for node, ops := range run.Operations {
		var results []preflight.HostResult
		for _, op := range ops {
			if res, ok := run.Results[op.ID]; ok {
				results = append(results, convert.PreflightHostResult(res))
			}
		}
		if len(results) > 0 {
			hosts[node] = preflight.HostCheckFromResults(results)
		}
	}
	var reader preflight.ClusterReader
	if ops, err := l.clusterOps(cluster, r.StoredKubeconfig()); err == nil {
		reader = ops.PreflightReader()
	}
	var rep preflight.Report
	var now time.Time
	_ = l.retry(ctx, "preflight "+id+" of cluster "+cluster, func() error {
		now = l.cfg.Clock.Now()
		in, err := l.preflightInput(cluster, run.Target, now)
		if err != nil {
			return err
		}
		in.Automatic, in.HostChecks = automatic, hosts
		preflight.GatherCluster(ctx, reader, &in)
		rep = preflight.Run(in)
		// Only when every check that blocks judges live data may a new
		// reading pass the report; a failed artifact check beside them
		// refuses the upgrade whatever a new reading finds.
		if live := rep.LiveBlocking(); len(live) > 0 && len(live) == len(rep.Failed) {
			return fmt.Errorf("blocked by %s, which a new reading may pass", strings.Join(live, ", "))
		}
		return nil
	})
	if rep.Results == nil || ctx.Err() != nil {
		return // no report made (the cluster went away), or the term ended
	}
	if l.cfg.Recorder != nil {
		for _, r := range rep.Results {
			l.cfg.Recorder.PreflightCheck(cluster, r.Check, string(r.Status))
		}
	}
	if _, err := l.apply(ctx, statemachine.PreflightFinishCmd{Cluster: cluster, Run: id, Report: rep, Now: now}); err != nil && !isStale(err) {
		l.log.Warn("commit preflight report", "cluster", cluster, "run", id, "err", err)
	}
}
