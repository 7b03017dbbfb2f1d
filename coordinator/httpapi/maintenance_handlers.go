package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/maintenance"
)

// MaintenanceService holds clusters' maintenance policies: what the
// maintenance-policy handlers need. It speaks the engine's policy, which
// the handlers convert from and to the wire (api/convert).
type MaintenanceService interface {
	SetPolicy(ctx context.Context, cluster string, p maintenance.Policy) error
	Policy(cluster string) (maintenance.Policy, error)
	// CheckMaintenance judges at the member's own clock when at is zero.
	CheckMaintenance(cluster string, ch maintenance.Change, at time.Time) (api.MaintenanceCheck, error)
}

// maintenanceHandlers serve a cluster's maintenance policy, its check and
// its calendar; clock is the calendar's today.
type maintenanceHandlers struct {
	svc   MaintenanceService
	clock coordinator.Clock
}

func (h *maintenanceHandlers) policy(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.Policy(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, convert.MaintenancePolicyToAPI(p))
}

func (h *maintenanceHandlers) putPolicy(w http.ResponseWriter, r *http.Request) {
	var p api.MaintenancePolicy
	if err := decode(w, r, &p); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.SetPolicy(r.Context(), chi.URLParam(r, "name"), *convert.MaintenancePolicyFromAPI(&p)); err != nil {
		writeProblem(w, r, err)
		return
	}
	h.policy(w, r)
}

func (h *maintenanceHandlers) checkPolicy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(rule, detail string) {
		writeProblem(w, r, &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrInvalid})
	}
	ch := maintenance.Change{Target: maintenance.Target(q.Get("target")), Kind: maintenance.ChangeKind(q.Get("change"))}
	if ch.Target != maintenance.TargetControlPlane && ch.Target != maintenance.TargetNodes {
		bad("target", fmt.Sprintf("target=%q: want controlPlane or nodes", ch.Target))
		return
	}
	if ch.Kind != maintenance.KindMinor && ch.Kind != maintenance.KindPatch && ch.Kind != maintenance.KindDisruption {
		bad("change", fmt.Sprintf("change=%q: want minor, patch or disruption", ch.Kind))
		return
	}
	var at time.Time // zero: the member's clock (MaintenanceService.CheckMaintenance)
	if s := q.Get("at"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			bad("at", fmt.Sprintf("at=%q is not RFC 3339", s))
			return
		}
		at = t.UTC()
	}
	res, err := h.svc.CheckMaintenance(chi.URLParam(r, "name"), ch, at)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, res)
}

// calendar lays the cluster's maintenance policy out over days (default
// 60, at most maintenance.MaxCalendarSpan) from from (default: today,
// 00:00 UTC, on the API's clock): the window's open stretches and the
// exclusions in that range.
func (h *maintenanceHandlers) calendar(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(rule, detail string) {
		writeProblem(w, r, &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrInvalid})
	}
	const day = 24 * time.Hour
	from := h.clock.Now().UTC().Truncate(day)
	if s := q.Get("from"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			bad("from", fmt.Sprintf("from=%q is not RFC 3339", s))
			return
		}
		from = t.UTC()
	}
	days, maxDays := 60, int(maintenance.MaxCalendarSpan/day)
	if s := q.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxDays {
			bad("days", fmt.Sprintf("days=%q: want a whole number from 1 to %d", s, maxDays))
			return
		}
		days = n
	}
	to := from.Add(time.Duration(days) * day)
	p, err := h.svc.Policy(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	c, err := p.Compile()
	if err != nil { // a stored policy compiled when it was set
		writeProblem(w, r, fmt.Errorf("stored maintenance policy: %v: %w", err, coordinator.ErrPolicyInvalid))
		return
	}
	out := api.MaintenanceCalendar{From: from, To: to, Window: []api.TimeRange{}, Exclusions: []api.CalendarExclusion{}}
	for _, s := range c.WindowStretches(from, to) {
		out.Window = append(out.Window, api.TimeRange{Start: s.Start, End: s.End})
	}
	for _, e := range c.Policy().Exclusions {
		if e.Start.Before(to) && e.End.After(from) {
			out.Exclusions = append(out.Exclusions, api.CalendarExclusion{Name: e.Name, Start: e.Start, End: e.End, Scope: string(e.Scope)})
		}
	}
	writeJSON(w, 200, out)
}
