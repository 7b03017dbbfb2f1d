package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// SchedulerService is the automatic upgrades' side of the API (channels,
// and what the scheduler decided of a cluster): what the channel handlers
// need (channels.go in package coordinator).
type SchedulerService interface {
	Channels() []api.Channel
	Channel(name string) (api.Channel, error)
	PutChannel(ctx context.Context, name string, u api.ChannelUpdate) error
	UpgradeStatus(cluster string) (api.UpgradeStatus, error)
}

// schedulerHandlers serve /v1/channels and a cluster's upgrade-status.
type schedulerHandlers struct{ svc SchedulerService }

func (h *schedulerHandlers) channels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, h.svc.Channels())
}

func (h *schedulerHandlers) channel(w http.ResponseWriter, r *http.Request) {
	ch, err := h.svc.Channel(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, ch)
}

// channelBody is api.ChannelUpdate as it arrives: each field must be
// there, so unsetting a version is always said ("") and never follows
// from a field left out.
type channelBody struct {
	DefaultVersion    *string `json:"defaultVersion"`
	AutoUpgradeTarget *string `json:"autoUpgradeTarget"`
}

func (h *schedulerHandlers) putChannel(w http.ResponseWriter, r *http.Request) {
	var b channelBody
	if err := decode(w, r, &b); err != nil {
		writeProblem(w, r, err)
		return
	}
	if b.DefaultVersion == nil || b.AutoUpgradeTarget == nil {
		writeProblem(w, r, &coordinator.RuleError{Rule: "channel-update", Detail: `a channel update sets both defaultVersion and autoUpgradeTarget (a version, or "" to unset it)`, Err: coordinator.ErrInvalid})
		return
	}
	u := api.ChannelUpdate{DefaultVersion: *b.DefaultVersion, AutoUpgradeTarget: *b.AutoUpgradeTarget}
	if err := h.svc.PutChannel(r.Context(), chi.URLParam(r, "name"), u); err != nil {
		writeProblem(w, r, err)
		return
	}
	h.channel(w, r)
}

func (h *schedulerHandlers) upgradeStatus(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.UpgradeStatus(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, st)
}
