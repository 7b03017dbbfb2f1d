package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/lab"
)

// A PodLog records, while an upgrade runs, every change of the pods that
// the workload probes' requests pass through — CoreDNS, kube-proxy, the
// data-plane load balancer's HAProxy and the sample Deployment — so each
// outage a probe saw is printed with what those pods did just before it:
// a failure is named with its evidence, whoever caused it.
type PodLog struct {
	cancel  context.CancelFunc
	started time.Time

	mu      sync.Mutex
	changes []kube.PodChange
}

// dataPathPods are the name prefixes of the pods a probe's request meets
// (lab.WorkloadProbes), in kube-system and the sample namespace.
var dataPathPods = []string{"coredns-", "kube-proxy-", "haproxy-", lab.DemoDeploy + "-"}

// EvidenceBefore is how far before an outage the PodLog looks: past the
// grace of the pods serving the probes (lab.ServingGrace), since a pod
// evicted that long before is the one that stops serving.
const EvidenceBefore = lab.ServingGrace + 5*time.Second

// StartPodLog starts watching the lab's pods; Stop ends it.
func (e *Env) StartPodLog(ctx context.Context) (*PodLog, error) {
	kc, err := e.Lab.KubeForWatches()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &PodLog{cancel: cancel}
	if err := kc.WatchPods(ctx, "", l.record); err != nil {
		cancel()
		return nil, err
	}
	l.mu.Lock()
	l.started = time.Now()
	l.mu.Unlock()
	return l, nil
}

func (l *PodLog) record(c kube.PodChange) {
	if c.Namespace != "kube-system" && c.Namespace != lab.DemoNamespace {
		return
	}
	for _, p := range dataPathPods {
		if strings.HasPrefix(c.Name, p) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.changes = append(l.changes, c)
			return
		}
	}
}

// Stop ends the watch.
func (l *PodLog) Stop() { l.cancel() }

// Around returns the changes from EvidenceBefore before o until its end,
// leaving out the pods that were there when the log started.
func (l *PodLog) Around(o lab.ProbeOutage) []kube.PodChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kube.PodChange
	for _, c := range l.changes {
		initial := c.What == "added" && !c.At.After(l.started)
		if !initial && !c.At.Before(o.From.Add(-EvidenceBefore)) && !c.At.After(o.To) {
			out = append(out, c)
		}
	}
	return out
}

// PrintEvidence writes, under a probe's summary, each of its outages with
// the data-path pod changes around it (at most maxOutages outages, and
// the maxChanges nearest each).
func (l *PodLog) PrintEvidence(out io.Writer, r lab.ProbeReport) {
	const maxOutages, maxChanges = 10, 25
	for i, o := range r.Outages {
		if i == maxOutages {
			fmt.Fprintf(out, "    … and %d more outages\n", len(r.Outages)-maxOutages)
			return
		}
		fmt.Fprintf(out, "    outage %s → %s, %d failed; the data path's pods from %s before it:\n",
			o.From.UTC().Format("15:04:05.000"), o.To.UTC().Format("15:04:05.000"), o.Failed, EvidenceBefore)
		changes := l.Around(o)
		if len(changes) == 0 {
			fmt.Fprintln(out, "      no change")
		}
		// The nearest the outage matter most: the earliest are left out.
		if n := len(changes); n > maxChanges {
			fmt.Fprintf(out, "      … %d earlier\n", n-maxChanges)
			changes = changes[n-maxChanges:]
		}
		for _, c := range changes {
			fmt.Fprintf(out, "      %s\n", c)
		}
	}
}
