package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
)

// SequenceService holds the rollout sequences (sequences.go in package
// coordinator): what the /v1/rollout-sequences handlers need.
type SequenceService interface {
	RolloutSequences() []api.RolloutSequence
	RolloutSequence(name string) (api.RolloutSequence, error)
	PutRolloutSequence(ctx context.Context, name string, spec api.RolloutSequenceSpec) error
	DeleteRolloutSequence(ctx context.Context, name string) error
	// OverrideSequenceStage records a resume or skip of a stage for a
	// version.
	OverrideSequenceStage(ctx context.Context, name, stage, action string, req api.SequenceOverrideRequest) error
	// PlanRolloutSequence is the dry run of a version through it.
	PlanRolloutSequence(name, version string) (api.SequencePlan, error)
}

// sequenceHandlers serve /v1/rollout-sequences.
type sequenceHandlers struct{ svc SequenceService }

func (h *sequenceHandlers) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, h.svc.RolloutSequences())
}

func (h *sequenceHandlers) get(w http.ResponseWriter, r *http.Request) {
	seq, err := h.svc.RolloutSequence(chi.URLParam(r, "sequence"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, seq)
}

func (h *sequenceHandlers) put(w http.ResponseWriter, r *http.Request) {
	var spec api.RolloutSequenceSpec
	if err := decode(w, r, &spec); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.PutRolloutSequence(r.Context(), chi.URLParam(r, "sequence"), spec); err != nil {
		writeProblem(w, r, err)
		return
	}
	h.get(w, r)
}

func (h *sequenceHandlers) delete(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteRolloutSequence(r.Context(), chi.URLParam(r, "sequence")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// override serves a stage's resume or skip; it answers the sequence.
func (h *sequenceHandlers) override(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.SequenceOverrideRequest
		if err := decode(w, r, &req); err != nil {
			writeProblem(w, r, err)
			return
		}
		if err := h.svc.OverrideSequenceStage(r.Context(), chi.URLParam(r, "sequence"), chi.URLParam(r, "stage"), action, req); err != nil {
			writeProblem(w, r, err)
			return
		}
		h.get(w, r)
	}
}

// plan is the dry run of ?version= through the sequence.
func (h *sequenceHandlers) plan(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.PlanRolloutSequence(chi.URLParam(r, "sequence"), r.URL.Query().Get("version"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, p)
}
