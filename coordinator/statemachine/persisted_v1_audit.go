package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/raftstore/command"
)

// Persisted form of the audit log's records and commands (audit.go; see
// persisted.go: append-only).

type auditRecordV1 struct {
	Seq        uint64    `json:"seq,omitempty"`
	Index      uint64    `json:"index,omitempty"`
	Time       time.Time `json:"time"`
	Principal  string    `json:"principal,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	Role       string    `json:"role,omitempty"`
	Method     string    `json:"method,omitempty"`
	Route      string    `json:"route,omitempty"`
	Path       string    `json:"path,omitempty"`
	Cluster    string    `json:"cluster,omitempty"`
	Pool       string    `json:"pool,omitempty"`
	Node       string    `json:"node,omitempty"`
	Status     int       `json:"status,omitempty"`
	Problem    string    `json:"problem,omitempty"`
	Rule       string    `json:"rule,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Action     string    `json:"action,omitempty"`
	Suppressed int       `json:"suppressed,omitempty"`
}

func auditRecordToV1(r AuditRecord) auditRecordV1   { return auditRecordV1(r) }
func auditRecordFromV1(r auditRecordV1) AuditRecord { return AuditRecord(r) }

type auditRetentionV1 struct {
	MaxEntries int           `json:"maxEntries,omitempty"`
	MaxAge     time.Duration `json:"maxAge,omitempty"`
}

type appendAuditCmdV1 struct {
	Record    auditRecordV1    `json:"record"`
	Retention auditRetentionV1 `json:"retention"`
}

func (c AppendAuditCmd) persistedV1() any {
	return appendAuditCmdV1{Record: auditRecordToV1(c.Record), Retention: auditRetentionV1(c.Retention)}
}

func (c AppendAuditCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AppendAuditCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p appendAuditCmdV1) AppendAuditCmd {
		return AppendAuditCmd{Record: auditRecordFromV1(p.Record), Retention: AuditRetention(p.Retention)}
	})
}

type auditedCmdV1 struct {
	Record    auditRecordV1    `json:"record"`
	Retention auditRetentionV1 `json:"retention"`
	// Type and Command are the command inside: its number and its own
	// persisted form, as it would be a log entry's body on its own.
	Type    uint8           `json:"type"`
	Command json.RawMessage `json:"command"`
}

func (c AuditedCmd) persistedV1() any {
	return auditedCmdV1{Record: auditRecordToV1(c.Record), Retention: auditRetentionV1(c.Retention), Type: uint8(c.CommandType), Command: c.Command}
}

func (c AuditedCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AuditedCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p auditedCmdV1) AuditedCmd {
		return AuditedCmd{Record: auditRecordFromV1(p.Record), Retention: AuditRetention(p.Retention), CommandType: command.Type(p.Type), Command: p.Command}
	})
}
