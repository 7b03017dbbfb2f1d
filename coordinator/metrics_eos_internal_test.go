package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// TestEndOfSupportUpgradeMetric: the gauge says when an end of support
// forces a cluster on no channel (or a channel stuck on its minor) off
// it: the date ahead, the date once due, a backoff's end when later; and
// nothing for a cluster whose end of support forces nothing.
func TestEndOfSupportUpgradeMetric(t *testing.T) {
	v := phases.MustParseVersion
	eos := time.Date(2027, 8, 1, 0, 0, 0, 0, time.UTC)
	cat := schedule.Catalog{Versions: []phases.Version{v("1.32.9"), v("1.33.6")}, EndOfSupport: map[int]time.Time{32: eos},
		Channels: map[string]schedule.Channel{schedule.ChannelStable: {Name: schedule.ChannelStable, Target: v("1.32.9")}}}
	fleet := &schedule.Fleet{Catalog: cat, Clusters: []schedule.Cluster{
		{Name: "manual", Kind: phases.KindStandalone, Channel: schedule.ChannelNone, Current: v("1.32.9")},
		{Name: "stuck", Kind: phases.KindStandalone, Channel: schedule.ChannelStable, Current: v("1.32.9"),
			Auto: schedule.State{Failures: 1, NextAttempt: eos.Add(time.Hour)}},
		{Name: "new", Kind: phases.KindStandalone, Channel: schedule.ChannelNone, Current: v("1.33.6")},
	}}
	at := func(now time.Time) map[string]time.Time {
		out := map[string]time.Time{}
		for _, d := range schedule.Evaluate(fleet, now).Decisions {
			out[d.Cluster] = endOfSupportUpgrade(d.Status)
		}
		return out
	}
	require.Equal(t, map[string]time.Time{"manual": eos, "stuck": eos.Add(time.Hour), "new": {}}, at(eos.Add(-30*24*time.Hour)))
	require.Equal(t, map[string]time.Time{"manual": eos, "stuck": eos.Add(time.Hour), "new": {}}, at(eos))
	fleet.Clusters[0].Upgrade = &schedule.Upgrade{ID: "manual-1", From: v("1.32.9"), To: v("1.33.6"), State: phases.UpgradeRunning, Automatic: true, EndOfSupport: true}
	require.True(t, at(eos)["manual"].IsZero(), "it runs")
}
