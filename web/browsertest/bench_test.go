package browsertest

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/agenttest"
)

// BenchmarkClusterView15k opens the page of a 15,000-node cluster whose
// upgrade runs (one control-plane node and 14,999 workers; preflight
// passed; the control-plane node in flight) in Chromium, from a fresh
// document each time, and reports:
//   - first-render-ms: from navigation start to the page's mark
//     "molt:cluster-rendered", set when the summary, steps, pools and the
//     first page of nodes are in the DOM;
//   - fcp-ms: Chromium's first contentful paint;
//   - page-bytes: everything the page transferred (HTML, CSS, JS, the
//     API's answers) by the Resource Timing API's transferSize;
//   - api-bytes: of which the API's answers;
//   - refresh-ms: one later poll of the page (fetch, parse, render).
//
// The agents are simulated in process (the coordinator's own Register,
// Heartbeat, PollOperations and ReportResult, no HTTPS): the benchmark
// is about the view, not about 15,000 TLS clients.
func BenchmarkClusterView15k(b *testing.B) {
	requireChromium(b)
	n := 15000
	if s := os.Getenv("MOLT_BENCH_NODES"); s != "" { // a smaller cluster, to try the benchmark out
		n, _ = strconv.Atoi(s)
	}
	m := startMember(b, func(cfg *coordinator.Config) {
		cfg.MissingAfter = time.Hour // agents beat once
		cfg.TickInterval = coordinator.DefaultConfig().TickInterval
	})
	m.do(b, http.MethodPut, "/v1/releases/1.33.6", release("1.33.6"), nil)
	m.do(b, http.MethodPut, "/v1/releases/1.34.4", release("1.34.4"), nil)
	spec := api.ClusterSpec{Name: "big", Kind: api.ClusterStandalone, Version: "1.33.6", Kubeconfig: "apiVersion: v1\nkind: Config\n",
		Pools: []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: fmtNodes("cp", 1)}, {Name: "workers", Role: api.RoleWorker, Nodes: fmtNodes("w", n-1)}}}
	m.do(b, http.MethodPut, "/v1/clusters/big", spec, nil)
	nodes := nodeNames(spec)
	ctx := context.Background()
	t0 := time.Now()
	parallel(nodes, 32, func(node string) {
		_, err := m.c.Register(ctx, api.RegisterRequest{Cluster: "big", Node: node, Address: node + ":7443"})
		if err == nil {
			err = m.c.Heartbeat(ctx, api.AgentHealth{Cluster: "big", Node: node, Time: time.Now(), Kubelet: api.ComponentHealth{Healthy: true, Version: "v1.33.6"}, Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}})
		}
		if err != nil {
			b.Error(err)
		}
	})
	require.False(b, b.Failed())
	b.Logf("setup: %d agents registered in %s", n, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	var u api.Upgrade
	_, err := m.client("").Do(ctx, http.MethodPost, "/v1/clusters/big/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(b, err)
	// Answer the preflight's host checks until the upgrade runs.
	prefix := "preflight-" + u.Preflight + "-"
	for round := 0; ; round++ {
		require.Less(b, round, 100, "preflight never finished")
		var answered atomic.Int64
		parallel(nodes, 32, func(node string) {
			ops, err := m.c.PollOperations(ctx, "big", node, 0)
			if err != nil {
				return
			}
			for _, op := range ops {
				if strings.HasPrefix(op.ID, prefix) {
					_ = m.c.ReportResult(ctx, "big", node, api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Details: agenttest.HealthyDetails(op)})
					answered.Add(1)
				}
			}
		})
		cur, err := m.c.Cluster("big")
		require.NoError(b, err)
		if st := cur.Status.Upgrade.State; st != api.UpgradePreflight {
			require.Equal(b, api.UpgradeRunning, st, "refused: %v", cur.Status.Upgrade.RefusedChecks)
			break
		}
		if answered.Load() == 0 {
			time.Sleep(100 * time.Millisecond) // the leader's tick offers the checks
		}
	}
	b.Logf("setup: preflight passed, upgrade running in %s", time.Since(t0).Round(time.Millisecond))
	token := m.token(b, "viewer")
	browser := newBrowser(b, m)
	tab := newTab(b, browser)
	base := "https://" + m.addr
	run(b, tab, "sign in", chromedp.Navigate(base+"/ui/"))
	waitJS(b, tab, "the sign-in form", `document.activeElement && document.activeElement.id === 'token'`)
	run(b, tab, "type the token", chromedp.KeyEvent(token+"\r"))
	waitJS(b, tab, "signed in", `!document.getElementById('who').hidden`)

	// A sub-benchmark, so that the setup above runs once: a benchmark
	// that calls Run is itself run once.
	b.Run("open", func(b *testing.B) { openView(b, tab, base, n) })
}

