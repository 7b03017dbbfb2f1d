package statemachine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/moltproject/molt/raftstore/command"
)

// The audit log: one record per write request (who, role, what, when,
// outcome), replicated like everything else and bounded.
//
// A request's write and its record are one log entry: the leader wraps
// the command a request proposes in an AuditedCmd carrying the request's
// record, and the apply function of CmdAudited applies the command and,
// only if it applied, appends the record. A committed write therefore
// always has its record, whatever fails next (the leader dying right
// after the commit included), and a write refused when its entry lands
// leaves none. Everything else a request did — a refusal (before
// proposing, or of its entry when it landed), a write that is not a
// command of this machine (Raft membership), a write whose answer was not
// its success — is recorded by an AppendAuditCmd of its own, proposed
// after the outcome is known.
//
// Records are kept in two classes, each bounded by the same retention:
// operators' requests (AuditLog) and agents' (AgentAuditLog: enrollment
// and certificate renewal), so that a fleet of agents renewing their
// certificates cannot push operators' records out. Retention travels in
// every audit command, so every replica trims alike.
//
// Releases before this log kept an audit trail of a few commands' own
// (state.Audit: pool commands, node retries, maintenance policies,
// emergency overrides), which old entries still write when replayed. The
// first audit record moves that trail into AuditLog, numbered before it;
// from then on those commands, applied bare, append to AuditLog, and
// applied inside an AuditedCmd add nothing of their own (the request's
// record names who asked, which the trail never knew).

// AuditRecord is one record of the audit log. Fields are what the leader
// saw of the request; Seq and Index are given by the apply function.
type AuditRecord struct {
	// Seq numbers records in the order they were appended, from 1, across
	// both classes; it is the cursor of GET /v1/audit.
	Seq uint64
	// Index is the Raft index of the entry that appended the record (for
	// an applied write, the write's own entry); 0 for records moved from
	// the audit trail of releases before this log.
	Index uint64
	// Time is the leader's clock when it proposed the record.
	Time time.Time
	// Principal is who asked, as authenticated ("token:<id> (<description>)",
	// "agent:<cluster>/<node>", "bootstrap-token:<id>", "member:<id>"); Kind is
	// its kind (operator, agent, bootstrap, member) and Role an operator's role.
	Principal string
	Kind      string
	Role      string
	// Method, Route (the route's pattern) and Path are the request's.
	Method string
	Route  string
	Path   string
	// Cluster, Pool and Node are what the request names, where it names them.
	Cluster string
	Pool    string
	Node    string
	// Status is the HTTP status of the answer: for a write recorded with
	// its command, the status its route answers on success. Problem (the
	// problem type) and Rule are a refusal's.
	Status  int
	Problem string
	Rule    string
	// Reason is an emergency override's reason.
	Reason string
	// Detail says more of what was done, never a secret (a new token's ID,
	// an upgrade's target, whether a kubeconfig came with a cluster).
	Detail string
	// Action names what a record moved from the old audit trail did
	// ("pool-cancel", "emergency-override", …); empty for requests.
	Action string
	// Suppressed counts this principal's refusals since its last recorded
	// one that were not recorded: refusals are recorded at a bounded rate
	// per principal.
	Suppressed int
}

// agent reports whether the record is of an agent's request (enrollment
// with a bootstrap token, renewal with its certificate).
func (r *AuditRecord) agent() bool { return r.Kind == "agent" || r.Kind == "bootstrap" }

// AuditRetention bounds the audit log; it travels in every audit command.
type AuditRetention struct {
	// MaxEntries bounds each class of records; older records go first.
	// Zero or less means DefaultAuditMaxEntries; more than
	// MaxAuditMaxEntries means that.
	MaxEntries int
	// MaxAge drops records older than this, measured from the newest
	// record's time; zero keeps records until MaxEntries pushes them out.
	MaxAge time.Duration
}

// Bounds of AuditRetention.MaxEntries.
const (
	DefaultAuditMaxEntries = 10000
	MaxAuditMaxEntries     = 1000000
)

func (r AuditRetention) maxEntries() int {
	switch {
	case r.MaxEntries <= 0:
		return DefaultAuditMaxEntries
	case r.MaxEntries > MaxAuditMaxEntries:
		return MaxAuditMaxEntries
	}
	return r.MaxEntries
}

// AppendAuditCmd (CmdAppendAudit) appends a record that no command of the
// request carries: a refusal, or a write outside this machine.
type AppendAuditCmd struct {
	Record    AuditRecord
	Retention AuditRetention
}

// AuditedCmd (CmdAudited) is a command a request proposes, of type
// CommandType and encoded as Command (its persisted form), with the
// request's record: the record is appended if, and only if, the command
// applies. Build one with NewAudited, which takes both from the command.
type AuditedCmd struct {
	Record      AuditRecord
	Retention   AuditRetention
	CommandType command.Type
	Command     json.RawMessage
}

// NewAudited wraps cmd, with the request's record, in an AuditedCmd.
func NewAudited(rec AuditRecord, ret AuditRetention, cmd Command) (AuditedCmd, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return AuditedCmd{}, fmt.Errorf("coordinator: encode command %s: %w", cmd.Type(), err)
	}
	return AuditedCmd{Record: rec, Retention: ret, CommandType: cmd.Type(), Command: body}, nil
}

func (s *state) appendAudit(index uint64, c AppendAuditCmd) (any, error) {
	s.record(c.Record, c.Retention, index)
	return nil, nil
}

