package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/raftstore"
)

// Fresh credentials (docs/security.md, "Revoking a credential"). An
// operator's API token, and the web session that stands for one, are
// judged by state no older than the request, at every member: a token
// deleted (or expired, or used up) before a request was sent is refused,
// however far the member that receives it trails the leader.
//
//   - What the leader serves (writes, forwarded by a follower) the leader
//     judges itself: a follower forwards the credential (the bearer token,
//     or the token a session cookie stands for) and the leader
//     authenticates it against its own state (auth.go), after its own
//     read index (no round trip to another member: VerifyLeader, and for
//     a leader new in its term a Barrier first, so that it has applied a
//     deletion its predecessor acknowledged).
//   - What a member serves from its own replica (reads, its web sessions)
//     it judges after a read index: it asks the leader for an index that
//     covers every write the leader had acknowledged (GET /v1/read-index,
//     members only; raftstore.Store.ReadIndex), waits until it has applied
//     it, and only then checks the credential. One round trip to the
//     leader, and on the leader one round of Raft heartbeats; nothing is
//     written to the log.
//   - A member that knows no leader (an election), or not yet the
//     leader's address, waits for one within Config.CatchUp. One that
//     cannot learn the index then (no leader known, the leader
//     unreachable) or does not reach it within Config.CatchUp refuses
//     with 503 rather than judge by a copy that may be stale; the client
//     tries another member.
//   - A leader of an older release does not know the route (404): while
//     the members are upgraded one by one, a follower then judges by its
//     own replica, as every member of that release does, rather than
//     refuse every operator's read until the leader is upgraded.
//
// Certificates (agents, members) are checked as before, without the
// round trip: 15,000 agents' beats, polls and results do not pay for it.

// readIndexPath is the route a follower asks the leader's read index at.
const readIndexPath = "/v1/read-index"

// errOlderLeader is a leader that does not know readIndexPath.
var errOlderLeader = errors.New("the leader's release has no read index")

// ruleFresh names the refusals of a credential that could not be judged
// by fresh state.
const ruleFresh = "credential-freshness"

// freshen brings this member up to the leader's read index, within
// Config.CatchUp, before an operator's credential is judged here.
func (h *handlers) freshen(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CatchUp)
	defer cancel()
	idx, err := h.readIndex(ctx)
	if errors.Is(err, errOlderLeader) {
		h.cfg.Logger.Debug("the leader predates the read index; judging a credential by this member's replica", "err", err)
		return nil
	}
	if err != nil {
		return &coordinator.RuleError{Rule: ruleFresh,
			Detail: fmt.Sprintf("an API token or web session is checked against the leader's latest state, which this member cannot learn now (%v); try again or ask another member", err),
			Err:    errNoLeader}
	}
	if h.leader.AppliedIndex() >= idx {
		return nil
	}
	if h.leader.WaitApplied(ctx, idx) != nil {
		return errLagging{applied: h.leader.AppliedIndex(), want: idx, credential: true}
	}
	return nil
}

// readIndex returns the leader's read index: this member's own when it
// leads, else the leader's answer to GET /v1/read-index.
func (h *handlers) readIndex(ctx context.Context) (uint64, error) {
	if h.leader.IsLeader() {
		return h.leader.ReadIndex(ctx)
	}
	leader := h.leader.LeaderHTTPAddr()
	if leader == "" {
		// An election, or the leader's address not applied here yet:
		// worth the wait within CatchUp (holdForLeader says why).
		h.awaitLeader(ctx)
		if h.leader.IsLeader() {
			return h.leader.ReadIndex(ctx)
		}
		leader = h.leader.LeaderHTTPAddr()
	}
	if leader == "" {
		return 0, errNoLeader
	}
	scheme, client := "http", http.DefaultClient
	if h.cfg.ForwardTransport != nil {
		scheme, client = "https", &http.Client{Transport: h.cfg.ForwardTransport}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+leader+readIndexPath, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read index of leader %s: %w", leader, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusNotFound {
			return 0, fmt.Errorf("read index of leader %s: %w", leader, errOlderLeader)
		}
		return 0, fmt.Errorf("read index of leader %s: %s", leader, resp.Status)
	}
	var ri api.ReadIndex
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&ri); err != nil {
		return 0, fmt.Errorf("read index of leader %s: %w", leader, err)
	}
	return ri.Index, nil
}

// serveReadIndex serves GET /v1/read-index, on the leader only: a member
// that does not lead answers 503 not-leader and never forwards it.
func (h *handlers) serveReadIndex(w http.ResponseWriter, r *http.Request) {
	if !h.leader.IsLeader() {
		writeProblem(w, r, raftstore.ErrNotLeader)
		return
	}
	idx, err := h.leader.ReadIndex(r.Context())
	if err != nil {
		if !errors.Is(err, raftstore.ErrNotLeader) {
			err = fmt.Errorf("%w: %w", errNoLeader, err)
		}
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ReadIndex{Index: idx})
}
