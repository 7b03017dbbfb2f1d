package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/raftstore"
)

// Heartbeats at a follower. Agents' liveness lives in the leader's memory,
// so a follower used to forward every beat to the leader as a request of
// its own: at 15,000 agents beating every 10 s that is 1,500 forwards a
// second, each costing the follower and the leader several times what the
// beat itself costs (docs/performance.md, row P2). Instead a follower
// gathers, for a short window (Config.BeatRelayWindow), the beats that
// change nothing its replica holds — the leader needs them for liveness
// only — and relays them in one request (POST /v1/agents/heartbeats,
// members only). What must reach the leader on its own keeps its path: a
// beat that changes the agent's record (back from missing, health,
// versions) or names an agent the replica does not know is forwarded as
// before, and answered once its change is committed; polls and results
// are forwarded as before.
//
// The guarantees are those of a forwarded beat:
//   - a beat is answered only once the leader has taken the batch that
//     carried it, with the leader's own answer for that beat: an agent
//     told 204 by a follower is known alive to the leader, as if it had
//     beaten there, and a follower that dies holding a batch has answered
//     none of it (its agents try again, at another member);
//   - the leader notes each beat as received when the follower received
//     it (the follower sends each beat's age, measured on its own clock),
//     so the window delays nothing the leader judges by (the sweep that
//     declares agents missing, preflight's heartbeat grace), and a batch
//     held up (a frozen follower) cannot make an agent look alive now;
//   - the leader checks every relayed beat against its own state and
//     commits a change the follower's replica did not show yet;
//   - a batch that does not reach a leader (none known, a leader change,
//     a leader of an older release that does not know the route, an
//     error) sends each of its beats on the forwarding path, which answers
//     as it always did.

// DefaultBeatRelayWindow is the default of Config.BeatRelayWindow.
const DefaultBeatRelayWindow = 20 * time.Millisecond

// MaxRelayedBeats bounds one relayed batch: a full batch is sent at once,
// without waiting for the rest of the window. About 1 MB of JSON at most.
const MaxRelayedBeats = 2000

// relayTimeout bounds one batch's round trip to the leader; the
// forwarding transport's pings notice a leader that froze sooner.
const relayTimeout = 5 * time.Second

// relayedBeatsPath is the route a follower relays beats to.
const relayedBeatsPath = "/v1/agents/heartbeats"

// beatRelay gathers the beats of one follower and relays them.
type beatRelay struct {
	h      *handlers
	window time.Duration
	client *http.Client
	scheme string

	mu      sync.Mutex
	pending []*pendingBeat
	timer   *time.Timer
}

// pendingBeat is a beat waiting for its batch's answer.
type pendingBeat struct {
	health api.AgentHealth
	serial string    // the agent's certificate's
	at     time.Time // received, on this member's clock
	answer chan relayAnswer
}

// relayAnswer is the leader's answer to one beat (problem nil: noted), or
// err when its batch did not reach a leader.
type relayAnswer struct {
	problem *api.Problem
	err     error
}

func newBeatRelay(h *handlers) *beatRelay {
	b := &beatRelay{h: h, window: h.cfg.BeatRelayWindow, scheme: "http", client: &http.Client{}}
	if h.cfg.ForwardTransport != nil {
		b.scheme, b.client.Transport = "https", h.cfg.ForwardTransport
	}
	return b
}

// relay adds hb to the current batch and waits for the leader's answer to
// it. An error means the batch did not reach a leader: the caller sends
// the beat on its own.
func (b *beatRelay) relay(ctx context.Context, hb api.AgentHealth, serial string) (*api.Problem, error) {
	p := &pendingBeat{health: hb, serial: serial, at: b.h.cfg.Clock.Now(), answer: make(chan relayAnswer, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	switch {
	case len(b.pending) >= MaxRelayedBeats:
		batch := b.take()
		go b.send(batch)
	case len(b.pending) == 1:
		b.timer = time.AfterFunc(b.window, b.flush)
	}
	b.mu.Unlock()
	select {
	case a := <-p.answer:
		return a.problem, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// take empties the current batch; b.mu is held.
func (b *beatRelay) take() []*pendingBeat {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	batch := b.pending
	b.pending = nil
	return batch
}

// flush sends the current batch when its window ends.
func (b *beatRelay) flush() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.send(batch)
	}
}

// send relays batch and answers each of its beats.
func (b *beatRelay) send(batch []*pendingBeat) {
	problems, err := b.deliver(batch)
	if err != nil {
		b.h.cfg.Logger.Debug("relaying heartbeats failed; forwarding each", "beats", len(batch), "err", err)
	}
	for i, p := range batch {
		if err != nil {
			p.answer <- relayAnswer{err: err}
			continue
		}
		p.answer <- relayAnswer{problem: problems[i]}
	}
}

// HeartbeatRelay is what the relay of heartbeats needs: on a follower,
// whether a beat may wait for a batch; on the leader, the batch's beats.
type HeartbeatRelay interface {
	// BeatRelayable reports whether h changes nothing this replica
	// holds, so that the leader needs it for liveness only and a
	// follower may relay it in a batch (a refusal is the error).
	BeatRelayable(h api.AgentHealth) (bool, error)
	RelayedHeartbeats(ctx context.Context, beats []coordinator.RelayedBeat) ([]error, error)
}

// errRelayLeaderChanged ends a relayed batch whose leader was replaced.
var errRelayLeaderChanged = errors.New("the leader changed while heartbeats were relayed")

// deliver sends batch to the leader (or notes it here, on a member elected
// since the beats arrived) and returns the leader's answer to each beat.
func (b *beatRelay) deliver(batch []*pendingBeat) ([]*api.Problem, error) {
	now := b.h.cfg.Clock.Now()
	req := api.RelayedBeats{Beats: make([]api.RelayedBeat, len(batch))}
	for i, p := range batch {
		req.Beats[i] = api.RelayedBeat{Health: p.health, AgeMillis: max(now.Sub(p.at), 0).Milliseconds(), Serial: p.serial}
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), relayTimeout, errors.New("relaying heartbeats timed out"))
	defer cancel()
	changed := b.h.leader.LeaderChanged()
	if b.h.leader.IsLeader() {
		return b.h.noteRelayed(ctx, req)
	}
	leader := b.h.leader.LeaderHTTPAddr()
	if leader == "" {
		return nil, errNoLeader
	}
	if changed != nil {
		ctx2, cancel2 := context.WithCancelCause(ctx)
		defer cancel2(nil)
		go b.h.cancelOnLeaderChange(ctx2, cancel2, errRelayLeaderChanged, leader, changed)
		ctx = ctx2
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.scheme+"://"+leader+relayedBeatsPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(hreq)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("relay heartbeats to leader %s: %w", leader, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("relay heartbeats to leader %s: %s", leader, resp.Status)
	}
	var ans api.RelayedBeatsAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxBodyBytes)).Decode(&ans); err != nil {
		return nil, fmt.Errorf("relay heartbeats to leader %s: %w", leader, err)
	}
	if len(ans.Results) != len(batch) {
		return nil, fmt.Errorf("relay heartbeats to leader %s: %d answers for %d beats", leader, len(ans.Results), len(batch))
	}
	problems := make([]*api.Problem, len(batch))
	for i, r := range ans.Results {
		problems[i] = r.Problem
	}
	return problems, nil
}