// audited returns the apply of CmdAudited: it decodes the command inside
// with the decoder of its type (an unknown or nested type means the
// replicas diverged, like an undecodable body) and applies it with the
// trail of old commands silenced; the record follows only if it applied.
func audited(decoders map[command.Type]decoder) decoder {
	return func(index uint64, body []byte) applyStep {
		var c AuditedCmd
		if err := decodeBody(index, CmdAudited, body, &c); err != nil {
			return refuse(err)
		}
		dec, ok := decoders[c.CommandType]
		if !ok && c.CommandType.Base() >= command.FirstDomainType {
			// A command of a newer release, audited: this release
			// cannot read it (raftstore halts the replica here).
			return refuse(fmt.Errorf("audited command at index %d: %w: command %s is unknown to this release", index, command.ErrCannotRead, c.CommandType))
		}
		if !ok || c.CommandType == CmdAudited || c.CommandType == CmdAppendAudit {
			panic(fmt.Sprintf("coordinator: audited command at index %d carries command type %s, which this release does not apply there", index, c.CommandType))
		}
		step := dec(index, c.Command)
		return func(s *state) (any, error) {
			s.enveloped = true
			v, err := step(s)
			s.enveloped = false
			if err == nil {
				s.record(c.Record, c.Retention, index)
			}
			return v, err
		}
	}
}

// record appends r at the Raft index index, numbered next, and trims both
// classes to the retention.
func (s *state) record(r AuditRecord, ret AuditRetention, index uint64) {
	s.adoptTrail()
	s.AuditSeq++
	r.Seq, r.Index = s.AuditSeq, index
	if r.agent() {
		s.AgentAuditLog = append(s.AgentAuditLog, r)
	} else {
		s.AuditLog = append(s.AuditLog, r)
	}
	s.AuditLog = trimAudit(s.AuditLog, ret, r.Time)
	s.AgentAuditLog = trimAudit(s.AgentAuditLog, ret, r.Time)
}

// trimAudit drops the oldest records beyond the retention's count, and
// those older than its age at now.
func trimAudit(l []AuditRecord, ret AuditRetention, now time.Time) []AuditRecord {
	drop := max(0, len(l)-ret.maxEntries())
	if ret.MaxAge > 0 {
		cutoff := now.Add(-ret.MaxAge)
		for drop < len(l) && l[drop].Time.Before(cutoff) {
			drop++
		}
	}
	if drop == 0 {
		return l
	}
	if drop == len(l) {
		return nil
	}
	return l[drop:]
}

// maxTrail bounds the audit trail of releases before the audit log, as
// they bounded it.
const maxTrail = 1000

// audit appends to the old audit trail, for the commands that kept one
// (see the comment at the top of this file): silenced inside an
// AuditedCmd; as releases before the audit log did while no record
// exists; into AuditLog, with no principal, once one does.
func (s *state) audit(e AuditEntry) {
	switch {
	case s.enveloped:
	case s.AuditSeq == 0:
		s.Audit = append(s.Audit, e)
		if len(s.Audit) > maxTrail {
			s.Audit = s.Audit[len(s.Audit)-maxTrail:]
		}
	default:
		s.AuditSeq++
		s.AuditLog = append(s.AuditLog, trailRecord(e, s.AuditSeq, s.index))
	}
}

// adoptTrail moves the old audit trail into AuditLog, numbered from 1 in
// its order, before the first record is appended.
func (s *state) adoptTrail() {
	if s.AuditSeq != 0 {
		return
	}
	for _, e := range s.Audit {
		s.AuditSeq++
		s.AuditLog = append(s.AuditLog, trailRecord(e, s.AuditSeq, 0))
	}
	s.Audit = nil
}

func trailRecord(e AuditEntry, seq, index uint64) AuditRecord {
	return AuditRecord{Seq: seq, Index: index, Time: e.Time, Cluster: e.Cluster, Action: e.Action, Detail: e.Detail}
}

// AuditQuery selects records of the audit log, newest first.
type AuditQuery struct {
	// Before, when not zero, returns only records numbered below it (the
	// Seq of the last record of the previous page).
	Before uint64
	// Limit bounds how many records come back (at least 1).
	Limit int
	// Cluster and Principal, when set, must match: Principal is a whole
	// principal or its first word ("token:<id>").
	Cluster   string
	Principal string
	// Since (inclusive) and Until (exclusive), when set, bound Time.
	Since, Until time.Time
}

func (q *AuditQuery) matches(r *AuditRecord) bool {
	switch {
	case q.Before != 0 && r.Seq >= q.Before,
		q.Cluster != "" && r.Cluster != q.Cluster,
		q.Principal != "" && r.Principal != q.Principal && !strings.HasPrefix(r.Principal, q.Principal+" "),
		!q.Since.IsZero() && r.Time.Before(q.Since),
		!q.Until.IsZero() && !r.Time.Before(q.Until):
		return false
	}
	return true
}

// AuditLog returns the records q selects, newest first, and whether older
// ones match too (then q with Before set to the last record's Seq reads
// on). Before the first record, the old audit trail is shown numbered as
// it will be once moved.
func (f *Machine) AuditLog(q AuditQuery) ([]AuditRecord, bool) {
	limit := max(q.Limit, 1)
	f.mu.RLock()
	defer f.mu.RUnlock()
	ops, agents := f.st.AuditLog, f.st.AgentAuditLog
	if f.st.AuditSeq == 0 {
		ops = make([]AuditRecord, len(f.st.Audit))
		for i, e := range f.st.Audit {
			ops[i] = trailRecord(e, uint64(i+1), 0)
		}
	}
	var out []AuditRecord
	i, j := len(ops)-1, len(agents)-1
	for i >= 0 || j >= 0 {
		var r *AuditRecord
		if j < 0 || i >= 0 && ops[i].Seq > agents[j].Seq {
			r, i = &ops[i], i-1
		} else {
			r, j = &agents[j], j-1
		}
		if !q.matches(r) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, *r)
	}
	return out, false
}
