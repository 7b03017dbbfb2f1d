package metrics

import "time"

// Histogram buckets, in seconds, chosen for what each histogram times.
var (
	// nodeUpgradeBuckets span a quick in-place kubelet swap (tens of
	// seconds) to a node that waited the full 20-minute drain and then
	// its operations: up to two hours, finer around 5–30 minutes where
	// most nodes land.
	nodeUpgradeBuckets = []float64{30, 60, 120, 300, 600, 900, 1200, 1500, 1800, 2700, 3600, 5400, 7200}
	// drainBuckets span an empty node (seconds) to the 20-minute default
	// timeout (SPEC §6) and beyond, for operators who raise it up to the
	// 1-hour grace cap.
	drainBuckets = []float64{5, 15, 30, 60, 120, 300, 600, 900, 1200, 1260, 1800, 3600}
	// raftCommitBuckets span a local single-member commit (sub-millisecond
	// fsync on SSD) to a slow quorum across sites.
	raftCommitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	// agentOperationBuckets span a peer probe (under a second) to a large
	// image import or a static-pod upgrade waiting for pods (many minutes).
	agentOperationBuckets = []float64{0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800}
)

// unixSeconds is t as fractional Unix seconds, the unit of *_timestamp_seconds.
func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
