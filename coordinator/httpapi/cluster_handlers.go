package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

func (h *handlers) clusters(w http.ResponseWriter, _ *http.Request) {
	cs := h.svc.Clusters()
	if cs == nil {
		cs = []api.Cluster{}
	}
	writeJSON(w, 200, cs)
}

func (h *handlers) cluster(w http.ResponseWriter, r *http.Request) {
	c, err := h.svc.Cluster(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, c)
}

func (h *handlers) putCluster(w http.ResponseWriter, r *http.Request) {
	var body api.ClusterSpec
	if err := decode(w, r, &body); err != nil {
		writeProblem(w, r, err)
		return
	}
	spec, err := convert.ClusterSpecFromAPI(body)
	if err != nil {
		// A version that is not 1.N.X is refused as version-invalid
		// (problemFor); anything else the conversion refuses makes the
		// body malformed.
		if !errors.Is(err, phases.ErrInvalidVersion) {
			err = fmt.Errorf("%w: %v", errBadRequest, err)
		}
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if spec.Name == "" {
		spec.Name = name
	}
	if spec.Name != name {
		writeProblem(w, r, &coordinator.RuleError{Rule: "cluster-name", Detail: fmt.Sprintf("body name %q does not match the path's %q", spec.Name, name), Err: coordinator.ErrInvalid})
		return
	}
	if err := h.svc.PutCluster(r.Context(), spec, body.Kubeconfig, convert.MaintenancePolicyFromAPI(body.MaintenancePolicy)); err != nil {
		writeProblem(w, r, err)
		return
	}
	c, err := h.svc.Cluster(name)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, c)
}

func (h *handlers) deleteCluster(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteCluster(r.Context(), chi.URLParam(r, "name")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) upgrade(w http.ResponseWriter, r *http.Request) {
	u, err := h.svc.Upgrade(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := convert.UpgradeToAPI(u)
	// The forecast is made here, so that clients show the coordinator's
	// estimate rather than each running the planner on its own copy.
	out.Forecast = convert.UpgradeForecastToAPI(u, h.cfg.Clock.Now())
	writeJSON(w, 200, out)
}

func (h *handlers) startUpgrade(w http.ResponseWriter, r *http.Request) {
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

func (h *handlers) poolCommand(w http.ResponseWriter, r *http.Request) {
	h.runPoolCommand(w, r, chi.URLParam(r, "cmd"))
}

// poolVerb accepts the SPEC's "upgrade:cancel" form as well.
func (h *handlers) poolVerb(w http.ResponseWriter, r *http.Request) {
	verb := chi.URLParam(r, "verb")
	const prefix = "upgrade:"
	if len(verb) <= len(prefix) || verb[:len(prefix)] != prefix {
		writeProblem(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, coordinator.ErrNotFound))
		return
	}
	h.runPoolCommand(w, r, verb[len(prefix):])
}

func (h *handlers) runPoolCommand(w http.ResponseWriter, r *http.Request, cmd string) {
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

func (h *handlers) retryNode(w http.ResponseWriter, r *http.Request) {
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
