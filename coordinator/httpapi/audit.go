package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// The audit log's side of the API (docs/security.md, "Audit log").
//
// Every route declared write(…) in routes.go goes through recordWrite on
// the leader, after authentication and forwarding (a write a follower
// forwards is recorded once, by the leader, with the principal the
// follower authenticated) and before authorization (so a refusal for a
// too-low role is recorded too). Only an authenticated principal is ever
// recorded: authentication refuses anonymous callers and bad credentials
// (401) before this. recordWrite hands the request's record down in its
// context; the coordinator carries it in the same log entry as the write
// the request proposes. Otherwise — a refusal, a write outside the state
// machine (Raft membership, a member's certificate), an answer other than
// the route's success after its write applied — recordWrite appends the
// record on its own before the answer leaves, so a client that saw the
// answer can read the record. Refusals are recorded at a bounded rate per
// principal (refusalLimiter).

// Defaults of Config.AuditRefusalEvery and Config.AuditRefusalBurst.
const (
	DefaultAuditRefusalEvery = time.Second
	DefaultAuditRefusalBurst = 20
)

// AuditTrail is the audit log (audit.go in package coordinator): writes
// proposed under a context that carries a coordinator.AuditIntent carry
// its record; RecordAudit appends one on its own (a refusal, a write
// outside the state machine); AuditLog reads this member's replica.
type AuditTrail interface {
	RecordAudit(ctx context.Context, r coordinator.AuditRecord) error
	AuditLog(q api.AuditQuery) api.AuditPage
}

// auditTimeout bounds appending a record on its own.
const auditTimeout = 10 * time.Second

// maxAuditField bounds each string of a record that comes from the
// request (path, names): a refused request may name anything.
const maxAuditField = 256

// clip cuts s to maxAuditField bytes, on a UTF-8 boundary.
func clip(s string) string {
	if len(s) <= maxAuditField {
		return s
	}
	return strings.ToValidUTF8(s[:maxAuditField], "") + "…"
}

// recordWrite records the request of an audited write (rt.serve.audit).
func (h *handlers) recordWrite(rt route) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := PrincipalFrom(r.Context())
			if p.Kind == KindAnonymous { // authenticate refuses these first
				next.ServeHTTP(w, r)
				return
			}
			in := &coordinator.AuditIntent{OK: rt.serve.audit, Record: coordinator.AuditRecord{
				Principal: p.Name, Kind: p.Kind, Role: string(p.Role),
				Method: r.Method, Route: rt.pattern, Path: clip(r.URL.Path),
				Cluster: clip(firstParam(r, "name", "cluster")),
				Pool:    clip(chi.URLParam(r, "pool")), Node: clip(chi.URLParam(r, "node")),
			}}
			if in.Record.Cluster == "" {
				in.Record.Cluster = p.Cluster // the cluster a bootstrap token enrolls agents of
			}
			buf := &bufferedAnswer{header: http.Header{}}
			next.ServeHTTP(buf, r.WithContext(coordinator.WithAuditIntent(r.Context(), in)))
			h.recordOutcome(r, p, in, buf)
			buf.sendTo(w)
		})
	}
}

// firstParam is the first of the URL parameters that is set: routes name
// a cluster {name} or, agents' routes, {cluster}.
func firstParam(r *http.Request, keys ...string) string {
	for _, k := range keys {
		if v := chi.URLParam(r, k); v != "" {
			return v
		}
	}
	return ""
}

