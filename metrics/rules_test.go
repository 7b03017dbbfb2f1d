package metrics

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func loadYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, v))
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := testenv.RequireBinary(t, "promtool")
	out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", rulesFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func TestPromtoolTestRules(t *testing.T) {
	promtool := testenv.RequireBinary(t, "promtool")
	out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", rulesTestFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestRulesReferenceExportedMetrics: a rule can never silently read a
// metric that was renamed or removed, or a recording rule nobody defines.
func TestRulesReferenceExportedMetrics(t *testing.T) {
	var rf ruleFile
	loadYAML(t, rulesFile, &rf)
	exported := exportedSeries()
	recorded := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	refs := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, ref := range metricRefs(r.Expr) {
				refs++
				_, ok := exported[ref]
				require.True(t, ok || recorded[ref], "rule %s%s reads %s, which molt does not export", r.Record, r.Alert, ref)
			}
		}
	}
	require.Positive(t, refs)
}

// TestAlertsAreComplete: every alert has a for: duration, a severity, the
// three annotations, and a section in docs/observability.md that its
// runbook_url points to.
func TestAlertsAreComplete(t *testing.T) {
	var rf ruleFile
	loadYAML(t, rulesFile, &rf)
	docs, err := os.ReadFile(observabilityD)
	require.NoError(t, err)
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			require.NotEmpty(t, r.For, r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["description"], r.Alert)
			require.True(t, strings.HasSuffix(r.Annotations["runbook_url"], "/docs/observability.md#"+strings.ToLower(r.Alert)), r.Alert)
			require.Contains(t, string(docs), "\n### "+r.Alert+"\n", "docs/observability.md has no section for %s", r.Alert)
		}
	}
	require.GreaterOrEqual(t, alerts, 8)
}

// TestEveryAlertHasFiringAndQuietCase reads the promtool unit tests and
// requires, for each alert, one evaluation that expects it to fire and one
// that expects it not to.
func TestEveryAlertHasFiringAndQuietCase(t *testing.T) {
	var rf ruleFile
	loadYAML(t, rulesFile, &rf)
	var tf ruleTestFile
	loadYAML(t, rulesTestFile, &tf)
	require.Equal(t, []string{"molt-alerts.yml"}, tf.RuleFiles)

	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				firing[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
				require.True(t, firing[r.Alert], "%s has no firing test case", r.Alert)
				require.True(t, quiet[r.Alert], "%s has no non-firing test case", r.Alert)
			}
		}
	}
	for name := range firing {
		require.True(t, slices.Contains(alerts, name), "test case for unknown alert %s", name)
	}
	for _, want := range []string{
		"MoltUpgradeStepStuck", "MoltNodeUpgradeFailed", "MoltDrainTimedOut", "MoltAgentMissing",
		"MoltRaftNoLeader", "MoltRaftFrequentLeaderChanges", "MoltVersionSkewViolation", "MoltMinorPastEndOfSupport",
	} {
		require.Contains(t, alerts, want)
	}
}

func TestMetricRefs(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`molt_agent_missing == 1`, []string{"molt_agent_missing"}},
		{`sum by (cluster) (rate(molt_drain_duration_seconds_bucket{cluster=~"$cluster",x="molt_fake"}[5m]))`,
			[]string{"molt_drain_duration_seconds_bucket"}},
		{`molt:upgrade_step_running_seconds > on (cluster, step) clamp_min(2 * molt_upgrade_step_expected_duration_seconds, 3600)`,
			[]string{"molt:upgrade_step_running_seconds", "molt_upgrade_step_expected_duration_seconds"}},
		{`time() - up`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			require.Equal(t, tt.want, metricRefs(tt.expr))
		})
	}
}

// TestEndOfSupportClaimsOnlyTheMinor: the end-of-support gauge is
// computed from the minor's end of support and the maintenance policy
// alone (coordinator clusterMetrics); the catalog marks no release as a
// security fix, so neither the gauge's help, nor its alert, nor the docs
// may say it reports a blocked security patch.
func TestEndOfSupportClaimsOnlyTheMinor(t *testing.T) {
	require.NotContains(t, lookup(ClusterBlockedPastEOS).Help, "security")
	for _, f := range []string{rulesFile, rulesTestFile} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(b), "security patch", f)
	}
	docs, err := os.ReadFile(observabilityD)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(docs), "### MoltMinorPastEndOfSupport")
	require.True(t, ok)
	section, _, _ = strings.Cut(section, "\n### ")
	require.NotContains(t, section, "keeps it from a required security patch")
	require.Contains(t, section, "Neither the gauge nor this alert knows of security patches")
}
