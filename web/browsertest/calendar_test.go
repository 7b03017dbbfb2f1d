package browsertest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
)

// TestCalendarDrawsWhatBlocksTheChosenChange: the maintenance calendar
// hatches an exclusion that blocks the change picked above it and only
// outlines one that lets it through (SPEC §9's table), in its bars, its
// day labels and its list, and redraws when the pick changes.
func TestCalendarDrawsWhatBlocksTheChosenChange(t *testing.T) {
	requireChromium(t)
	m := startMember(t)
	m.do(t, http.MethodPut, "/v1/releases/1.33.6", release("1.33.6"), nil)
	m.do(t, http.MethodPut, "/v1/clusters/lab", api.ClusterSpec{Name: "lab", Kind: api.ClusterStandalone, Version: "1.33.6", Channel: "regular",
		Pools: []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: fmtNodes("cp", 1)}}}, nil)
	day := 24 * time.Hour
	today := time.Now().UTC().Truncate(day)
	m.do(t, http.MethodPut, "/v1/clusters/lab/maintenance-policy", api.MaintenancePolicy{Exclusions: []api.MaintenanceExclusion{
		{Name: "minor-freeze", Start: today.Add(3 * day), End: today.Add(5 * day), Scope: string(maintenance.ScopeNoMinorUpgrades)},
		{Name: "launch", Start: today.Add(8 * day), End: today.Add(9 * day), Scope: string(maintenance.ScopeNoUpgrades)},
		{Name: "node-freeze", Start: today.Add(12 * day), End: today.Add(14 * day), Scope: string(maintenance.ScopeNoMinorOrNodeUpgrades)},
	}}, nil)

	browser := newBrowser(t, m)
	p := &page{t: t, ctx: newTab(t, browser), base: "https://" + m.addr}
	p.signIn(m.token(t, "viewer"), "")
	p.go_("#/clusters/lab/maintenance")
	p.wait("60 days", `document.querySelectorAll('#calendar .day').length === 60`)

	// How the bars of an exclusion are drawn: "hatched" (blocks) or
	// "soft" (outlined, lets the change through), one per day it covers.
	drawn := func(name string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#calendar .seg.excl')].filter(s => s.title.startsWith(%s)).map(s => s.classList.contains('soft') ? 'soft' : 'hatched').join()`, js(name+" ("))
	}
	pick := func(target, kind string) {
		eval[any](t, p.ctx, fmt.Sprintf(`for (const [id, v] of [['change-target', %s], ['change-kind', %s]]) { const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event('change')); } null`, js(target), js(kind)))
	}
	for _, tc := range []struct {
		target, kind string
		want         map[string]bool
	}{
		// The default pick: nodes, patch.
		{"nodes", "patch", map[string]bool{"minor-freeze": false, "launch": true, "node-freeze": true}},
		{"controlPlane", "patch", map[string]bool{"minor-freeze": false, "launch": true, "node-freeze": false}},
		{"controlPlane", "minor", map[string]bool{"minor-freeze": true, "launch": true, "node-freeze": true}},
		{"nodes", "disruption", map[string]bool{"minor-freeze": false, "launch": true, "node-freeze": true}},
	} {
		pick(tc.target, tc.kind)
		for _, name := range []string{"minor-freeze", "launch", "node-freeze"} {
			look := "hatched"
			if !tc.want[name] {
				look = "soft"
			}
			p.wait(fmt.Sprintf("%s drawn %s for %s %s", name, look, tc.target, tc.kind),
				fmt.Sprintf(`(%s) !== '' && (%s).split(',').every(x => x === %s)`, drawn(name), drawn(name), js(look)))
		}
		change := map[string]string{"nodes": "nodes", "controlPlane": "control-plane"}[tc.target] + " " + tc.kind
		label := eval[string](t, p.ctx, fmt.Sprintf(`document.querySelector('[data-day=%q]').getAttribute('aria-label')`, today.Add(3*day).Format("2006-01-02")))
		verb := "does not block"
		if tc.want["minor-freeze"] {
			verb = "blocks"
		}
		require.Contains(t, label, "exclusion minor-freeze (no_minor_upgrades, "+verb+" a "+change+" change)")
		list := eval[string](t, p.ctx, `document.querySelector('#calendar details').textContent`) // closed: not in innerText
		require.Contains(t, list, "launch (no_upgrades, blocks a "+change+" change)")
	}
	pick("nodes", "patch")
	p.wait("back to nodes / patch", `(`+drawn("minor-freeze")+`).startsWith('soft')`)
	p.shot("maintenance-scopes")
}
