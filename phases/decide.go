package phases

import (
	"time"
)

// Gate says whether new disruptive work on a target may start now. The
// coordinator implements it from the cluster's maintenance policy for
// automatic upgrades; manual upgrades pass Open.
type Gate interface {
	// Allow returns whether work on t may start, and if not, the pause
	// reason to record.
	Allow(t Target) (bool, string)
}

type openGate struct{}

func (openGate) Allow(Target) (bool, string) { return true, "" }

// Open is the gate of manual upgrades: always open.
var Open Gate = openGate{}

// NodeWait is a node that could start but waits for a time (its protected
// pods become evictable).
type NodeWait struct {
	Node   string
	Until  time.Time
	Reason string
}

// Decision is what Decide returns for one tick.
type Decision struct {
	Actions []Action
	// Waiting lists nodes held back until a time.
	Waiting []NodeWait
	// Blocked is the pause reason when the gate held back work.
	Blocked string
	// NextWake is the earliest time at which the decision changes without
	// any new event (zero when only events can change it).
	NextWake time.Time
}

// Decide is the one entry point the coordinator's leader calls on every
// tick: given the replicated upgrade and now, it returns the next actions.
// It does not modify u. Repeated calls on the same state and time return
// identical decisions.
func Decide(u *Upgrade, now time.Time, gate Gate) Decision {
	var d Decision
	if u == nil || u.State != UpgradeRunning {
		return d
	}
	if gate == nil {
		gate = Open
	}
	u.index()
	allDone := true
	workersRunning := 0
	for i := range u.Steps {
		s := &u.Steps[i]
		if s.Kind == StepPool && s.Role == RoleWorker && s.State == StateRunning {
			workersRunning++
		}
	}
	maxWorkers := u.Options.ConcurrentWorkerPools
	if maxWorkers <= 0 {
		maxWorkers = 1
	}
	failing := u.failing()
	for i := range u.Steps {
		s := &u.Steps[i]
		if s.State != StateDone {
			allDone = false
		}
		switch s.State {
		case StatePending:
			if !depsDone(u, s) || failing {
				continue
			}
			if t, gated := s.Target(); gated {
				if ok, reason := gate.Allow(t); !ok {
					d.block(reason)
					continue
				}
			}
			if s.Kind == StepPool && s.Role == RoleWorker {
				if workersRunning >= maxWorkers {
					continue
				}
				workersRunning++
			}
			d.Actions = append(d.Actions, actStartStep(u, s))
		case StateRunning:
			if s.Kind == StepMolt {
				decideMolt(u, s, now, &d)
				continue
			}
			if s.Kind == StepPool {
				if p, ok := u.Pool(s.Pool); ok && p.BlueGreen != nil {
					decideBlueGreen(u, s, p, now, gate, &d)
				} else if ok {
					decideNodes(u, s, p, now, gate, &d)
				}
				continue
			}
			if s.Kind == StepHealth && s.Attempts > 0 && u.Options.HealthTimeout > 0 {
				// Retry with judgement (SPEC §16): past its deadline the
				// health step fails instead of being tried forever.
				deadline := s.StartedAt.Add(u.Options.HealthTimeout)
				if !now.Before(deadline) {
					d.Actions = append(d.Actions, Action{ID: u.ID + "/fail/" + s.ID, Kind: ActFailStep, Upgrade: u.ID, Step: s.ID})
					continue
				}
				d.wake(deadline)
			}
			if s.Attempts > 0 && now.Before(s.FinishedAt.Add(StepRetryInterval)) {
				d.wake(s.FinishedAt.Add(StepRetryInterval))
				continue
			}
			d.Actions = append(d.Actions, actRunStep(u, s))
		}
	}
	if allDone {
		d.Actions = append(d.Actions, Action{ID: u.ID + "/finish", Kind: ActFinish, Upgrade: u.ID})
		return d
	}
	if len(d.Actions) == 0 && d.Blocked == "" && u.stuck() {
		d.Actions = append(d.Actions, Action{ID: u.ID + "/halt", Kind: ActHalt, Upgrade: u.ID})
		return d
	}
	switch {
	case d.Blocked != "" && u.PauseReason != d.Blocked:
		d.Actions = append(d.Actions, Action{ID: u.ID + "/pause/" + d.Blocked, Kind: ActPause, Upgrade: u.ID, Reason: d.Blocked})
	case d.Blocked == "" && u.PauseReason != "":
		d.Actions = append(d.Actions, Action{ID: u.ID + "/resume", Kind: ActResume, Upgrade: u.ID})
	}
	return d
}

// StepRetryInterval spaces the attempts of a step retried until it passes
// (the final health checks).
const StepRetryInterval = 10 * time.Second

func (d *Decision) block(reason string) {
	if d.Blocked == "" {
		d.Blocked = reason
	}
}

func (d *Decision) wake(t time.Time) {
	if d.NextWake.IsZero() || t.Before(d.NextWake) {
		d.NextWake = t
	}
}

func countState(nodes []NodeTask, st State) int {
	c := 0
	for i := range nodes {
		if nodes[i].State == st {
			c++
		}
	}
	return c
}

// budget is how many more nodes of the pool may start now: at most
// Concurrency under upgrade at once, and never fewer than MinAvailable left
// schedulable. Failed nodes stay cordoned and count as unavailable; with
// a failure budget (StepLayoutGates) they are no longer under upgrade and
// leave their place in Concurrency to the next node, as they did not
// before.
func budget(u *Upgrade, p *PoolTrack) int {
	nodes := u.PoolNodes(p)
	running, failed := 0, 0
	for i := range nodes {
		switch nodes[i].State {
		case StateRunning:
			running++
		case StateFailed:
			failed++
		}
	}
	inFlight := running + failed
	if p.MaxFailedNodes > 0 {
		inFlight = running
	}
	room := p.Concurrency - inFlight
	if avail := len(nodes) - running - failed - p.MinAvailable; avail < room {
		room = avail
	}
	return room
}
