package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/moltproject/molt/raftstore"
)

// Leadership is what the API needs to know of Raft on this member: who
// leads (to forward to the leader), and how far this replica has applied
// (consistency.go, fresh.go).
type Leadership interface {
	IsLeader() bool
	// LeaderHTTPAddr is the leader's REST address ("" when unknown).
	LeaderHTTPAddr() string
	// LeaderChanged is closed at the next leader change (this member
	// comes to lead, stops, or learns of another leader); a forward in
	// flight follows the change (leaderOnly). nil when the
	// implementation cannot tell (test doubles): a forward then waits
	// for its answer.
	LeaderChanged() <-chan struct{}
	// AppliedIndex and WaitApplied serve api.IndexHeader and
	// api.MinIndexHeader (consistency.go).
	AppliedIndex() uint64
	WaitApplied(ctx context.Context, index uint64) error
	// ReadIndex, on the leader, is an index that covers every write
	// acknowledged before the call (fresh.go).
	ReadIndex(ctx context.Context) (uint64, error)
	// Halted reports whether this member stopped applying the log, which
	// its release cannot read (raftstore.HaltInfo): /readyz says so.
	Halted() (raftstore.HaltInfo, bool)
}

// forwardedHeader marks a request a follower forwarded, so that two members
// that each think the other leads cannot bounce a request forever.
const forwardedHeader = "X-Molt-Forwarded-By"

// leaderOnly forwards requests that change state (and agents' calls, whose
// liveness and work queues live on the leader) to the leader.
func (h *handlers) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded := r.Header.Get(forwardedHeader) != ""
		for attempt := 0; ; attempt++ {
			if h.leader.IsLeader() {
				next.ServeHTTP(w, r)
				return
			}
			changed := h.leader.LeaderChanged()
			leader := h.leader.LeaderHTTPAddr()
			if leader == "" && attempt > 0 && changed != nil {
				// The leader this request was forwarded to was lost: wait
				// a little for the election rather than send the client
				// round the members.
				h.awaitLeader(r.Context())
				if h.leader.IsLeader() {
					next.ServeHTTP(w, r)
					return
				}
				changed = h.leader.LeaderChanged()
				leader = h.leader.LeaderHTTPAddr()
			}
			if leader == "" || forwarded {
				writeProblem(w, r, errNoLeader)
				return
			}
			if !h.forward(w, r, leader, changed) || attempt >= maxReforwards {
				return
			}
		}
	})
}

// maxReforwards bounds how often one request follows a leader change.
const maxReforwards = 2

// errLeaderChanged ends a forwarded request whose leader was replaced
// while it waited for the answer.
var errLeaderChanged = errors.New("the leader changed while the request was forwarded")

// awaitLeader waits up to CatchUp, or until ctx ends, for some leader to
// be known (this member, or another whose address it knows).
func (h *handlers) awaitLeader(ctx context.Context) {
	deadline := time.NewTimer(h.cfg.CatchUp)
	defer deadline.Stop()
	// A leader's address can arrive without a leader observation: Raft
	// names the leader first, and its address comes with its member
	// metadata, applied here later (a member that just joined, a leader
	// that just recorded a new address). Nothing signals that apply.
	tick := time.NewTicker(leaderAddrPoll)
	defer tick.Stop()
	for {
		changed := h.leader.LeaderChanged()
		if h.leader.IsLeader() || h.leader.LeaderHTTPAddr() != "" {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// leaderAddrPoll is how often awaitLeader looks for a leader's address
// that no leader observation announced.
const leaderAddrPoll = 20 * time.Millisecond

// holdForLeader holds an operator's request (and an enrollment) at a
// member that knows no leader, or not yet the leader's address, for up
// to CatchUp until it does, rather than answer 503 no-leader at once:
// an election lasts about a second, and an operator's client often knows
// one member, which would refuse every request of that second. Agents'
// calls are not held: an agent lists every member and moves to the next
// at once, and a member cut off from its peers knows no leader for as
// long as it is cut off. A request another member forwarded is not held
// either: it was sent to the leader this member no longer is, and the
// forwarding member follows the change itself (leaderOnly).
func (h *handlers) holdForLeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forwardedHeader) == "" && !h.leader.IsLeader() && h.leader.LeaderHTTPAddr() == "" {
			h.awaitLeader(r.Context())
		}
		next.ServeHTTP(w, r)
	})
}

// forward proxies r to the leader at leader. A leader that stops
// answering (frozen, cut off) is noticed by the forwarding transport's
// pings (api/client.ConfigureTransport), or sooner when Raft elects another:
// changed closes, the forward is abandoned, and forward reports that a
// GET (an agent's long poll) may be sent again, to the new leader;
// anything else answers 503 no-leader, as any failed forward does.
func (h *handlers) forward(w http.ResponseWriter, r *http.Request, leader string, changed <-chan struct{}) (again bool) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if changed != nil {
		go h.cancelOnLeaderChange(ctx, cancel, errLeaderChanged, leader, changed)
	}
	scheme := "http"
	if h.cfg.ForwardTransport != nil {
		scheme = "https"
	}
	target := &url.URL{Scheme: scheme, Host: leader}
	proxy := httputil.NewSingleHostReverseProxy(target)
	if h.cfg.ForwardTransport != nil {
		proxy.Transport = h.cfg.ForwardTransport
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(context.Cause(ctx), errLeaderChanged) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			again = true
			return
		}
		writeProblem(w, r, fmt.Errorf("forward to leader %s: %v: %w", leader, err, errNoLeader))
	}
	r.Header.Set(forwardedHeader, "1")
	forwardPrincipal(r)
	proxy.ServeHTTP(w, r.WithContext(ctx))
	return again
}

// cancelOnLeaderChange cancels a forward to leader, with cause, when this
// member comes to lead or to know another leader, or none. A signal alone
// is not enough: Raft's leader observations reach LeaderChanged after Raft
// already answers with the leader they name, so a signal can arrive for
// the very leader the request was sent to (seen right after a leadership
// transfer); that one is let pass and the next awaited.
func (h *handlers) cancelOnLeaderChange(ctx context.Context, cancel context.CancelCauseFunc, cause error, leader string, changed <-chan struct{}) {
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
		changed = h.leader.LeaderChanged()
		if h.leader.IsLeader() || h.leader.LeaderHTTPAddr() != leader {
			cancel(cause)
			return
		}
	}
}

// readyz answers 200 when this member can serve: it knows a leader (or
// is one) and applies the log. A member that stopped applying it (its
// release cannot read an entry: raftstore.HaltInfo) answers 503, rule
// member-halted, with the release it needs and where it stopped.
func (h *handlers) readyz(w http.ResponseWriter, r *http.Request) {
	if hi, halted := h.leader.Halted(); halted {
		writeProblem(w, r, fmt.Errorf("%w: %s", raftstore.ErrHalted, hi))
		return
	}
	if h.leader.IsLeader() || h.leader.LeaderHTTPAddr() != "" {
		writeJSON(w, 200, map[string]string{"status": "ready"})
		return
	}
	writeProblem(w, r, errNoLeader)
}