// viewSample is what one opening of the page measured.
type viewSample struct {
	Render, FCP, Refresh float64
	Page, API            float64
	Nodes                int
}

// openView opens the cluster's page b.N times and reports the means.
func openView(b *testing.B, tab context.Context, base string, n int) {
	var sum viewSample
	for i := 0; i < b.N; i++ {
		run(b, tab, "open the cluster", chromedp.Navigate(base+"/ui/#/clusters/big"))
		// A second navigation to the same URL with a hash only would not
		// load the document again; reload does.
		run(b, tab, "reload", chromedp.Reload())
		waitJS(b, tab, "the first render", `performance.getEntriesByName('molt:cluster-rendered').length > 0 && !!document.querySelector('#nodes tbody tr')`)
		waitJS(b, tab, "a later refresh", `window.moltUI.stats.refreshes >= 2`)
		s := eval[viewSample](b, tab, `(() => {
			const res = performance.getEntriesByType('resource');
			const nav = performance.getEntriesByType('navigation')[0];
			const fcp = performance.getEntriesByType('paint').find(p => p.name === 'first-contentful-paint');
			const api = res.filter(r => new URL(r.name).pathname.startsWith('/v1/'));
			const first = {};
			for (const r of api) { const p = new URL(r.name).pathname + new URL(r.name).search; if (!(p in first)) first[p] = r.transferSize; }
			return {
				Render: performance.getEntriesByName('molt:cluster-rendered')[0].startTime,
				FCP: fcp ? fcp.startTime : 0,
				Refresh: window.moltUI.stats.lastRefreshMs,
				Page: nav.transferSize + res.filter(r => !new URL(r.name).pathname.startsWith('/v1/')).reduce((n, r) => n + r.transferSize, 0) + Object.values(first).reduce((n, x) => n + x, 0),
				API: Object.values(first).reduce((n, x) => n + x, 0),
				Nodes: document.querySelectorAll('#nodes tbody tr').length,
			};
		})()`)
		require.Equal(b, 50, s.Nodes, "the first page of nodes")
		sum.Render += s.Render
		sum.FCP += s.FCP
		sum.Refresh += s.Refresh
		sum.Page += s.Page
		sum.API += s.API
	}
	b.StopTimer()
	screenshot(b, tab, "cluster-15k")
	f := float64(b.N)
	b.ReportMetric(sum.Render/f, "first-render-ms")
	b.ReportMetric(sum.FCP/f, "fcp-ms")
	b.ReportMetric(sum.Refresh/f, "refresh-ms")
	b.ReportMetric(sum.Page/f, "page-bytes")
	b.ReportMetric(sum.API/f, "api-bytes")
	b.Logf("%d nodes: first render %.0f ms, first contentful paint %.0f ms, a refresh %.0f ms, %0.f bytes transferred (%.0f of them the API's answers)",
		n, sum.Render/f, sum.FCP/f, sum.Refresh/f, sum.Page/f, sum.API/f)
}

// parallel calls f for every item, at most width at a time.
func parallel(items []string, width int, f func(string)) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() { defer wg.Done(); defer func() { <-sem }(); f(it) }()
	}
	wg.Wait()
}
