package metrics

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsListEveryMetric: docs/observability.md has a table row for every
// exported metric with its type and labels, and none for a metric that is
// gone.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile(observabilityD)
	require.NoError(t, err)
	docs := string(b)
	for _, m := range Catalog() {
		row := "| `" + m.Name + "` | " + string(m.Type) + " | " + strings.Join(m.Labels, ", ") + " |"
		require.Contains(t, docs, row, "docs/observability.md lacks or misdescribes %s", m.Name)
	}
	exported := exportedSeries()
	for _, line := range strings.Split(docs, "\n") {
		if name, ok := strings.CutPrefix(line, "| `molt_"); ok {
			name = "molt_" + name[:strings.Index(name, "`")]
			_, isSeries := exported[name]
			require.True(t, isSeries || exported[name+"_count"].Name == name, "docs list unknown metric %s", name)
		}
	}
}
