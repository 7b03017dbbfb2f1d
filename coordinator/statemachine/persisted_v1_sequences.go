package statemachine

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of rollout sequences and their commands (0.2.0,
// sequences.go; see persisted.go: append-only).

type sequenceV1 struct {
	Name      string       `json:"name"`
	Stages    []stageV1    `json:"stages"`
	Overrides []overrideV1 `json:"overrides,omitempty"`
	Failures  []failureV1  `json:"failures,omitempty"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

type failureV1 struct {
	Cluster string    `json:"cluster"`
	Upgrade string    `json:"upgrade"`
	Version string    `json:"version"`
	At      time.Time `json:"at"`
}

// stageV1 is a stage; Soak is nanoseconds.
type stageV1 struct {
	Name     string            `json:"name"`
	Clusters []string          `json:"clusters,omitempty"`
	Selector map[string]string `json:"selector,omitempty"`
	Soak     time.Duration     `json:"soak,omitempty"`
}

type overrideV1 struct {
	Version string    `json:"version"`
	Stage   string    `json:"stage"`
	Action  string    `json:"action"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

type putSequenceCmdV1 struct {
	Name   string    `json:"name"`
	Stages []stageV1 `json:"stages,omitempty"`
	Delete bool      `json:"delete,omitempty"`
	Now    time.Time `json:"now"`
}

type sequenceOverrideCmdV1 struct {
	Sequence string    `json:"sequence"`
	Stage    string    `json:"stage"`
	Version  string    `json:"version"`
	Action   string    `json:"action"`
	Reason   string    `json:"reason,omitempty"`
	Now      time.Time `json:"now"`
}

func stageToV1(s StageRecord) stageV1 {
	return stageV1{Name: s.Name, Clusters: slices.Clone(s.Clusters), Selector: maps.Clone(s.Selector), Soak: s.Soak}
}

func stageFromV1(s stageV1) StageRecord {
	return StageRecord{Name: s.Name, Clusters: slices.Clone(s.Clusters), Selector: maps.Clone(s.Selector), Soak: s.Soak}
}

func sequenceToV1(r SequenceRecord) sequenceV1 {
	return sequenceV1{Name: r.Name, Stages: conv.Slice(r.Stages, stageToV1), UpdatedAt: r.UpdatedAt,
		Overrides: conv.Slice(r.Overrides, func(o OverrideRecord) overrideV1 {
			return overrideV1{Version: o.Version.String(), Stage: o.Stage, Action: o.Action, Reason: o.Reason, At: o.At}
		}),
		Failures: conv.Slice(r.Failures, func(f FailureRecord) failureV1 {
			return failureV1{Cluster: f.Cluster, Upgrade: f.Upgrade, Version: f.Version.String(), At: f.At}
		})}
}

func (d *v1Decoder) sequence(r sequenceV1) SequenceRecord {
	return SequenceRecord{Name: r.Name, Stages: conv.Slice(r.Stages, stageFromV1), UpdatedAt: r.UpdatedAt,
		Overrides: conv.Slice(r.Overrides, func(o overrideV1) OverrideRecord {
			return OverrideRecord{Version: d.version(o.Version), Stage: o.Stage, Action: o.Action, Reason: o.Reason, At: o.At}
		}),
		Failures: conv.Slice(r.Failures, func(f failureV1) FailureRecord {
			return FailureRecord{Cluster: f.Cluster, Upgrade: f.Upgrade, Version: d.version(f.Version), At: f.At}
		})}
}

func (c PutSequenceCmd) persistedV1() any {
	return putSequenceCmdV1{Name: c.Name, Stages: conv.Slice(c.Stages, stageToV1), Delete: c.Delete, Now: c.Now}
}

func (c PutSequenceCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PutSequenceCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p putSequenceCmdV1) PutSequenceCmd {
		return PutSequenceCmd{Name: p.Name, Stages: conv.Slice(p.Stages, stageFromV1), Delete: p.Delete, Now: p.Now}
	})
}

func (c SequenceOverrideCmd) persistedV1() any {
	return sequenceOverrideCmdV1{Sequence: c.Sequence, Stage: c.Stage, Version: c.Version.String(), Action: c.Action, Reason: c.Reason, Now: c.Now}
}

func (c SequenceOverrideCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *SequenceOverrideCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(d *v1Decoder, p sequenceOverrideCmdV1) SequenceOverrideCmd {
		return SequenceOverrideCmd{Sequence: p.Sequence, Stage: p.Stage, Version: d.version(p.Version), Action: p.Action, Reason: p.Reason, Now: p.Now}
	})
}
