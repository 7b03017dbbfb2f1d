package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/moltproject/molt/api"
)

// memberSelfPath is where a member says what it runs and reads (members
// only): the leader asks every member (coordinator.Config.ProbeMember),
// so that it writes nothing some member cannot read. Every member
// answers for itself; nothing is forwarded.
const memberSelfPath = "/v1/members/self/capabilities"

func (h *memberHandlers) self(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.svc.MemberSelf())
}

// ProbeMember returns the leader's question to a member
// (coordinator.Config.ProbeMember): GET /v1/members/self/capabilities at
// the member's HTTP address, over transport (the members' mutual TLS;
// nil: plain HTTP, for tests without TLS). A member of a release before
// 0.2.0 answers 404: an error, and the leader takes it to read what molt
// 0.1.0 reads.
func ProbeMember(transport http.RoundTripper) func(ctx context.Context, httpAddr string) (api.MemberSelf, error) {
	scheme, client := "http", http.DefaultClient
	if transport != nil {
		scheme, client = "https", &http.Client{Transport: transport}
	}
	return func(ctx context.Context, addr string) (api.MemberSelf, error) {
		var s api.MemberSelf
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+memberSelfPath, nil)
		if err != nil {
			return s, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return s, fmt.Errorf("capabilities of member at %s: %w", addr, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return s, fmt.Errorf("capabilities of member at %s: %s", addr, resp.Status)
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&s); err != nil {
			return s, fmt.Errorf("capabilities of member at %s: %w", addr, err)
		}
		return s, nil
	}
}
