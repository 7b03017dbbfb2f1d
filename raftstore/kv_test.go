package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/moltproject/molt/raftstore/command"
)

// The test Machine: a versioned key/value map. A write may carry the version
// it was decided on; a stale one is refused with errStale, the way molt's
// domain commands carry their expected phase.

var errStale = errors.New("kv: stale version")

const (
	cmdPut CommandType = FirstDomainType + iota
	cmdDel
)

// cmdNote is registered with the flag, as a command introduced after older
// binaries shipped would be.
const cmdNote = (FirstDomainType + 10) | IgnoreUnknown

// cmdTag is a command "introduced in 0.2.0": a kvMachine of the older
// release (old) does not register it, so a member running one halts at
// the first entry of it (halt_test.go).
const cmdTag = FirstDomainType + 20

// tagBody is the body of cmdTag: it sets key to "tag:"+Tag.
type tagBody struct {
	Key string `json:"key"`
	Tag string `json:"tag"`
}

func (tagBody) Type() CommandType { return cmdTag }

type putBody struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// ExpectedVersion, when set, must equal the key's current version
	// (0 = absent) or the write is refused.
	ExpectedVersion *uint64 `json:"expected_version,omitempty"`
}

type delBody struct {
	Key string `json:"key"`
}

// noteBody is the body of cmdNote.
type noteBody struct{}

func (putBody) Type() CommandType  { return cmdPut }
func (delBody) Type() CommandType  { return cmdDel }
func (noteBody) Type() CommandType { return cmdNote }

// rawCmd frames any body under any type: what tests of the framing and
// of refusals need, and what a caller of Store.Apply cannot write by
// mistake (it has to build a rawCmd).
type rawCmd struct {
	t    CommandType
	body any
}

func (c rawCmd) Type() CommandType            { return c.t }
func (c rawCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.body) }

type kvEntry struct {
	Value   string `json:"value"`
	Version uint64 `json:"version"` // log index of the last write
}

type kvMachine struct {
	// old plays the release before cmdTag: it does not register it.
	old      bool
	mu       sync.RWMutex
	data     map[string]kvEntry
	notes    int
	restores atomic.Int32
}

func newKV() *kvMachine { return &kvMachine{data: map[string]kvEntry{}} }

func (m *kvMachine) Handlers() map[CommandType]ApplyFunc {
	h := map[CommandType]ApplyFunc{cmdPut: m.put, cmdDel: m.del, cmdNote: m.note}
	if !m.old {
		h[cmdTag] = m.tag
	}
	return h
}

// MinVersion makes kvMachine a VersionedMachine: cmdTag came with 0.2.0,
// the rest with the baseline.
func (m *kvMachine) MinVersion(c Command) string {
	if c.Type() == cmdTag {
		return "0.2.0"
	}
	return command.BaselineVersion
}

func (m *kvMachine) tag(index uint64, body []byte) (any, error) {
	var b tagBody
	if err := command.DecodeBody(body, &b); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[b.Key] = kvEntry{Value: "tag:" + b.Tag, Version: index}
	return index, nil
}

func (m *kvMachine) put(index uint64, body []byte) (any, error) {
	var b putBody
	if err := command.DecodeBody(body, &b); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.data[b.Key]
	if b.ExpectedVersion != nil && *b.ExpectedVersion != cur.Version {
		return nil, fmt.Errorf("%w: key %q is at %d, expected %d", errStale, b.Key, cur.Version, *b.ExpectedVersion)
	}
	m.data[b.Key] = kvEntry{Value: b.Value, Version: index}
	return index, nil
}

func (m *kvMachine) del(_ uint64, body []byte) (any, error) {
	var b delBody
	if err := command.DecodeBody(body, &b); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, b.Key)
	return nil, nil
}

func (m *kvMachine) note(uint64, []byte) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes++
	return nil, nil
}

func (m *kvMachine) Snapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return json.Marshal(m.data)
}

func (m *kvMachine) Restore(data []byte) error {
	fresh := map[string]kvEntry{}
	if err := json.Unmarshal(data, &fresh); err != nil {
		return err
	}
	m.mu.Lock()
	m.data = fresh
	m.mu.Unlock()
	m.restores.Add(1)
	return nil
}

func (m *kvMachine) get(key string) (kvEntry, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.data[key]
	return e, ok
}

func (m *kvMachine) dump() map[string]kvEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.data)
}

func ptr[T any](v T) *T { return &v }
