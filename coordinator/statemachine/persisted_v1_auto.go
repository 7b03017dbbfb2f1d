package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
)

// Persisted form of release channels, clusters' auto-upgrade records and
// the scheduler's commands (see persisted.go: append-only).

type channelV1 struct {
	Name              string    `json:"name"`
	DefaultVersion    string    `json:"defaultVersion,omitempty"`
	AutoUpgradeTarget string    `json:"autoUpgradeTarget,omitempty"`
	UpdatedAt         time.Time `json:"updatedAt"`
}

type autoStateV1 struct {
	Failures    int        `json:"failures,omitempty"`
	NextAttempt time.Time  `json:"nextAttempt,omitzero"`
	LastMinorAt time.Time  `json:"lastMinorAt,omitzero"`
	Last        *attemptV1 `json:"last,omitempty"`
	HeldUntil   time.Time  `json:"heldUntil,omitzero"`
}

type attemptV1 struct {
	Upgrade      string    `json:"upgrade"`
	From         string    `json:"from"`
	To           string    `json:"to"`
	Kind         string    `json:"kind"`
	Reason       string    `json:"reason"`
	EndOfSupport bool      `json:"endOfSupport,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	Outcome      string    `json:"outcome,omitempty"`
	FinishedAt   time.Time `json:"finishedAt,omitzero"`
	Detail       string    `json:"detail,omitempty"`
}

type limitsV1 struct {
	PerFamily int `json:"perFamily,omitempty"`
	Fleet     int `json:"fleet,omitempty"`
}

func channelToV1(c ChannelRecord) channelV1 {
	return channelV1{Name: c.Name, DefaultVersion: c.DefaultVersion.String(), AutoUpgradeTarget: c.AutoUpgradeTarget.String(), UpdatedAt: c.UpdatedAt}
}

func (d *v1Decoder) channel(c channelV1) ChannelRecord {
	return ChannelRecord{Name: c.Name, DefaultVersion: d.version(c.DefaultVersion), AutoUpgradeTarget: d.version(c.AutoUpgradeTarget), UpdatedAt: c.UpdatedAt}
}

// autoStateToV1 keeps an empty record out of the snapshot (nil).
func autoStateToV1(s schedule.State) *autoStateV1 {
	if s == (schedule.State{}) {
		return nil
	}
	return &autoStateV1{Failures: s.Failures, NextAttempt: s.NextAttempt, LastMinorAt: s.LastMinorAt, Last: conv.Ptr(s.Last, attemptToV1), HeldUntil: s.HeldUntil}
}

func (d *v1Decoder) autoState(s *autoStateV1) schedule.State {
	if s == nil {
		return schedule.State{}
	}
	return schedule.State{Failures: s.Failures, NextAttempt: s.NextAttempt, LastMinorAt: s.LastMinorAt, Last: conv.Ptr(s.Last, d.attempt), HeldUntil: s.HeldUntil}
}

func attemptToV1(a schedule.Attempt) attemptV1 {
	return attemptV1{Upgrade: a.Upgrade, From: a.From.String(), To: a.To.String(), Kind: string(a.Kind), Reason: a.Reason,
		EndOfSupport: a.EndOfSupport, StartedAt: a.StartedAt, Outcome: a.Outcome, FinishedAt: a.FinishedAt, Detail: a.Detail}
}

func (d *v1Decoder) attempt(a attemptV1) schedule.Attempt {
	return schedule.Attempt{Upgrade: a.Upgrade, From: d.version(a.From), To: d.version(a.To), Kind: maintenance.ChangeKind(a.Kind), Reason: a.Reason,
		EndOfSupport: a.EndOfSupport, StartedAt: a.StartedAt, Outcome: a.Outcome, FinishedAt: a.FinishedAt, Detail: a.Detail}
}

type putChannelCmdV1 struct {
	Channel           string    `json:"channel"`
	DefaultVersion    string    `json:"defaultVersion,omitempty"`
	AutoUpgradeTarget string    `json:"autoUpgradeTarget,omitempty"`
	Now               time.Time `json:"now"`
}

func (c PutChannelCmd) persistedV1() any { return putChannelToV1(c) }

func (c PutChannelCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PutChannelCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, putChannelFromV1) }

func putChannelToV1(c PutChannelCmd) putChannelCmdV1 {
	return putChannelCmdV1{Channel: c.Channel, DefaultVersion: c.DefaultVersion.String(), AutoUpgradeTarget: c.AutoUpgradeTarget.String(), Now: c.Now}
}

func putChannelFromV1(d *v1Decoder, c putChannelCmdV1) PutChannelCmd {
	return PutChannelCmd{Channel: c.Channel, DefaultVersion: d.version(c.DefaultVersion), AutoUpgradeTarget: d.version(c.AutoUpgradeTarget), Now: c.Now}
}

type autoStartCmdV1 struct {
	Cluster      string          `json:"cluster"`
	To           string          `json:"to"`
	Kind         string          `json:"kind"`
	EndOfSupport bool            `json:"endOfSupport,omitempty"`
	Reason       string          `json:"reason"`
	Seq          int             `json:"seq"`
	Limits       limitsV1        `json:"limits,omitzero"`
	Options      optionsV1       `json:"options"`
	Preflight    *preflightRunV1 `json:"preflight,omitempty"`
	Now          time.Time       `json:"now"`
}

func (c AutoStartCmd) persistedV1() any { return autoStartToV1(c) }

func (c AutoStartCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AutoStartCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, autoStartFromV1) }

func autoStartToV1(c AutoStartCmd) autoStartCmdV1 {
	return autoStartCmdV1{Cluster: c.Cluster, To: c.To.String(), Kind: string(c.Kind), EndOfSupport: c.EndOfSupport, Reason: c.Reason,
		Seq: c.Seq, Limits: limitsV1(c.Limits), Options: optionsToV1(c.Options), Preflight: conv.Ptr(c.Preflight, preflightRunToV1), Now: c.Now}
}

func autoStartFromV1(d *v1Decoder, c autoStartCmdV1) AutoStartCmd {
	return AutoStartCmd{Cluster: c.Cluster, To: d.version(c.To), Kind: maintenance.ChangeKind(c.Kind), EndOfSupport: c.EndOfSupport, Reason: c.Reason,
		Seq: c.Seq, Limits: schedule.Limits(c.Limits), Options: d.options(c.Options), Preflight: conv.Ptr(c.Preflight, d.preflightRun), Now: c.Now}
}

type autoRecordCmdV1 struct {
	Cluster string    `json:"cluster"`
	Upgrade string    `json:"upgrade"`
	Outcome string    `json:"outcome"`
	Now     time.Time `json:"now"`
}

func (c AutoRecordCmd) persistedV1() any { return autoRecordToV1(c) }

func (c AutoRecordCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AutoRecordCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, autoRecordFromV1) }

func autoRecordToV1(c AutoRecordCmd) autoRecordCmdV1 { return autoRecordCmdV1(c) }

func autoRecordFromV1(_ *v1Decoder, c autoRecordCmdV1) AutoRecordCmd { return AutoRecordCmd(c) }
