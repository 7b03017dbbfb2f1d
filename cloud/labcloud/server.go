package labcloud

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/moltproject/molt/cloud"
)

// maxBody bounds a call's body; the largest is a list of instance names.
const maxBody = 1 << 20

// Handler serves p over HTTP: POST /v1/<method> with a JSON call, answered
// 200 with a JSON result, or with the status of the error's sentinel
// (400 invalid, 403 quota, 404 not found, 409 conflict, 503 stockout or
// transient, 500 other) and the error in the body. It adds nothing to the
// provider's semantics: idempotency by names and request IDs is p's.
func Handler(p cloud.Provider) http.Handler {
	return &handler{p: p}
}

type handler struct{ p cloud.Provider }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok || r.Method != http.MethodPost {
		writeResult(w, http.StatusNotFound, result{Error: &errorBody{Kind: "invalid", Message: fmt.Sprintf("%s %s: the lab's cloud API takes POST /v1/<method>", r.Method, r.URL.Path)}})
		return
	}
	var c call
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		writeResult(w, http.StatusBadRequest, result{Error: &errorBody{Kind: "invalid", Message: "call body: " + err.Error()}})
		return
	}
	res, err := h.call(r, method, c)
	if err != nil {
		res = result{Error: toBody(err)}
	}
	writeResult(w, statusOf(err), res)
}

func (h *handler) call(r *http.Request, method string, c call) (result, error) {
	ctx, p, g := r.Context(), h.p, c.group()
	var res result
	var err error
	switch method {
	case mEnsureTemplate:
		res.Template, err = p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: c.Release, Base: c.Base}, c.Req)
	case mGetGroup:
		var grp cloud.Group
		if grp, err = p.GetGroup(ctx, g); err == nil {
			res.Group = toGroup(grp)
		}
	case mCreateGroup:
		err = p.CreateGroup(ctx, g, c.Template, c.Size, c.Req)
	case mDeleteGroup:
		err = p.DeleteGroup(ctx, g, c.Req)
	case mSetTemplate:
		err = p.SetTemplate(ctx, g, c.Template, c.Req)
	case mResize:
		err = p.Resize(ctx, g, c.Size, c.Req)
	case mSetAutoscaling:
		var a cloud.Autoscaling
		if c.Autoscaling != nil {
			a = cloud.Autoscaling{Min: c.Autoscaling.Min, Max: c.Autoscaling.Max}
		}
		err = p.SetAutoscaling(ctx, g, a, c.Req)
	case mListInstances:
		var ins []cloud.Instance
		if ins, err = p.ListInstances(ctx, g); err == nil {
			res.Instances = toInstances(ins)
		}
	case mCreateInstances:
		err = p.CreateInstances(ctx, g, c.Names, c.Req)
	case mDeleteInstances:
		err = p.DeleteInstances(ctx, g, c.Names, c.Req)
	case mRecreateInstances:
		err = p.RecreateInstances(ctx, g, c.Names, c.Req)
	case mQuota:
		var q cloud.Quota
		if q, err = p.Quota(ctx, c.Zone); err == nil {
			res.Quota = &quota{Limit: q.Limit, Usage: q.Usage}
		}
	default:
		err = fmt.Errorf("unknown method %q: %w", method, cloud.ErrInvalid)
	}
	return res, err
}

// statusOf is the HTTP status of a call's outcome.
func statusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, cloud.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, cloud.ErrQuota):
		return http.StatusForbidden
	case errors.Is(err, cloud.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, cloud.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, cloud.ErrStockout), errors.Is(err, cloud.ErrTransient):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeResult(w http.ResponseWriter, status int, res result) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(res); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":{"message":%q}}`+"\n", err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
