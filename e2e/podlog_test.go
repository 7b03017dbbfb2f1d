package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/lab"
	"github.com/stretchr/testify/require"
)

// An outage is printed with the data path's pod changes from
// EvidenceBefore before it to its end: not the pods listed at the start,
// not other pods, nothing outside the window.
func TestPodLogPrintsTheDataPathsChangesBeforeEachOutage(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 3, 32, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	l := &PodLog{started: at(0)}
	for _, c := range []kube.PodChange{
		{At: at(0), Namespace: "kube-system", Name: "coredns-a", Node: "lb-1", What: "added"},             // listed at the start
		{At: at(5), Namespace: "kube-system", Name: "coredns-a", Node: "lb-1", What: "terminating"},       // before the window
		{At: at(31.5), Namespace: "kube-system", Name: "coredns-b", Node: "lb-1", What: "terminating"},    // in
		{At: at(31.6), Namespace: "kube-system", Name: "kube-proxy-x", Node: "cp-1", What: "terminating"}, // in
		{At: at(32), Namespace: "kube-system", Name: "etcd-cp-3", Node: "cp-3", What: "terminating"},      // not on the path
		{At: at(33), Namespace: "other", Name: "echo-z", Node: "worker-1", What: "deleted"},               // not the sample's
		{At: at(38.5), Namespace: "kube-system", Name: "kube-proxy-y", Node: "cp-1", What: "ready"},       // in
		{At: at(40), Namespace: lab.DemoNamespace, Name: "echo-q", Node: "worker-1", What: "terminating"}, // after
	} {
		l.record(c)
	}
	var out bytes.Buffer
	l.PrintEvidence(&out, lab.ProbeReport{Outages: []lab.ProbeOutage{{From: at(36.75), To: at(38.9), Failed: 9}}})
	require.Equal(t, `    outage 03:32:36.750 → 03:32:38.900, 9 failed; the data path's pods from 15s before it:
      03:32:31.500 kube-system/coredns-b on lb-1 terminating
      03:32:31.600 kube-system/kube-proxy-x on cp-1 terminating
      03:32:38.500 kube-system/kube-proxy-y on cp-1 ready
`, out.String())
}

// Past 25 changes, the ones nearest the outage are printed.
func TestPodLogKeepsTheChangesNearestTheOutage(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 3, 32, 0, 0, time.UTC)
	l := &PodLog{started: t0}
	for i := range 30 {
		l.record(kube.PodChange{At: t0.Add(time.Duration(10+i) * 100 * time.Millisecond), Namespace: "kube-system", Name: "kube-proxy-" + string(rune('a'+i)), Node: "cp-1", What: "ready"})
	}
	var out bytes.Buffer
	l.PrintEvidence(&out, lab.ProbeReport{Outages: []lab.ProbeOutage{{From: t0.Add(5 * time.Second), To: t0.Add(6 * time.Second), Failed: 1}}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 27)
	require.Equal(t, "      … 5 earlier", lines[1])
	require.Contains(t, lines[2], "kube-proxy-f ")
	require.Contains(t, lines[26], "kube-proxy-"+string(rune('a'+29))+" ")
}
