package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// results are one run's figures.
type results struct {
	Agents          int                `json:"agents"`
	IntervalSeconds float64            `json:"intervalSeconds"`
	WindowSeconds   float64            `json:"windowSeconds"`
	FileLimit       uint64             `json:"fileLimit"`
	Leader          string             `json:"leader"`
	LeaderAfter     string             `json:"leaderAfter"`
	LeaderChanges   float64            `json:"leaderChanges"` // over the window, summed over the members
	Beats           int64              `json:"beats"`
	Failed          int64              `json:"failed"`
	Retries         int64              `json:"retries"` // enrollments and registrations tried again
	BeatsPerSecond  float64            `json:"beatsPerSecond"`
	RaftEntries     float64            `json:"raftEntries"` // the leader's applied index, over the window
	ByMember        map[string]latency `json:"byMember"`
	PeakRSSMiB      map[string]float64 `json:"peakRSSMiB"`
}

// latency is the beats one member answered in the window.
type latency struct {
	Role  string  `json:"role"` // leader or follower
	Beats int     `json:"beats"`
	P50ms float64 `json:"p50ms"`
	P99ms float64 `json:"p99ms"`
}

func summarize(cfg config, co *coordinator, agents int, f workerReport, before, after state, peak map[string]float64) *results {
	window := after.at.Sub(before.at)
	r := &results{Agents: agents, IntervalSeconds: cfg.interval.Seconds(), WindowSeconds: window.Seconds(), FileLimit: cfg.fileLimit,
		Leader: before.leader, LeaderAfter: after.leader, Beats: f.Beats, Failed: f.Failed, Retries: f.Retries,
		ByMember: map[string]latency{}, PeakRSSMiB: peak}
	r.BeatsPerSecond = float64(r.Beats) / window.Seconds()
	for id, v := range after.leaderChanges {
		r.LeaderChanges += v - before.leaderChanges[id]
	}
	r.RaftEntries = after.applied[before.leader] - before.applied[before.leader]
	for i, m := range co.members {
		ls := slices.Clone(f.Latencies[i])
		slices.Sort(ls)
		role := "follower"
		if m.id == before.leader {
			role = "leader"
		}
		r.ByMember[m.id] = latency{Role: role, Beats: len(ls), P50ms: ms(pct(ls, 0.50)), P99ms: ms(pct(ls, 0.99))}
	}
	return r
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// print writes the results as the rows of docs/performance.md.
func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "agents %d, a beat every %gs each, %.0f s measured, open files up to %d\n", r.Agents, r.IntervalSeconds, r.WindowSeconds, r.FileLimit)
	fmt.Fprintf(w, "enrollments and registrations tried again %d\n", r.Retries)
	fmt.Fprintf(w, "beats %d (%.0f/s), failed %d; Raft entries at the leader %.0f; leader %s → %s, leader changes %.0f\n",
		r.Beats, r.BeatsPerSecond, r.Failed, r.RaftEntries, r.Leader, r.LeaderAfter, r.LeaderChanges)
	fmt.Fprintln(w, "| member | role | beats answered | p50 | p99 | peak RSS |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, id := range []string{"m1", "m2", "m3"} {
		l := r.ByMember[id]
		fmt.Fprintf(w, "| %s | %s | %d | %.1f ms | %.1f ms | %.0f MiB |\n", id, l.Role, l.Beats, l.P50ms, l.P99ms, r.PeakRSSMiB[id])
	}
}