// recordOutcome appends the record of a request whose write did not carry
// it, or whose answer is not the one its write recorded.
func (h *handlers) recordOutcome(r *http.Request, p Principal, in *coordinator.AuditIntent, ans *bufferedAnswer) {
	status := ans.status
	if in.Skipped() || in.Recorded() && status == in.OK {
		return
	}
	rec := in.Record
	rec.Status = status
	if status >= 400 {
		var pr api.Problem
		if json.Unmarshal(ans.body.Bytes(), &pr) == nil {
			rec.Problem, rec.Rule = clip(pr.Type), clip(pr.Rule)
		}
		ok, suppressed := h.refusals.admit(p.Name, h.cfg.Clock.Now())
		if !ok {
			h.cfg.Logger.Debug("refusal not recorded in the audit log: rate of the principal's refusals reached", "principal", p.Name, "method", r.Method, "path", r.URL.Path, "status", status)
			return
		}
		rec.Suppressed = suppressed
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if err := h.trail.RecordAudit(ctx, rec); err != nil {
		h.cfg.Logger.Warn("audit record not stored", "principal", p.Name, "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
}

// bufferedAnswer holds a handler's answer until its record is stored.
// Audited writes answer small bodies; none streams.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header { return b.header }

func (b *bufferedAnswer) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedAnswer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// sendTo writes the held answer to w.
func (b *bufferedAnswer) sendTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

// refusalLimiter bounds the refusals the audit log records per principal:
// an authenticated caller that sends refused requests in a loop adds at
// most a burst, then one record per interval; the next recorded refusal
// says how many were left out. It lives on the leader, which records.
type refusalLimiter struct {
	every time.Duration
	burst int

	mu sync.Mutex
	by map[string]*refusalBucket
}

type refusalBucket struct {
	lim        *rate.Limiter
	suppressed int
}

// maxRefusalBuckets bounds the principals the limiter tracks; idle ones
// are forgotten beyond it.
const maxRefusalBuckets = 4096

func newRefusalLimiter(every time.Duration, burst int) *refusalLimiter {
	return &refusalLimiter{every: every, burst: burst, by: map[string]*refusalBucket{}}
}

// admit reports whether principal's refusal at now is recorded, and how
// many of its refusals were not since the last one that was.
func (l *refusalLimiter) admit(principal string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.by[principal]
	if b == nil {
		if len(l.by) >= maxRefusalBuckets {
			for k, o := range l.by {
				if o.suppressed == 0 && o.lim.TokensAt(now) >= float64(l.burst) {
					delete(l.by, k)
				}
			}
		}
		b = &refusalBucket{lim: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.by[principal] = b
	}
	if !b.lim.AllowN(now, 1) {
		b.suppressed++
		return false, 0
	}
	n := b.suppressed
	b.suppressed = 0
	return true, n
}

// audit serves GET /v1/audit (admin): a page of the audit log from this
// member's replica, newest first. Query: cluster, principal, since and
// until (RFC 3339; since inclusive, until exclusive), before (a record's
// seq: read older ones) and limit (1..1000, default 100). Anything else,
// or a parameter given twice, is refused (422 validation, naming it).
func (h *handlers) audit(w http.ResponseWriter, r *http.Request) {
	q, err := parseAuditQuery(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.trail.AuditLog(q))
}

func parseAuditQuery(r *http.Request) (api.AuditQuery, error) {
	var q api.AuditQuery
	bad := func(rule, format string, args ...any) error {
		return &coordinator.RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...), Err: coordinator.ErrInvalid}
	}
	vals := r.URL.Query()
	for k, v := range vals {
		if len(v) > 1 {
			return q, bad(k, "%s given %d times; give it once", k, len(v))
		}
		s := v[0]
		if len(s) > maxAuditField {
			return q, bad(k, "%s: at most %d bytes", k, maxAuditField)
		}
		var err error
		switch k {
		case "cluster":
			q.Cluster = s
		case "principal":
			q.Principal = s
		case "since", "until":
			t, perr := time.Parse(time.RFC3339Nano, s)
			if perr != nil {
				return q, bad(k, "%s=%q is not an RFC 3339 time (2026-11-23T12:00:00Z)", k, s)
			}
			if k == "since" {
				q.Since = t
			} else {
				q.Until = t
			}
		case "before":
			q.Before, err = strconv.ParseUint(s, 10, 64)
			if err != nil || q.Before == 0 {
				return q, bad(k, "before=%q: want a record's seq, a whole number from 1", s)
			}
		case "limit":
			q.Limit, err = strconv.Atoi(s)
			if err != nil || q.Limit < 1 || q.Limit > api.MaxAuditLimit {
				return q, bad(k, "limit=%q: want 1 to %d", s, api.MaxAuditLimit)
			}
		default:
			return q, bad("query", "unknown parameter %q: want cluster, principal, since, until, before or limit", k)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return q, bad("until", "until (%s) must be after since (%s)", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	return q, nil
}
