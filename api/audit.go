package api

import (
	"net/url"
	"strconv"
	"time"
)

// AuditEntry is one record of the coordinator's audit log: who made a
// write request, with which role, what it asked, when, and what came of
// it (GET /v1/audit; docs/security.md says what is recorded).
type AuditEntry struct {
	// Seq numbers records in the order they were appended; pass the last
	// one's as before= to read older ones.
	Seq uint64 `json:"seq"`
	// Index is the Raft index of the entry that recorded it: for a write
	// that applied, the write's own entry. 0 for records kept from the
	// audit trail of releases before the audit log.
	Index uint64 `json:"index,omitempty"`
	// Time is the coordinator leader's clock when it recorded the request.
	Time time.Time `json:"time"`
	// Principal is the authenticated caller: "token:<id> (<description>)",
	// "agent:<cluster>/<node>", "bootstrap-token:<id>", "member:<id>";
	// PrincipalKind is operator, agent, bootstrap or member, Role an
	// operator's role. Empty for records from before principals were
	// recorded.
	Principal     string `json:"principal,omitempty"`
	PrincipalKind string `json:"principalKind,omitempty"`
	Role          string `json:"role,omitempty"`
	// Method, Route (the route's pattern, as docs/api.md lists it) and
	// Path are the request's.
	Method string `json:"method,omitempty"`
	Route  string `json:"route,omitempty"`
	Path   string `json:"path,omitempty"`
	// Cluster, Pool and Node are what the request names.
	Cluster string `json:"cluster,omitempty"`
	Pool    string `json:"pool,omitempty"`
	Node    string `json:"node,omitempty"`
	// Status is the HTTP status of the answer; Outcome is "ok" (2xx, and
	// records kept from the old trail, which recorded only what applied),
	// "refused" (4xx) or "failed" (5xx).
	Status  int    `json:"status,omitempty"`
	Outcome string `json:"outcome"`
	// Problem (the problem type) and Rule are a refusal's.
	Problem string `json:"problem,omitempty"`
	Rule    string `json:"rule,omitempty"`
	// Reason is an emergency override's reason.
	Reason string `json:"reason,omitempty"`
	// Detail says more of what was done (a new token's ID and role, an
	// upgrade's target, whether a kubeconfig came with a cluster); it
	// never holds a secret.
	Detail string `json:"detail,omitempty"`
	// Action names what a record that no request made did: records kept
	// from the old audit trail ("pool-cancel", "node-retry",
	// "maintenance-policy", "emergency-override"), and what the leader
	// decided on its own ("pool-failed", "pool-rollback" when a pool's
	// policy rolls it back, "upgrade-failed").
	Action string `json:"action,omitempty"`
	// Suppressed counts refusals of this principal since its previous
	// recorded refusal that were not recorded (refusals are recorded at a
	// bounded rate per principal).
	Suppressed int `json:"suppressed,omitempty"`
}

// Audit outcomes.
const (
	AuditOK      = "ok"
	AuditRefused = "refused"
	AuditFailed  = "failed"
)

// AuditOutcome is the outcome of an answer's status (0: a record of the
// old audit trail, which recorded only what applied).
func AuditOutcome(status int) string {
	switch {
	case status >= 500:
		return AuditFailed
	case status >= 400:
		return AuditRefused
	}
	return AuditOK
}

// AuditPage is a page of the audit log, newest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	// Next, when not zero, reads on: pass it as before= (AuditQuery.Before).
	Next uint64 `json:"next,omitempty"`
}

// Bounds of an audit page.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// AuditQuery selects records of the audit log (the query of
// GET /v1/audit). Zero fields select everything.
type AuditQuery struct {
	Cluster string
	// Principal is a whole principal or its first word ("token:<id>").
	Principal string
	// Since (inclusive) and Until (exclusive) bound the records' time.
	Since, Until time.Time
	// Before reads records numbered below it (AuditPage.Next).
	Before uint64
	// Limit bounds the page: 1..MaxAuditLimit, 0 meaning DefaultAuditLimit.
	Limit int
}

// Values encodes q as GET /v1/audit's query.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("cluster", q.Cluster)
	set("principal", q.Principal)
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Before != 0 {
		v.Set("before", strconv.FormatUint(q.Before, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}
