package metrics

import (
	"regexp"
	"strings"
)

// Paths of the shipped artifacts, relative to this package.
const (
	rulesFile      = "../deploy/prometheus/molt-alerts.yml"
	rulesTestFile  = "../deploy/prometheus/molt-alerts.test.yml"
	dashboardFile  = "../deploy/grafana/molt-upgrades.json"
	observabilityD = "../docs/observability.md"
)

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricRefs returns the molt metric names a PromQL expression reads, found
// loosely: identifiers outside string literals that start with "molt_" or
// contain a colon (recording rules). Label names never start with "molt_",
// so this is precise enough to catch a misspelt or removed metric without a
// PromQL parser.
func metricRefs(expr string) []string {
	var out []string
	for _, id := range identifier.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		if strings.HasPrefix(id, "molt_") || strings.Contains(id, ":") {
			out = append(out, id)
		}
	}
	return out
}

// exportedSeries maps every series name molt exports (histograms by their
// _bucket, _sum and _count series) to its catalog entry.
func exportedSeries() map[string]Info {
	out := map[string]Info{}
	for _, m := range Catalog() {
		if m.Type == Histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[m.Name+suffix] = m
			}
			continue
		}
		out[m.Name] = m
	}
	return out
}
