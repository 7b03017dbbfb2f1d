package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator/statemachine"
)

// fakeAgents is the replicated agents' records as expired reads them,
// counting what it is asked.
type fakeAgents struct {
	recs          map[[2]string]*statemachine.AgentRecord
	agentCalls    int
	allAgentCalls int
}

func newFakeAgents() *fakeAgents {
	return &fakeAgents{recs: map[[2]string]*statemachine.AgentRecord{}}
}

func (f *fakeAgents) Agent(cluster, node string) (statemachine.AgentRecord, bool) {
	f.agentCalls++
	r, ok := f.recs[[2]string{cluster, node}]
	if !ok {
		return statemachine.AgentRecord{}, false
	}
	return *r, true
}

func (f *fakeAgents) Agents() []statemachine.NodeAgent {
	f.allAgentCalls++
	var out []statemachine.NodeAgent
	for k, r := range f.recs {
		out = append(out, statemachine.NodeAgent{Cluster: k[0], Node: k[1], AgentRecord: *r})
	}
	return out
}

func (f *fakeAgents) register(cluster, node string) {
	f.recs[[2]string{cluster, node}] = &statemachine.AgentRecord{Registered: true}
}

// naiveExpired is the sweep as it was, over every agent: the reference
// the deadlines must agree with.
func naiveExpired(l *liveness, f *fakeAgents, now time.Time, missingAfter time.Duration) []string {
	var out []string
	for k, a := range f.recs {
		if !a.Registered || a.Missing {
			continue
		}
		last, ok := l.seen[nodeKey(k[0], k[1])]
		if !ok || last.Before(l.since) {
			last = l.since
		}
		if now.Sub(last) > missingAfter {
			out = append(out, nodeKey(k[0], k[1]))
		}
	}
	slices.Sort(out)
	return out
}

func keysOf(ds []deadline) []string {
	var out []string
	for _, d := range ds {
		out = append(out, nodeKey(d.cluster, d.node))
	}
	slices.Sort(out)
	return out
}

// TestLivenessDeadlines: beats move an agent's deadline, agents no longer
// registered or already missing leave, many expire at once, a failed
// commit is retried, and after the term's first sweep a sweep reads only
// the agents that are overdue.
func TestLivenessDeadlines(t *testing.T) {
	const m = 30 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFakeAgents()
	for i := range 100 {
		f.register("c", fmt.Sprintf("n%02d", i))
	}
	l := newLiveness()
	l.reset(t0)

	// Registered under an earlier leader, none has beaten here: each has
	// MissingAfter from the term's start, found by the term's one walk.
	require.Empty(t, l.expired(t0.Add(m), m, f), "exactly MissingAfter is not yet missing")
	require.Equal(t, 1, f.allAgentCalls, "the term's first sweep walks the agents")
	require.Equal(t, 100, l.due.len())

	// Half beat at +10 s: their deadlines move, the others' stay.
	for i := range 50 {
		l.beat("c", fmt.Sprintf("n%02d", i), t0.Add(10*time.Second))
	}
	// A relayed beat older than the one already noted changes nothing.
	l.beatAt("c", "n00", t0.Add(5*time.Second))
	f.agentCalls = 0
	got := l.expired(t0.Add(m+time.Second), m, f)
	require.Len(t, got, 50, "the 50 silent ones expire at once")
	require.Equal(t, "c/n50", keysOf(got)[0])
	require.Equal(t, 50, f.agentCalls, "only the overdue agents are read")
	require.Equal(t, 1, f.allAgentCalls, "no walk of every agent after the first")
	for _, d := range got {
		if d.node == "n50" {
			l.retry(d) // its commit failed
			continue
		}
		f.recs[[2]string{d.cluster, d.node}].Missing = true // committed
	}
	require.Equal(t, 51, l.due.len())

	// The one whose commit failed comes again with the beaten ones;
	// removed and missing agents are not.
	delete(f.recs, [2]string{"c", "n00"})
	f.recs[[2]string{"c", "n01"}].Missing = true // e.g. by an earlier leader's entry
	f.agentCalls = 0
	got = l.expired(t0.Add(10*time.Second+m+time.Second), m, f)
	require.Len(t, got, 49, "n02…n49 and n50")
	require.Equal(t, "c/n02", keysOf(got)[0])
	require.Equal(t, "c/n50", keysOf(got)[48])
	require.Equal(t, 51, f.agentCalls, "n00…n50, every one overdue")
	require.Equal(t, 0, l.due.len(), "every agent left the deadlines")

	// A missing agent that beats is back in the deadlines.
	f.recs[[2]string{"c", "n01"}].Missing = false
	l.beat("c", "n01", t0.Add(time.Minute))
	require.Equal(t, 1, l.due.len())
	require.Empty(t, l.expired(t0.Add(time.Minute+m), m, f))
	require.Len(t, l.expired(t0.Add(time.Minute+m+1), m, f), 1)

	// A new term forgets the deadlines and walks the agents again.
	l.reset(t0.Add(time.Hour))
	require.Empty(t, l.expired(t0.Add(time.Hour), m, f))
	require.Equal(t, 2, f.allAgentCalls)
}

// TestLivenessAgreesWithFullSweep: over random sequences of registrations,
// beats (direct and relayed), removals, new terms, clock advances and
// sweeps whose commits sometimes fail, the deadlines find exactly the
// agents a sweep of every agent finds.
func TestLivenessAgreesWithFullSweep(t *testing.T) {
	const m = 30 * time.Second
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 39))
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		f := newFakeAgents()
		l := newLiveness()
		// Some agents registered before this member leads.
		for i := range rng.IntN(10) {
			f.register("a", fmt.Sprintf("n%d", i))
		}
		l.reset(now)
		pick := func() (string, string) {
			return []string{"a", "b"}[rng.IntN(2)], fmt.Sprintf("n%d", rng.IntN(15))
		}
		for step := range 300 {
			c, n := pick()
			rec := f.recs[[2]string{c, n}]
			switch op := rng.IntN(10); {
			case op == 0: // Register: committed, then noted
				f.register(c, n)
				l.beat(c, n, now)
			case op <= 2 && rec != nil && rec.Registered: // a beat here; back if missing
				l.beat(c, n, now)
				rec.Missing = false
			case op == 3 && rec != nil && rec.Registered && !rec.Missing: // relayed
				l.beatAt(c, n, now.Add(-time.Duration(rng.Int64N(int64(2*m)))))
			case op == 4 && rng.IntN(4) == 0: // the node left the cluster
				delete(f.recs, [2]string{c, n})
			case op == 5 && rng.IntN(10) == 0: // a new term
				l.reset(now)
			case op <= 7:
				now = now.Add(time.Duration(rng.Int64N(int64(m))))
			default:
				want := naiveExpired(l, f, now, m)
				got := l.expired(now, m, f)
				require.Equal(t, want, keysOf(got), "seed %d step %d", seed, step)
				for _, d := range got {
					if rng.IntN(5) == 0 {
						l.retry(d) // the commit failed
						continue
					}
					f.recs[[2]string{d.cluster, d.node}].Missing = true
				}
			}
		}
	}
}
