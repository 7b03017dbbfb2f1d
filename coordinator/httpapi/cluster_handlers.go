package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// ClusterService stores clusters and reads them back: what the cluster
// handlers need. PutCluster takes the engine's spec, which the handler
// converts from the wire (api/convert).
type ClusterService interface {
	PutCluster(ctx context.Context, spec phases.ClusterSpec, kubeconfig string, policy *maintenance.Policy, adopt bool) error
	DeleteCluster(ctx context.Context, name string) error
	Cluster(name string) (api.Cluster, error)
	Clusters() []api.Cluster
}

// clusterHandlers serve /v1/clusters and /v1/clusters/{name}.
type clusterHandlers struct{ svc ClusterService }

func (h *clusterHandlers) clusters(w http.ResponseWriter, _ *http.Request) {
	cs := h.svc.Clusters()
	if cs == nil {
		cs = []api.Cluster{}
	}
	writeJSON(w, 200, cs)
}

func (h *clusterHandlers) cluster(w http.ResponseWriter, r *http.Request) {
	c, err := h.svc.Cluster(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, c)
}

func (h *clusterHandlers) putCluster(w http.ResponseWriter, r *http.Request) {
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
	if err := h.svc.PutCluster(r.Context(), spec, body.Kubeconfig, convert.MaintenancePolicyFromAPI(body.MaintenancePolicy), body.Adopt); err != nil {
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

func (h *clusterHandlers) deleteCluster(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteCluster(r.Context(), chi.URLParam(r, "name")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
