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
		LastAttempt: conv.Ptr(s.LastAttempt, AutoAttemptToAPI), Message: s.Message}
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
