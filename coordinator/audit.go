package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// The audit log (statemachine/audit.go). The HTTP layer builds each write
// request's record (who, what) and hands it down in the request's context
// as an AuditIntent; the service method adds what only it knows (a new
// token's ID, an upgrade's versions); apply carries the record in the
// same entry as the first command the request proposes (CmdAudited), so a
// committed write always has its record. What did not apply that way — a
// refusal, a write outside the state machine — the HTTP layer records
// afterwards with RecordAudit (CmdAppendAudit).

// AuditRecord is one record of the audit log: statemachine.AuditRecord.
type AuditRecord = statemachine.AuditRecord

// AuditIntent is the audit record of one request in flight.
type AuditIntent struct {
	// Record is who asked and what; its Time, Seq, Index and Status are
	// set when it is proposed.
	Record AuditRecord
	// OK is the status the request's route answers when its write applied:
	// the Status of the record carried with the write.
	OK int

	recorded atomic.Bool
	skip     atomic.Bool
}

// Recorded reports whether the record was committed with the request's
// write.
func (in *AuditIntent) Recorded() bool { return in.recorded.Load() }

// Skip marks a request that turned out to change nothing and refuse
// nothing (a dry run): it is not recorded.
func (in *AuditIntent) Skip() { in.skip.Store(true) }

// Skipped reports whether Skip was called.
func (in *AuditIntent) Skipped() bool { return in.skip.Load() }

type auditKey struct{}

// WithAuditIntent returns ctx carrying in: writes the coordinator
// proposes under ctx carry in's record.
func WithAuditIntent(ctx context.Context, in *AuditIntent) context.Context {
	return context.WithValue(ctx, auditKey{}, in)
}

// AuditIntentFrom returns the intent ctx carries, or nil.
func AuditIntentFrom(ctx context.Context) *AuditIntent {
	in, _ := ctx.Value(auditKey{}).(*AuditIntent)
	return in
}

// noteAudit lets a service method add to the record of the request ctx
// belongs to, if it has one. It is called before the write is proposed.
func noteAudit(ctx context.Context, fn func(*AuditRecord)) {
	if in := AuditIntentFrom(ctx); in != nil && !in.Recorded() {
		fn(&in.Record)
	}
}

// auditRetention is what every audit command carries.
func (c *Coordinator) auditRetention() statemachine.AuditRetention {
	return statemachine.AuditRetention{MaxEntries: c.cfg.AuditMaxEntries, MaxAge: c.cfg.AuditMaxAge}
}

// applyAudited proposes cmd inside a CmdAudited entry with in's record.
func (c *Coordinator) applyAudited(ctx context.Context, in *AuditIntent, cmd statemachine.Command) (any, error) {
	rec := in.Record
	rec.Time, rec.Status = c.cfg.Clock.Now(), in.OK
	audited, err := statemachine.NewAudited(rec, c.auditRetention(), cmd)
	if err != nil {
		return nil, err
	}
	v, err := c.applyBare(ctx, audited)
	if err == nil {
		in.recorded.Store(true)
	}
	return v, err
}

// RecordAudit appends a record on its own, stamped with the leader's
// clock.
func (c *Coordinator) RecordAudit(ctx context.Context, rec AuditRecord) error {
	rec.Time = c.cfg.Clock.Now()
	_, err := c.applyBare(ctx, statemachine.AppendAuditCmd{Record: rec, Retention: c.auditRetention()})
	return err
}

// AuditLog reads a page of the audit log from this member's replica,
// newest first. q's bounds are the HTTP layer's to check; a limit out of
// them is brought into them here.
func (c *Coordinator) AuditLog(q api.AuditQuery) api.AuditPage {
	limit := q.Limit
	if limit <= 0 {
		limit = api.DefaultAuditLimit
	}
	recs, more := c.sm.AuditLog(statemachine.AuditQuery{Before: q.Before, Limit: min(limit, api.MaxAuditLimit),
		Cluster: q.Cluster, Principal: q.Principal, Since: q.Since, Until: q.Until})
	page := api.AuditPage{Entries: make([]api.AuditEntry, len(recs))}
	for i, r := range recs {
		page.Entries[i] = auditEntryToAPI(r)
	}
	if more {
		page.Next = recs[len(recs)-1].Seq
	}
	return page
}

func auditEntryToAPI(r AuditRecord) api.AuditEntry {
	return api.AuditEntry{Seq: r.Seq, Index: r.Index, Time: r.Time, Principal: r.Principal, PrincipalKind: r.Kind, Role: r.Role,
		Method: r.Method, Route: r.Route, Path: r.Path, Cluster: r.Cluster, Pool: r.Pool, Node: r.Node,
		Status: r.Status, Outcome: api.AuditOutcome(r.Status), Problem: r.Problem, Rule: r.Rule,
		Reason: r.Reason, Detail: r.Detail, Action: r.Action, Suppressed: r.Suppressed}
}

// checkAuditConfig checks the audit log's settings.
func checkAuditConfig(cfg Config) error {
	if cfg.AuditMaxEntries < 0 || cfg.AuditMaxEntries > statemachine.MaxAuditMaxEntries {
		return fmt.Errorf("coordinator: audit log: at most %d entries per class, not %d", statemachine.MaxAuditMaxEntries, cfg.AuditMaxEntries)
	}
	if cfg.AuditMaxAge < 0 || cfg.AuditMaxAge > 0 && cfg.AuditMaxAge < time.Hour {
		return fmt.Errorf("coordinator: audit log: a maximum age of at least an hour (or 0 for none), not %s", cfg.AuditMaxAge)
	}
	return nil
}
