package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/memory"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// page is one browser tab on the member, signed in or not.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func (p *page) open(hash string) {
	p.t.Helper()
	run(p.t, p.ctx, "open "+hash, chromedp.Navigate(p.base+"/ui/"+hash))
}

func (p *page) go_(hash string) {
	p.t.Helper()
	eval[any](p.t, p.ctx, fmt.Sprintf(`location.hash = %s; null`, js(hash)))
}

func (p *page) wait(what, expr string) { p.t.Helper(); waitJS(p.t, p.ctx, what, expr) }

// click clicks the element sel names. The page re-renders its regions as
// it polls the API, so the node found may be replaced before the click
// lands ("Could not find node with given id"): then it is found again.
func (p *page) click(sel string) {
	p.t.Helper()
	var err error
	for range 5 {
		p.wait(sel, fmt.Sprintf(`!!document.querySelector(%s)`, js(sel)))
		ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Could not find node") {
			break
		}
	}
	require.NoError(p.t, err, "click "+sel)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p.t, p.ctx, fmt.Sprintf(`(document.querySelector(%s) || {}).innerText || ''`, js(sel)))
}

// confirm waits for the confirmation dialog, checks that it says what
// will happen, and answers it.
func (p *page) confirm(says string, yes bool) {
	p.t.Helper()
	p.wait("the confirmation dialog", `document.getElementById('confirm').open`)
	body := p.text("#confirm")
	require.Contains(p.t, body, says, "the confirmation names what will happen")
	if yes {
		run(p.t, p.ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm-yes")))
	} else {
		run(p.t, p.ctx, "escape", chromedp.KeyEvent("\x1b"))
	}
	p.wait("the dialog closed", `!document.getElementById('confirm').open`)
}

func (p *page) shot(name string) { p.t.Helper(); screenshot(p.t, p.ctx, name) }

// signIn types the token into the sign-in form and presses Enter; with
// shot, it saves a screenshot of the form first.
func (p *page) signIn(token, shot string) {
	p.t.Helper()
	p.open("")
	p.wait("the sign-in form", `document.activeElement && document.activeElement.id === 'token'`)
	if shot != "" {
		p.shot(shot)
	}
	run(p.t, p.ctx, "type the token", chromedp.KeyEvent(token+"\r"))
	p.wait("signed in", `!document.getElementById('who').hidden`)
	eval[any](p.t, p.ctx, `window.moltUI.setPollInterval(150); null`)
}

func sel(attr, v string) string { return fmt.Sprintf(`[%s=%q]`, attr, v) }

// state is the data-state of the element sel selects, "" when absent.
func state(sel string) string {
	return fmt.Sprintf(`((document.querySelector(%s) || {dataset: {}}).dataset.state || '')`, js(sel))
}

func isState(sel, want string) string { return fmt.Sprintf(`%s === %s`, state(sel), js(want)) }

// TestWebView drives the web view in Chromium against a real member with
// simulated agents: sign-in by keyboard, a live upgrade that advances as
// agents finish their nodes, a dry run, a pool cancelled and resumed, a
// viewer refused, a failed node retried, a blue/green pool completed,
// the maintenance calendar, preflight runs and the audit log (refused to
// the operator, read by an admin); a screenshot of each page lands in bin/web/.
func TestWebView(t *testing.T) {
	requireChromium(t)
	mem := memory.New(memory.Options{Templates: []string{"base-1-33-6"}, ListsToRun: 2})
	require.NoError(t, mem.CreateGroup(context.Background(), cloud.GroupRef{Zone: "zone-a", Name: "bg-a"}, "base-1-33-6", 2, "setup/bg-a"))
	mem.Advance()
	m := startMember(t, func(cfg *coordinator.Config) {
		cfg.Clouds = clouds{mem}
		cfg.InstancePoll = 5 * time.Millisecond
		cfg.CloudRetryInterval = 50 * time.Millisecond
	})
	m.do(t, http.MethodPut, "/v1/releases/1.33.6", release("1.33.6"), nil)
	m.do(t, http.MethodPut, "/v1/releases/1.34.4", release("1.34.4"), nil)
	two := 2
	spec := api.ClusterSpec{Name: "lab", Kind: api.ClusterStandalone, Version: "1.33.6", Channel: "regular", Kubeconfig: "apiVersion: v1\nkind: Config\n",
		Pools: []api.Pool{
			{Name: "cplb", Role: api.RoleControlPlaneLB, Nodes: fmtNodes("cplb", 1)},
			{Name: "cp", Role: api.RoleControlPlane, Nodes: fmtNodes("cp", 3)},
			{Name: "lb", Role: api.RoleLoadBalancer, Nodes: fmtNodes("lb", 1)},
			// A failure budget of 2: the failed node the test retries does
			// not fail the pool (and with it the upgrade).
			{Name: "workers", Role: api.RoleWorker, Nodes: fmtNodes("worker", 3), Settings: api.UpgradeSettings{MaxFailedNodes: &two}},
		}}
	m.do(t, http.MethodPut, "/v1/clusters/lab", spec, nil)
	// A window on Saturdays and Sundays, 00:00-12:00 UTC, a minor-upgrade
	// freeze and a short no-upgrades exclusion ahead.
	day := 24 * time.Hour
	today := time.Now().UTC().Truncate(day)
	sat := today
	for sat.Weekday() != time.Saturday {
		sat = sat.Add(-day)
	}
	policy := api.MaintenancePolicy{
		Window: &api.MaintenanceWindow{Start: sat.Add(-7 * day), End: sat.Add(-7*day + 12*time.Hour), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"},
		Exclusions: []api.MaintenanceExclusion{
			{Name: "year-end-freeze", Start: today.Add(20 * day), End: today.Add(27 * day), Scope: string(maintenance.ScopeNoMinorUpgrades)},
			{Name: "launch", Start: today.Add(9*day + 6*time.Hour), End: today.Add(10*day + 18*time.Hour), Scope: string(maintenance.ScopeNoUpgrades)},
		},
	}
	m.do(t, http.MethodPut, "/v1/clusters/lab/maintenance-policy", policy, nil)
	m.do(t, http.MethodPut, "/v1/clusters/edge", api.ClusterSpec{Name: "edge", Kind: api.ClusterStandalone, Version: "1.34.4",
		Pools: []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: fmtNodes("edge-cp", 1)}}}, nil)
	one := 1
	m.do(t, http.MethodPut, "/v1/clusters/cloudy", api.ClusterSpec{Name: "cloudy", Kind: api.ClusterStandalone, Version: "1.33.6", Kubeconfig: "apiVersion: v1\nkind: Config\n",
		Cloud: &api.CloudSpec{Provider: phases.CloudMemory},
		Pools: []api.Pool{
			{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cloudy-cp-1", Address: "10.0.0.1"}}},
			{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG, Groups: []api.InstanceGroup{{Zone: "zone-a", Name: "bg-a"}},
				Settings: api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{
					StandardRolloutPolicy: &api.StandardRolloutPolicy{BatchNodeCount: &one}, NodePoolSoakDuration: "3600s"}}},
		}}, nil)

	labAgents := startAgents(t, m, "lab", nodeNames(spec), true)
	var cloudy api.Cluster
	m.do(t, http.MethodGet, "/v1/clusters/cloudy", nil, &cloudy)
	cloudyNodes := nodeNames(cloudy.Spec)
	startAgents(t, m, "cloudy", cloudyNodes, false)
	operator, viewer := m.token(t, "operator"), m.token(t, "viewer")

	browser := newBrowser(t, m)
	op := &page{t: t, ctx: newTab(t, browser), base: "https://" + m.addr}

	t.Run("sign in", func(t *testing.T) {
		op.t = t
		op.signIn(operator, "sign-in")
		op.wait("the fleet", `!!document.querySelector('[data-cluster="lab"]') && !!document.querySelector('[data-cluster="cloudy"]')`)
		require.Contains(t, op.text("#who"), "operator in the browser")
		require.Equal(t, "0 0 true", eval[string](t, op.ctx, `localStorage.length + ' ' + sessionStorage.length + ' ' + (document.cookie === '')`),
			"nothing in the page's storage; the session cookie is HttpOnly")
		// The coordinator serves upgrade-status: each cluster's row says why
		// it is (not) upgrading on its own (lab follows channel regular, which
		// names no target).
		op.wait("the why column", `[...document.querySelectorAll('th')].some(th => th.innerText.includes('Why'))`)
		op.wait("lab's why", `(document.querySelector('[data-cluster="lab"]') || {innerText: ''}).innerText.includes('up-to-date')`)
		// The coordinator's members, each with the molt it runs.
		op.wait("the members", `!!document.querySelector('[data-member="m1"]')`)
		require.Contains(t, op.text(`[data-member="m1"]`), version.Version)
		require.Contains(t, op.text(`[data-member="m1"]`), "leader")
		op.shot("fleet")
	})

	t.Run("dry run", func(t *testing.T) {
		op.t = t
		op.click(`a[href="#/clusters/lab"]`)
		op.wait("the target versions", `document.querySelector('#target-version') && document.querySelector('#target-version').value === '1.34.4'`)
		op.click("#plan-btn")
		op.confirm("Nothing changes", true)
		op.wait("the plan", `document.querySelectorAll('#plan li').length >= 5`)
		require.Contains(t, op.text("#plan"), "Disruption:")
		require.Contains(t, op.text("#plan-view"), "maintenance window is open")
		op.shot("cluster-plan")
	})

	t.Run("a live upgrade advances", func(t *testing.T) {
		op.t = t
		op.click("#start-btn")
		op.confirm("from 1.33.6 to 1.34.4", true)
		op.wait("the control-plane LB pool running", isState(sel("data-step", "pool/cplb"), "running"))
		op.wait("its node running", isState(`tr[data-node="cplb-1"]`, "running"))
		op.wait("its agent's molt", `(document.querySelector('tr[data-node="cplb-1"]') || {innerText: ''}).innerText.includes('molt `+version.Version+`')`)
		require.Equal(t, "pending", eval[string](t, op.ctx, state(sel("data-step", "pool/cp"))))
		// A keyboard user on the control plane's Cancel button keeps the
		// focus there while the pools are redrawn.
		eval[any](t, op.ctx, `document.querySelector('button[data-action="cancel"][data-pool="cp"]').focus(); null`)
		labAgents.release("cplb-1")
		op.wait("the LB pool done", isState(sel("data-step", "pool/cplb"), "done"))
		op.wait("the control plane running", isState(sel("data-step", "pool/cp"), "running"))
		require.Equal(t, "cancel cp", eval[string](t, op.ctx, `(document.activeElement.dataset.action || '') + ' ' + (document.activeElement.dataset.pool || '')`), "the focus survives the redraw")
		op.wait("cp-1 running", isState(`tr[data-node="cp-1"]`, "running"))
		labAgents.release("cp-1", "cp-2", "cp-3", "lb-1")
		op.wait("the control plane done", isState(sel("data-step", "pool/cp"), "done"))
		op.wait("the worker pool running", isState(sel("data-step", "pool/workers"), "running"))
		op.wait("worker-1 running", isState(`tr[data-node="worker-1"]`, "running"))
		require.Equal(t, "pending", eval[string](t, op.ctx, state(`tr[data-node="worker-2"]`)), "one worker at a time")
		// Progress as the coordinator reads it: the node's step (its
		// agent holds its containerd upgrade) and the forecast of the end,
		// what is left on the coordinator's clock.
		op.wait("worker-1's step", `document.querySelector('tr[data-node="worker-1"]').innerText.includes('upgrade containerd')`)
		op.wait("the coordinator's forecast", `!!document.querySelector('#forecast[data-end]') && Number(document.querySelector('#forecast').dataset.leftMs) > 0 && document.querySelector('#forecast').innerText.includes(' left (')`)
		var u api.Upgrade
		m.do(t, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &u)
		require.NotNil(t, u.Forecast, "the coordinator forecasts the running upgrade")
		op.shot("cluster-upgrading")
	})

	t.Run("cancel a pool", func(t *testing.T) {
		op.t = t
		cancelBtn := `button[data-action="cancel"][data-pool="workers"]`
		op.click(cancelBtn)
		op.confirm("already started finish", false) // Escape: nothing happens
		op.click(cancelBtn)
		op.confirm("already started finish", true)
		op.wait("accepted", `!!document.querySelector('#action-result .ok-note')`)
		op.wait("the pool marked cancelled", `document.querySelector('[data-pool="workers"].card').innerText.includes('cancel requested')`)
		labAgents.release("worker-1")
		op.wait("the pool step cancelled", isState(sel("data-step", "pool/workers"), "cancelled"))
		op.wait("worker-1 done", isState(`tr[data-node="worker-1"]`, "done"))
		require.Equal(t, "pending", eval[string](t, op.ctx, state(`tr[data-node="worker-2"]`)), "nothing new started")
		op.shot("cluster-pool-cancelled")
	})

	t.Run("a viewer is refused", func(t *testing.T) {
		v := &page{t: t, ctx: newTab(t, browser), base: op.base}
		v.signIn(viewer, "")
		v.go_("#/clusters/lab")
		v.click(`button[data-action="resume"][data-pool="workers"]`)
		v.confirm("goes on", true)
		v.wait("the API's problem", `!!document.querySelector('#action-result .problem[data-rule="role-operator"]')`)
		require.Contains(t, v.text("#action-result"), "role viewer, needs operator")
		require.Equal(t, "cancelled", eval[string](t, v.ctx, state(sel("data-step", "pool/workers"))))
		var u api.Upgrade
		m.do(t, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &u)
		require.True(t, u.Pools[len(u.Pools)-1].Cancelled, "the viewer changed nothing")
		v.shot("cluster-viewer-refused")
	})

	t.Run("resume, a failed node, retry", func(t *testing.T) {
		op.t = t
		labAgents.failNext("worker-2")
		labAgents.release("worker-2")
		op.click(`button[data-action="resume"][data-pool="workers"]`)
		op.confirm("goes on", true)
		op.wait("worker-2 failed", isState(`tr[data-node="worker-2"]`, "failed"))
		require.Contains(t, op.text(`tr[data-node="worker-2"]`), "kubelet did not come back healthy")
		op.shot("cluster-node-failed")
		// Below its failure budget the pool goes on with worker-3; a retry
		// of worker-2 finds room once worker-3 is done (one node at once).
		labAgents.release("worker-3")
		op.wait("worker-3 done", isState(`tr[data-node="worker-3"]`, "done"))
		op.click(`button[data-action="retry"][data-node="worker-2"]`)
		op.confirm("attempt 2", true)
		op.wait("the upgrade done", `document.querySelector('#upgrade [data-state]').dataset.state === 'done'`)
		op.wait("status.version", `document.querySelector('#current-version').innerText === '1.34.4'`)
		op.shot("cluster-done")
	})

	t.Run("blue/green phases and complete", func(t *testing.T) {
		op.t = t
		op.go_("#/clusters/cloudy")
		// The form is drawn before the cluster's versions arrive: wait
		// for them, or the confirmation names "?" (seen under -race).
		op.wait("cloudy's versions", `document.querySelector('#current-version') && document.querySelector('#current-version').innerText === '1.33.6' && document.querySelector('#target-version') && document.querySelector('#target-version').value === '1.34.4'`)
		op.click("#start-btn")
		op.confirm("cloudy from 1.33.6 to 1.34.4", true)
		op.wait("the pool soaking", `!!document.querySelector('[data-pool="bg"] .phases li.current') && document.querySelector('[data-pool="bg"] .phases li.current').innerText === 'NODE_POOL_SOAKING'`)
		op.shot("cluster-bluegreen-soaking")
		// The green instances' agents, as their template starts them at
		// the release: the pool completes only once they report.
		var c api.Cluster
		m.do(t, http.MethodGet, "/v1/clusters/cloudy", nil, &c)
		var green []string
		for _, n := range nodeNames(c.Spec) {
			if !slices.Contains(cloudyNodes, n) {
				green = append(green, n)
			}
		}
		require.NotEmpty(t, green, "green nodes in cloudy's spec while the pool soaks")
		startAgentsAt(t, m, "cloudy", green, false, "v1.34.4")
		op.click(`button[data-action="complete"][data-pool="bg"]`)
		op.confirm("blue pool is deleted", true)
		op.wait("the pool completed", isState(sel("data-step", "pool/bg"), "done"))
		require.Contains(t, op.text(`[data-pool="bg"] .phases li.current`), "COMPLETED")
	})

	t.Run("maintenance calendar", func(t *testing.T) {
		op.t = t
		op.go_("#/clusters/lab/maintenance")
		op.wait("60 days", `document.querySelectorAll('#calendar .day').length === 60`)
		op.wait("the next opportunity", `!!document.querySelector('#next-opportunity') && !!document.querySelector('#next-marker')`)
		require.Contains(t, op.text("#policy"), "FREQ=WEEKLY;BYDAY=SA,SU")
		require.Contains(t, op.text("#policy"), "year-end-freeze")
		launch := today.Add(10 * day).Format("2006-01-02")
		require.Contains(t, eval[string](t, op.ctx, fmt.Sprintf(`document.querySelector('[data-day=%q]').getAttribute('aria-label')`, launch)), "exclusion launch")
		op.shot("maintenance")
	})

	t.Run("preflight runs", func(t *testing.T) {
		op.t = t
		m.do(t, http.MethodPut, "/v1/releases/1.34.5", release("1.34.5"), nil)
		op.go_("#/clusters/lab/preflight")
		op.wait("the upgrade's run", `document.querySelectorAll('[data-run]').length >= 1`)
		before := eval[int](t, op.ctx, `document.querySelectorAll('[data-run]').length`)
		op.wait("the new release offered", `[...document.querySelectorAll('#preflight-version option')].some(o => o.value === '1.34.5')`)
		op.click(`button[data-action="preflight"]`)
		op.confirm("Nothing on the cluster changes", true)
		op.wait("a new run", fmt.Sprintf(`document.querySelectorAll('[data-run]').length === %d`, before+1))
		op.wait("its verdict", `!!document.querySelector('[data-run] [data-state="passed"]')`)
		op.shot("preflight-runs")
		op.click(`[data-run] a`)
		op.wait("its checks", `!!document.querySelector('[data-check="nodes-ready"]')`)
		op.shot("preflight-run")
	})

	t.Run("audit log", func(t *testing.T) {
		op.t = t
		op.go_("#/audit")
		op.wait("the notice for a non-admin", `document.querySelector('#audit') && document.querySelector('#audit').innerText.includes('for admins')`)
		a := &page{t: t, ctx: newTab(t, browser), base: op.base}
		a.signIn(m.admin, "")
		a.wait("the audit link", `!document.getElementById('nav-audit').hidden`)
		a.go_("#/audit")
		a.wait("the operator's upgrade start", `!!document.querySelector('#audit table') && [...document.querySelectorAll('#audit tr')].some(tr => tr.innerText.includes('/v1/clusters/lab/upgrade') && tr.innerText.includes('operator in the browser'))`)
		a.shot("audit")
	})

	t.Run("accessibility", func(t *testing.T) {
		op.t = t
		for _, hash := range []string{"#/", "#/clusters/lab", "#/clusters/lab/maintenance", "#/clusters/lab/preflight"} {
			op.go_(hash)
			op.wait("the page", `!!document.querySelector('main h1') && document.querySelectorAll('main .badge, main table, main .day').length > 0`)
			unlabelled := eval[[]string](t, op.ctx, `[...document.querySelectorAll('input, select, progress')].filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.outerHTML.slice(0, 80))`)
			require.Empty(t, unlabelled, "%s: every control has a label", hash)
			low := eval[[]string](t, op.ctx, contrastCheck)
			require.Empty(t, low, "%s: text contrast below 4.5:1", hash)
		}
	})

	t.Run("sign out", func(t *testing.T) {
		op.t = t
		op.click("#signout")
		op.wait("the sign-in form", `!!document.querySelector('#token')`)
		// The session is gone on the member too, and the cookie with it.
		ctx, cancel := context.WithTimeout(op.ctx, time.Minute)
		defer cancel()
		code, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/v1/session', {credentials: 'same-origin'}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, code)
	})
}

// contrastCheck lists visible text whose colour against its background
// is below 4.5:1 (WCAG AA for normal text).
const contrastCheck = `(() => {
  const lum = (c) => { const v = c.match(/[\d.]+/g).slice(0, 3).map(Number).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); }); return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const alpha = (c) => { const m = c.match(/[\d.]+/g); return m.length > 3 ? Number(m[3]) : 1; };
  const bg = (el) => { for (let e = el; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor; if (alpha(c) > 0.5) return c; } return 'rgb(255, 255, 255)'; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (!el.offsetParent && el.tagName !== 'BODY') continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const s = getComputedStyle(el);
    const a = lum(s.color), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const op = Number(s.opacity);
    if (ratio < 4.5 && op > 0.9) out.push(el.tagName + '.' + el.className + ' ' + ratio.toFixed(2) + ' "' + el.textContent.trim().slice(0, 30) + '"');
  }
  return out;
})()`

// clouds gives the member the in-memory cloud.
type clouds struct{ c *memory.Cloud }

func (c clouds) Provider(spec phases.CloudSpec) (cloud.Provider, error) {
	if spec.Provider != phases.CloudMemory {
		return nil, fmt.Errorf("no %s adapter in this test", spec.Provider)
	}
	return c.c, nil
}
