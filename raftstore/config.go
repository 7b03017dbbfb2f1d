package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/moltproject/molt/internal/version"
)

// Config configures a Store. Start from DefaultConfig; a zero duration or
// count means "use the default".
type Config struct {
	// NodeID is this member's Raft server ID, unique for all time.
	NodeID string
	// RaftAddr is the host:port the Raft TCP transport binds to.
	// "127.0.0.1:0" picks a free port (tests); see Store.RaftAddr.
	RaftAddr string
	// RaftAdvertiseAddr is the address peers dial, when RaftAddr is not
	// dialable (e.g. "0.0.0.0:7000"). Empty means the bound address.
	RaftAdvertiseAddr string
	// TLS, when set, runs the Raft transport over mutual TLS (members
	// only); nil is plain TCP, for tests of the store alone.
	TLS *TLSConfig
	// WrapConn, when set with TLS, wraps every Raft connection this member
	// dials or accepts, below TLS: tests put faults between members with
	// it (a member that stops answering). nil in production.
	WrapConn func(net.Conn) net.Conn
	// ApplyHook, when set, is called at the start of every FSM Apply, on
	// Raft's FSM goroutine. Only a fault build of molt-coordinator sets
	// it — to wedge the apply loop in the watchdog's tests by blocking in
	// it; nil in production.
	ApplyHook func()
	// HoldApply, when set, is called before the FSM applies each log
	// entry and may block: tests hold a member's replica behind the
	// leader with it (a follower that trails) while its Raft still
	// answers. nil in production.
	HoldApply func(index uint64)
	// Version is this binary's molt release; empty means
	// internal/version.Version. An entry whose extensions name a newer
	// release halts the replica (Store.Halted); tests set it to play a
	// member of another release.
	Version string
	// HTTPAddr is this member's REST address, stored in replicated member
	// metadata so that followers can forward writes to the leader.
	HTTPAddr string
	// DataDir holds wal/ (the log and stable store, logstore.go),
	// snapshots/ and the lock file.
	DataDir string
	// Bootstrap makes a fresh DataDir a one-member cluster of this node.
	// An existing DataDir is never bootstrapped again.
	Bootstrap bool

	// ApplyTimeout bounds Apply, Barrier and membership changes when the
	// caller's context has no earlier deadline.
	ApplyTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// make Raft take a new one.
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks SnapshotThreshold.
	SnapshotInterval time.Duration
	// SnapshotRetain is how many snapshots are kept on disk.
	SnapshotRetain int
	// TrailingLogs is how many log entries are kept after a snapshot, so a
	// slightly lagging follower catches up from the log, not a snapshot.
	TrailingLogs uint64

	// Raft timing. Production keeps the defaults; tests shorten them.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// Logger receives the store's and Raft's logs. Nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns the production defaults (hashicorp/raft's timing).
// NodeID, RaftAddr, HTTPAddr and DataDir must still be set.
func DefaultConfig() Config {
	return Config{
		ApplyTimeout:       10 * time.Second,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		SnapshotRetain:     2,
		TrailingLogs:       10240,
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
	}
}

// withDefaults fills zero fields from DefaultConfig and checks the required
// ones.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = d.ApplyTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = d.SnapshotInterval
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = d.SnapshotRetain
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = d.LeaderLeaseTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = d.CommitTimeout
	}
	if c.Version == "" {
		c.Version = version.Version
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("NodeID is required"))
	}
	if c.RaftAddr == "" {
		errs = append(errs, errors.New("RaftAddr is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("DataDir is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("raftstore: config: %w", err)
	}
	return c, nil
}
