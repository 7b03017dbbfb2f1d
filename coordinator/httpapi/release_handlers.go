package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// ReleaseService is the release catalog: what the release handlers need.
type ReleaseService interface {
	PutRelease(ctx context.Context, r api.Release) error
	Release(version string) (api.Release, error)
	Releases() []api.Release
}

// releaseHandlers serve /v1/releases.
type releaseHandlers struct{ svc ReleaseService }

func (h *releaseHandlers) releases(w http.ResponseWriter, _ *http.Request) {
	rs := h.svc.Releases()
	if rs == nil {
		rs = []api.Release{}
	}
	writeJSON(w, 200, rs)
}

func (h *releaseHandlers) release(w http.ResponseWriter, r *http.Request) {
	rel, err := h.svc.Release(chi.URLParam(r, "version"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, rel)
}

func (h *releaseHandlers) putRelease(w http.ResponseWriter, r *http.Request) {
	var rel api.Release
	if err := decode(w, r, &rel); err != nil {
		writeProblem(w, r, err)
		return
	}
	v := chi.URLParam(r, "version")
	if rel.Version == "" {
		rel.Version = v
	}
	a, errA := phases.ParseVersion(v)
	b, errB := phases.ParseVersion(rel.Version)
	if err := errors.Join(errA, errB); err != nil {
		writeProblem(w, r, &coordinator.RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: coordinator.ErrInvalid})
		return
	}
	if a != b {
		writeProblem(w, r, &coordinator.RuleError{Rule: "release-version", Detail: fmt.Sprintf("body version %q does not match the path's %q", rel.Version, v), Err: coordinator.ErrInvalid})
		return
	}
	if err := h.svc.PutRelease(r.Context(), rel); err != nil {
		writeProblem(w, r, err)
		return
	}
	out, _ := h.svc.Release(v)
	writeJSON(w, 200, out)
}
