package etcdgate

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Member is what one member said at one sample: its entry in the member
// list and, when it answered, its status.
type Member struct {
	ID uint64
	// Name is empty while the member has not started (etcd lists a member
	// added but never started without a name).
	Name string
	// Err is why its status could not be read ("" when it answered).
	Err string
	// Alarms are the errors its status reports (NOSPACE, CORRUPT, ...).
	Alarms []string
	// Leader is the member it follows (its own ID when it leads); 0: none.
	Leader uint64
	// RaftIndex is its last log index, AppliedIndex the last one applied.
	RaftIndex, AppliedIndex uint64
	// Version is the member's server version ("3.6.4").
	Version   string
	IsLearner bool
}

// Sample is the cluster as the agent saw it at one time.
type Sample struct {
	Time    time.Time
	Members []Member
}

// Decision is the gate's verdict on a sample.
type Decision struct {
	Pass bool
	// Reason names the rule broken and the member that broke it ("member
	// cp-2 raft index behind: applied 1200 < leader's 1250 at the previous
	// sample"); on a pass it describes the cluster.
	Reason string
}

// Decide judges cur against the member count before the node's upgrade
// (want; 0: not known, not checked) and the previous sample (prev; nil for
// the first). The raft rule needs two samples: a member follows when it
// has applied at least the index the leader had at the previous sample,
// so a member that restarted and is still replaying or catching up holds
// the gate, while an idle cluster (no new entries) passes.
func Decide(want int, prev *Sample, cur Sample) Decision {
	if len(cur.Members) == 0 {
		return hold("no etcd member listed")
	}
	if want > 0 && len(cur.Members) != want {
		return hold("member count %d, was %d before this node's upgrade", len(cur.Members), want)
	}
	leaders := map[uint64]bool{}
	for _, m := range cur.Members {
		switch {
		case m.Name == "":
			return hold("member %x not started", m.ID)
		case m.IsLearner:
			return hold("member %s is a learner", m.Name)
		case m.Err != "":
			return hold("member %s unhealthy: %s", m.Name, m.Err)
		case len(m.Alarms) > 0:
			return hold("member %s unhealthy: %s", m.Name, strings.Join(m.Alarms, ", "))
		case m.Leader == 0:
			return hold("member %s has no leader", m.Name)
		}
		leaders[m.Leader] = true
	}
	if len(leaders) != 1 {
		return hold("%d leaders seen (members disagree)", len(leaders))
	}
	var leader uint64
	for id := range leaders {
		leader = id
	}
	i := slices.IndexFunc(cur.Members, func(m Member) bool { return m.ID == leader })
	if i < 0 {
		return hold("leader %x is not a member", leader)
	}
	if prev == nil {
		return hold(firstSampleReason)
	}
	mark := leaderIndex(*prev)
	if mark == 0 {
		return hold("previous sample had no leader index")
	}
	for _, m := range cur.Members {
		if was := memberIndex(*prev, m.ID); was > m.RaftIndex {
			return hold("member %s raft index went back: %d < %d", m.Name, m.RaftIndex, was)
		}
		if m.AppliedIndex < mark {
			return hold("member %s raft index behind: applied %d < leader's %d at the previous sample", m.Name, m.AppliedIndex, mark)
		}
	}
	return Decision{Pass: true, Reason: fmt.Sprintf("%d members healthy and started, leader %s, raft index %d", len(cur.Members), cur.Members[i].Name, cur.Members[i].RaftIndex)}
}

func hold(format string, args ...any) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// leaderIndex is the raft index of the member the sample's members follow.
func leaderIndex(s Sample) uint64 {
	for _, m := range s.Members {
		if m.Leader != 0 && m.Leader == m.ID {
			return m.RaftIndex
		}
	}
	return 0
}

func memberIndex(s Sample, id uint64) uint64 {
	for _, m := range s.Members {
		if m.ID == id {
			return m.RaftIndex
		}
	}
	return 0
}

// firstSampleReason holds the first sample of every watch.
const firstSampleReason = "first sample: the raft index is judged against the next one"
