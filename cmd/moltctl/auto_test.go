package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestPrintWhy(t *testing.T) {
	at := time.Date(2027, 3, 6, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printWhy(&out, api.UpgradeStatus{Cluster: "shop", Channel: "regular", Current: "1.34.3", Target: "1.34.4", Next: "1.34.4",
		State: api.AutoBlockedExclusion, NextOpportunity: at.Add(7 * 24 * time.Hour),
		BlockedBy: []api.UpgradeBlock{
			{Kind: api.BlockExclusion, Name: "spring-sale", Until: at.Add(3 * 24 * time.Hour), Detail: "maintenance exclusion (no_upgrades)"},
			{Kind: api.BlockWindow, Name: "window", Until: at.Add(7 * 24 * time.Hour), Detail: "outside the maintenance window"},
		},
		LastAttempt: &api.AutoAttempt{Upgrade: "shop-1.34.3-2", From: "1.34.2", To: "1.34.3", StartedAt: at.Add(-7 * 24 * time.Hour), Outcome: "done",
			Reason: "automatic patch upgrade 1.34.2 → 1.34.3: channel regular targets 1.34.3"}})
	require.Equal(t, `cluster shop runs 1.34.3 on channel regular (auto-upgrade target 1.34.4)
BLOCKED-BY-EXCLUSION: 1.34.3 → 1.34.4 is blocked by a maintenance exclusion (and not only that: 2 things hold it, each until its own end)
  held by exclusion spring-sale: maintenance exclusion (no_upgrades), until 2027-03-09T00:00:00Z
  held by window window: outside the maintenance window, until 2027-03-13T00:00:00Z
next opportunity: 2027-03-13T00:00:00Z
last automatic upgrade shop-1.34.3-2 (1.34.2 → 1.34.3, started 2027-02-27T00:00:00Z): done
  why: automatic patch upgrade 1.34.2 → 1.34.3: channel regular targets 1.34.3
`, out.String())

	out.Reset()
	printWhy(&out, api.UpgradeStatus{Cluster: "lab", Current: "1.34.3", State: api.AutoManualOnly})
	require.Contains(t, out.String(), "cluster lab runs 1.34.3 on channel none\nMANUAL-ONLY: upgrades are manual only")
	require.NotContains(t, out.String(), "end of support")

	out.Reset()
	printWhy(&out, api.UpgradeStatus{Cluster: "lab", Current: "1.34.3", Next: "1.35.2", State: api.AutoManualOnly,
		EndOfSupport: at, ForcedByEndOfSupport: true, NextOpportunity: at})
	require.Contains(t, out.String(), "end of support: 1.34.3 → 1.35.2 is forced through maintenance windows and exclusions once 1.34's end of support (2027-03-06T00:00:00Z) has passed\n")
}

// TestPrintWhySequence: a cluster of a rollout sequence says the stage it
// waits for, that stage's clusters not at the version, or when its soak
// ends, or the failure that holds it.
func TestPrintWhySequence(t *testing.T) {
	at := time.Date(2027, 3, 6, 0, 0, 0, 0, time.UTC)
	st := api.UpgradeStatus{Cluster: "prod-eu", Channel: "regular", Current: "1.34.3", Target: "1.34.4", Next: "1.34.4", State: api.AutoWaitingForStage,
		Sequence: &api.SequenceWait{Sequence: "fleet", Stage: "prod", Version: "1.34.4", WaitsFor: "staging", NotReached: []string{"stg-1", "stg-2"}}}
	var out bytes.Buffer
	printWhy(&out, st)
	require.Equal(t, `cluster prod-eu runs 1.34.3 on channel regular (auto-upgrade target 1.34.4)
WAITING-FOR-STAGE: 1.34.3 → 1.34.4 waits for an earlier stage of its rollout sequence
rollout sequence fleet, stage prod, for 1.34.4: waits for stage staging, where stg-1, stg-2 do(es) not run 1.34.4 yet
`, out.String())

	out.Reset()
	st.Sequence.NotReached, st.Sequence.SoakEnds = nil, at
	printWhy(&out, st)
	require.Contains(t, out.String(), "rollout sequence fleet, stage prod, for 1.34.4: waits for stage staging to soak until 2027-03-06T00:00:00Z\n")

	out.Reset()
	st.Sequence.Held, st.Sequence.Failed, st.Sequence.HeldStage = true, []string{"stg-2"}, "staging"
	printWhy(&out, st)
	require.Contains(t, out.String(), "held: the upgrade failed on stg-2 in stage staging; waits until an operator resumes or skips stage staging\n")
}
