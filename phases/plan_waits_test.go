package phases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// dailyOpen is open every day from hour for hours (UTC); nodesClosedUntil
// also holds work on nodes back until then (an exclusion's scope).
type dailyOpen struct {
	hour, hours      int
	nodesClosedUntil time.Time
	never            bool
}

func (d dailyOpen) NextStart(t Target, at time.Time) (time.Time, bool) {
	if d.never {
		return time.Time{}, false
	}
	if t == TargetNodes && at.Before(d.nodesClosedUntil) {
		at = d.nodesClosedUntil
	}
	day := time.Date(at.Year(), at.Month(), at.Day(), d.hour, 0, 0, 0, time.UTC)
	for _, o := range []time.Time{day.AddDate(0, 0, -1), day, day.AddDate(0, 0, 1)} {
		if !at.Before(o) && at.Before(o.Add(time.Duration(d.hours)*time.Hour)) {
			return at, true
		}
		if o.After(at) {
			return o, true
		}
	}
	return time.Time{}, false
}

func TestPlanInWindows(t *testing.T) {
	c := testCluster(0, 3, 0, 2)
	d := DefaultDurations() // cp 6 min a node, workers 8 min
	start := time.Date(2026, 11, 22, 5, 50, 0, 0, time.UTC)
	open := dailyOpen{hour: 2, hours: 4} // 02:00–06:00
	p := MakePlan(c, MustParseVersion("1.34.4"), Options{Automatic: true}, d, start)
	w := p.InWindows(open)

	next := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	// cp-0 at 05:50 (done 05:56), cp-1 at 05:56 (done 06:02): cp-2 waits
	// for the next window; then the rest follows without waiting.
	require.Equal(t, []PlannedWait{{Start: start.Add(12 * time.Minute), End: next, Step: "pool/cp", Target: TargetControlPlane}}, w.Waits)
	byID := map[string]PlannedStep{}
	for _, s := range w.Steps {
		byID[s.ID] = s
	}
	cp := byID["pool/cp"]
	require.Equal(t, start, cp.Start)
	require.Equal(t, next, cp.Batches[2].Start)
	require.Equal(t, next.Add(6*time.Minute), cp.End)
	require.Equal(t, cp.End, byID["pool/w0"].Start)
	require.Equal(t, p.Total+w.Waits[0].End.Sub(w.Waits[0].Start), w.Total, "the work plus the wait")
	require.Equal(t, w.End.Sub(w.Start), w.Total)
	require.Equal(t, p.CriticalPath, w.CriticalPath)
	require.Equal(t, start, p.Steps[0].Start, "the plan it came from is unchanged")
	require.Empty(t, p.Waits)

	// Nodes held back two days (an exclusion of node upgrades): the
	// control plane goes, the workers wait.
	open.nodesClosedUntil = next.Add(48 * time.Hour)
	w = p.InWindows(open)
	require.Len(t, w.Waits, 2)
	require.Equal(t, "pool/w0", w.Waits[1].Step)
	require.Equal(t, TargetNodes, w.Waits[1].Target)
	require.Equal(t, open.nodesClosedUntil, byStep(w, "pool/w0").Start)

	// Never opens: the plan says so.
	w = p.InWindows(dailyOpen{never: true})
	require.True(t, w.WindowNeverOpens)
	require.Empty(t, w.Waits)
}

func byStep(p Plan, id string) PlannedStep {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return PlannedStep{}
}

// TestPlanInWindowsProperties: every gated step and batch starts inside
// the window, nothing runs shorter than planned, and the order of starts
// is kept.
func TestPlanInWindowsProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.SliceOfN(rapid.IntRange(1, 12), 0, 3).Draw(rt, "workers")
		c := testCluster(rapid.IntRange(0, 2).Draw(rt, "cplb"), rapid.IntRange(1, 5).Draw(rt, "cp"), rapid.IntRange(0, 2).Draw(rt, "lb"), workers...)
		open := dailyOpen{hour: rapid.IntRange(0, 23).Draw(rt, "hour"), hours: rapid.IntRange(1, 12).Draw(rt, "hours")}
		start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 24*60).Draw(rt, "minute")) * time.Minute)
		p := MakePlan(c, MustParseVersion("1.34.4"), Options{Automatic: true, ConcurrentWorkerPools: rapid.IntRange(1, 3).Draw(rt, "wp")}, DefaultDurations(), start)
		w := p.InWindows(open)
		inWindow := func(at time.Time) bool { n, _ := open.NextStart(TargetControlPlane, at); return n.Equal(at) }
		for i, s := range w.Steps {
			orig := p.Steps[i]
			if s.End.Sub(s.Start) < orig.End.Sub(orig.Start) {
				rt.Fatalf("%s shorter in windows: %v < %v", s.ID, s.End.Sub(s.Start), orig.End.Sub(orig.Start))
			}
			if _, gated := (&Step{Kind: s.Kind, Role: s.Role}).Target(); !gated {
				continue
			}
			if len(s.Batches) == 0 && !inWindow(s.Start) {
				rt.Fatalf("%s starts at %s outside the window", s.ID, s.Start)
			}
			for _, b := range s.Batches {
				if !inWindow(b.Start) {
					rt.Fatalf("%s batch %d starts at %s outside the window", s.ID, b.Index, b.Start)
				}
			}
		}
		if w.Total < p.Total || !w.End.Equal(w.Start.Add(w.Total)) {
			rt.Fatalf("total %v (plain %v)", w.Total, p.Total)
		}
	})
}
