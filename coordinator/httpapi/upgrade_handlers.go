package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// UpgradeService runs a cluster's upgrade: what the upgrade handlers
// need. It speaks the engine's upgrades and plans, which the handlers
// render through api/convert.
type UpgradeService interface {
	Upgrade(cluster string) (*phases.Upgrade, error)
	Plan(cluster string, req api.UpgradeRequest) (phases.Plan, error)
	StartUpgrade(ctx context.Context, cluster string, req api.UpgradeRequest) (*phases.Upgrade, error)
	PoolCommand(ctx context.Context, cluster, pool, command string) error
	RetryNode(ctx context.Context, cluster, node string) error
}

// upgradeHandlers serve a cluster's upgrade, its pools' commands and its
// nodes' retries; clock dates the forecast of a running upgrade.
type upgradeHandlers struct {
	svc   UpgradeService
	clock coordinator.Clock
}

func (h *upgradeHandlers) upgrade(w http.ResponseWriter, r *http.Request) {
	u, err := h.svc.Upgrade(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := convert.UpgradeToAPI(u)
	// The forecast is made here, so that clients show the coordinator's
	// estimate rather than each running the planner on its own copy.
	out.Forecast = convert.UpgradeForecastToAPI(u, h.clock.Now())
	writeJSON(w, 200, out)
}

func (h *upgradeHandlers) startUpgrade(w http.ResponseWriter, r *http.Request) {
	var req api.UpgradeRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if req.DryRun {
		// A dry run changes nothing: not a write the audit log records.
		if in := coordinator.AuditIntentFrom(r.Context()); in != nil {
			in.Skip()
		}
		plan, err := h.svc.Plan(name, req)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		writeJSON(w, 200, convert.PlanToAPI(plan))
		return
	}
	u, err := h.svc.StartUpgrade(r.Context(), name, req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, convert.UpgradeToAPI(u))
}

func (h *upgradeHandlers) poolCommand(w http.ResponseWriter, r *http.Request) {
	h.runPoolCommand(w, r, chi.URLParam(r, "cmd"))
}

// poolVerb accepts the SPEC's "upgrade:cancel" form as well.
func (h *upgradeHandlers) poolVerb(w http.ResponseWriter, r *http.Request) {
	verb := chi.URLParam(r, "verb")
	const prefix = "upgrade:"
	if len(verb) <= len(prefix) || verb[:len(prefix)] != prefix {
		writeProblem(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, coordinator.ErrNotFound))
		return
	}
	h.runPoolCommand(w, r, verb[len(prefix):])
}

func (h *upgradeHandlers) runPoolCommand(w http.ResponseWriter, r *http.Request, cmd string) {
	if err := decodeNone(w, r); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.PoolCommand(r.Context(), chi.URLParam(r, "name"), chi.URLParam(r, "pool"), cmd); err != nil {
		writeProblem(w, r, err)
		return
	}
	u, err := h.svc.Upgrade(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, convert.UpgradeToAPI(u))
}

func (h *upgradeHandlers) retryNode(w http.ResponseWriter, r *http.Request) {
	if err := decodeNone(w, r); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.RetryNode(r.Context(), chi.URLParam(r, "name"), chi.URLParam(r, "node")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