// noteRelayed hands relayed beats to this member, which leads, and
// returns its answer to each.
func (h *handlers) noteRelayed(ctx context.Context, req api.RelayedBeats) ([]*api.Problem, error) {
	problems := make([]*api.Problem, len(req.Beats))
	// A beat whose certificate this member's state no longer holds
	// current is refused, as the agent's own request would be here.
	var beats []coordinator.RelayedBeat
	var at []int // beats[j] is req.Beats[at[j]]
	for i, rb := range req.Beats {
		if rb.Serial != "" && !h.authn.AgentCertValid(rb.Health.Cluster, rb.Health.Node, rb.Serial) {
			problems[i] = problemFor(errCertRevoked(rb.Health.Cluster, rb.Health.Node, rb.Serial))
			problems[i].Instance = agentPath(rb.Health, "/heartbeat")
			continue
		}
		beats = append(beats, coordinator.RelayedBeat{Health: rb.Health, Age: time.Duration(rb.AgeMillis) * time.Millisecond})
		at = append(at, i)
	}
	if len(beats) == 0 {
		return problems, nil
	}
	errs, err := h.relay.RelayedHeartbeats(ctx, beats)
	if err != nil {
		return nil, err
	}
	for j, err := range errs {
		if err != nil {
			i := at[j]
			problems[i] = problemFor(err)
			problems[i].Instance = agentPath(beats[j].Health, "/heartbeat")
		}
	}
	return problems, nil
}

func agentPath(h api.AgentHealth, suffix string) string {
	return "/v1/agents/" + h.Cluster + "/" + h.Node + suffix
}

// relayedBeats serves POST /v1/agents/heartbeats: the beats a follower
// relays, on the leader only. A member that does not lead answers 503
// not-leader and is never forwarded to: the follower then sends each beat
// on its own.
func (h *handlers) relayedBeats(w http.ResponseWriter, r *http.Request) {
	var req api.RelayedBeats
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if len(req.Beats) > MaxRelayedBeats {
		writeProblem(w, r, &coordinator.RuleError{Rule: "relayed-beats", Detail: fmt.Sprintf("%d beats; at most %d in one batch", len(req.Beats), MaxRelayedBeats), Err: coordinator.ErrInvalid})
		return
	}
	if !h.leader.IsLeader() {
		writeProblem(w, r, raftstore.ErrNotLeader)
		return
	}
	problems, err := h.noteRelayed(r.Context(), req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	ans := api.RelayedBeatsAnswer{Results: make([]api.RelayedBeatResult, len(problems))}
	for i, p := range problems {
		ans.Results[i].Problem = p
	}
	writeJSON(w, http.StatusOK, ans)
}

// relayBeats serves an agent's heartbeat: on the leader (or a beat a
// follower forwarded) as any agent's call; on a follower, a beat that
// changes nothing its replica holds joins the relayed batch, and any other
// beat, or one whose batch reached no leader, is forwarded on its own.
func (h *handlers) relayBeats(next http.Handler) http.Handler {
	forward := h.leaderOnly(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.beats == nil || h.leader.IsLeader() || r.Header.Get(forwardedHeader) != "" {
			forward.ServeHTTP(w, r)
			return
		}
		// The leader authorizes what is forwarded; what is relayed is
		// authorized here, as the route requires.
		if err := authorize(NeedAgent, PrincipalFrom(r.Context()), r); err != nil {
			writeProblem(w, r, err)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				err = fmt.Errorf("%w: over %d bytes", errTooLarge, MaxBodyBytes)
			} else {
				err = fmt.Errorf("%w: %v", errBadRequest, err)
			}
			writeProblem(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		hb, err := beatOf(w, r)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		relay, err := h.relay.BeatRelayable(hb)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		if relay {
			p, err := h.beats.relay(r.Context(), hb, PrincipalFrom(r.Context()).Serial)
			if err == nil {
				if p != nil {
					writeProblem(w, r, p)
					return
				}
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(w, r)
	})
}
