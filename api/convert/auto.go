package convert

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/maintenance/schedule"
)

// UpgradeStatusToAPI renders the scheduler's answer for a cluster.
func UpgradeStatusToAPI(cluster string, s schedule.Status) api.UpgradeStatus {
	out := api.UpgradeStatus{Cluster: cluster, Channel: s.Channel, Current: s.Current.String(), Target: s.Target.String(), Next: s.Next.String(),
		EndOfSupport: s.EndOfSupport, ForcedByEndOfSupport: s.Forced, State: string(s.State), BlockedBy: []api.UpgradeBlock{},
		NextOpportunity: s.NextOpportunity, NextAttempt: s.NextAttempt,
		LastAttempt: conv.Ptr(s.LastAttempt, AutoAttemptToAPI), Sequence: conv.Ptr(s.Sequence, SequenceWaitToAPI), Message: s.Message}
	for _, b := range s.BlockedBy {
		out.BlockedBy = append(out.BlockedBy, api.UpgradeBlock{Kind: string(b.Kind), Name: b.Name, Until: b.Until, Detail: b.Detail})
	}
	return out
}

// AutoAttemptToAPI renders an automatic attempt's record.
func AutoAttemptToAPI(a schedule.Attempt) api.AutoAttempt {
	return api.AutoAttempt{Upgrade: a.Upgrade, From: a.From.String(), To: a.To.String(), Kind: string(a.Kind), Reason: a.Reason,
		EndOfSupport: a.EndOfSupport, StartedAt: a.StartedAt, Outcome: a.Outcome, FinishedAt: a.FinishedAt, Detail: a.Detail}
}

// SequenceWaitToAPI renders where a cluster stands in its rollout
// sequence.
func SequenceWaitToAPI(w schedule.SequenceWait) api.SequenceWait {
	return api.SequenceWait{Sequence: w.Sequence, Stage: w.Stage, Version: w.Version.String(), WaitsFor: w.WaitsFor,
		NotReached: w.NotReached, SoakEnds: w.SoakEnds, Held: w.Held, Failed: w.Failed, HeldStage: w.HeldStage, Bypassed: w.Bypassed}
}

// SequenceVersionToAPI renders how far a version has gone through a
// sequence.
func SequenceVersionToAPI(p schedule.VersionProgress) api.SequenceVersion {
	out := api.SequenceVersion{Version: p.Version.String(), Reached: p.Reached, Stages: make([]api.SequenceStageRun, 0, len(p.Stages))}
	if p.Reached < len(p.Stages) {
		out.Stage = p.Stages[p.Reached].Name
	}
	for _, st := range p.Stages {
		out.Stages = append(out.Stages, api.SequenceStageRun{Name: st.Name, Clusters: nonNil(st.Clusters), NotReached: st.NotReached,
			ReachedAt: st.ReachedAt, SoakEnds: st.SoakEnds, Open: st.Open, Done: st.Done, Held: st.Held, Failed: st.Failed, Skipped: st.Skipped})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
