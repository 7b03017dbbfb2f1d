package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

const (
	// boltFile is where the log and stable store were inside DataDir
	// before the WAL (logstore.go).
	boltFile = "raft.db"
	// boltOpenTimeout stops Open from hanging forever when another process
	// holds the data directory (two coordinators on one data dir).
	boltOpenTimeout = 5 * time.Second
	// transportMaxPool is how many idle connections per peer are pooled.
	transportMaxPool = 3
	// transportTimeout bounds one Raft RPC's network I/O.
	transportTimeout = 10 * time.Second
	// pollInterval is how often WaitForLeader/WaitForIndex re-check.
	pollInterval = 10 * time.Millisecond
	// shutdownTimeout bounds how long Close waits for Raft's goroutines.
	shutdownTimeout = 30 * time.Second
	// retryInterval spaces retries of the leader's own metadata write.
	retryInterval = 500 * time.Millisecond
)

// Store is one Raft member: the log and snapshots on disk, the transport and
// the FSM over the domain Machine. All methods are safe for concurrent use.
type Store struct {
	cfg Config
	// gate, when set, decides whether a command may be written (SetGate).
	gate  atomic.Pointer[Gate]
	log   *slog.Logger
	fsm   *fsm
	raft  *raft.Raft
	trans *raft.NetworkTransport
	// stream is the TLS listener and dialer under trans; nil without TLS.
	stream *tlsStream
	logs   logStore
	lock   *os.File // lockDataDir's

	notifyCh chan bool // raft.Config.NotifyCh, read by watchLeadership
	// haltCh is signalled when the FSM halts (fsm.onHalt), so that a
	// halted leader hands leadership over (watchLeadership).
	haltCh chan struct{}
	// voteTerm is the term of the last vote request this member received,
	// and voteTransfer whether a leadership transfer asked for it
	// (LastVoteRequest).
	voteMu       sync.Mutex
	voteTerm     uint64
	voteTransfer bool

	fanout leaderFanout
	// observed receives Raft's leader observations (watchLeader);
	// leaderMu guards leaderGen, the channel closed at the next change of
	// leader (LeaderChanged).
	observed  chan raft.Observation
	leaderMu  sync.Mutex
	leaderGen chan struct{}

	// barrierTerm is the last term in which this member, leading, saw a
	// barrier through (ReadIndex).
	barrierTerm atomic.Uint64

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed once raft is shut down
	wg        sync.WaitGroup
}

// Open opens (or creates) the member's data directory and starts Raft.
// With cfg.Bootstrap set and a data directory holding no Raft state, the
// member bootstraps a one-member cluster of itself; once it is leader it
// records its own metadata. Other members start without Bootstrap and are
// added by the leader's Join.
func Open(cfg Config, m Machine) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "raftstore", "node", cfg.NodeID)
	f, err := newFSM(m, log)
	if err != nil {
		return nil, err
	}
	f.hook = cfg.ApplyHook
	f.hold = cfg.HoldApply
	f.version = cfg.Version
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: data dir: %w", err)
	}
	hlog := newHCLogger(log, "raft")

	var cleanup []func() error
	fail := func(err error) (*Store, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			_ = cleanup[i]()
		}
		return nil, err
	}

	lock, err := lockDataDir(cfg.DataDir, boltOpenTimeout)
	if err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	cleanup = append(cleanup, lock.Close)
	// The log is fsync'd on every append: an entry a member acknowledged
	// must survive a power cut, or Raft's safety is gone (logstore.go).
	logs, err := openLogStore(cfg.DataDir, log)
	if err != nil {
		return fail(fmt.Errorf("raftstore: open the Raft log: %w", err))
	}
	cleanup = append(cleanup, logs.Close)

	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hlog.Named("snapshots"))
	if err != nil {
		return fail(fmt.Errorf("raftstore: snapshot store: %w", err))
	}

	var advertise net.Addr
	if cfg.RaftAdvertiseAddr != "" {
		advertise, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertiseAddr)
		if err != nil {
			return fail(fmt.Errorf("raftstore: advertise address: %w", err))
		}
	}
	// Pipelined replication is off (MaxRPCsInFlight 1). In hashicorp/raft
	// v1.7.3, when a follower's answer ends the pipeline's decoder (a
	// rejection, a newer term after a leadership transfer), the sender can
	// park on an unbuffered channel nobody reads again: replication to that
	// follower stops for good and Raft's Shutdown never returns. Raft's own
	// documentation finds pipelining of little benefit but on very slow
	// links; a coordinator's write rate does not need it.
	tcfg := &raft.NetworkTransportConfig{
		MaxPool:         transportMaxPool,
		MaxRPCsInFlight: 1,
		Timeout:         transportTimeout,
		Logger:          hlog.Named("transport"),
	}
	var trans *raft.NetworkTransport
	var stream *tlsStream
	if cfg.TLS != nil {
		stream, err = newTLSStream(cfg.RaftAddr, advertise, cfg.TLS, cfg.WrapConn, f.isMemberHost)
		if err != nil {
			return fail(fmt.Errorf("raftstore: transport: %w", err))
		}
		tcfg.Stream = stream
		trans = raft.NewNetworkTransportWithConfig(tcfg)
	} else {
		trans, err = raft.NewTCPTransportWithConfig(cfg.RaftAddr, advertise, tcfg)
		if err != nil {
			return fail(fmt.Errorf("raftstore: transport: %w", err))
		}
	}
	cleanup = append(cleanup, trans.Close)

	s := &Store{
		cfg:      cfg,
		log:      log,
		fsm:      f,
		trans:    trans,
		stream:   stream,
		logs:     logs,
		lock:     lock,
		notifyCh: make(chan bool, 8),
		haltCh:   make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	f.onHalt = func() {
		select {
		case s.haltCh <- struct{}{}:
		default:
		}
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = s.notifyCh
	// A removed member stays a (silent) follower instead of shutting Raft
	// down. With shutdown, its transport kept accepting RPCs that nothing
	// answered, and a leader pipelining to it could hang in its own
	// shutdown (seen in TestLeaderRemovesItself). It also keeps Members and
	// Stats working on the removed member until Close.
	rc.ShutdownOnRemove = false
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("raftstore: config: %w", err))
	}

	if cfg.Bootstrap {
		has, err := raft.HasExistingState(logs, logs, snaps)
		if err != nil {
			return fail(fmt.Errorf("raftstore: check existing state: %w", err))
		}
		if !has {
			log.Info("bootstrapping a one-member cluster", "raft_addr", trans.LocalAddr())
			conf := raft.Configuration{Servers: []raft.Server{{
				Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
			}}}
			if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, conf); err != nil {
				return fail(fmt.Errorf("raftstore: bootstrap: %w", err))
			}
		}
	}

	r, err := raft.NewRaft(rc, f, logs, logs, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("raftstore: start raft: %w", err))
	}
	s.raft = r
	s.wg.Add(2)
	go s.watchLeadership()
	s.observed = make(chan raft.Observation, 8)
	s.leaderGen = make(chan struct{})
	r.RegisterObserver(raft.NewObserver(s.observed, false, func(o *raft.Observation) bool {
		if v, ok := o.Data.(raft.RequestVoteRequest); ok {
			// Recorded here, on Raft's goroutine, rather than sent on:
			// a non-blocking observer drops what its channel cannot hold.
			s.recordVoteRequest(v)
			return false
		}
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	go s.watchLeader()
	log.Info("raft store open", "raft_addr", trans.LocalAddr(), "http_addr", cfg.HTTPAddr, "data_dir", cfg.DataDir)
	return s, nil
}

// ID returns this member's node ID.
func (s *Store) ID() string { return s.cfg.NodeID }

// RaftAddr returns the address peers dial, which is the bound port when
// Config.RaftAddr asked for port 0.
func (s *Store) RaftAddr() string { return string(s.trans.LocalAddr()) }

// HTTPAddr returns this member's configured REST address.
func (s *Store) HTTPAddr() string { return s.cfg.HTTPAddr }

// Close shuts the member down gracefully: a leader first hands leadership to
// a peer so the cluster does not wait an election timeout, then Raft stops,
// the transport and the log are closed. Safe to call more than once.
func (s *Store) Close() error { return s.shutdown(true) }

// Kill stops the member as a crash would, for tests: no leadership transfer,
// no goodbye to peers; what Raft had fsync'd stays on disk. It still closes
// the files and the port, so the same process can Open the data dir again.
func (s *Store) Kill() error { return s.shutdown(false) }

func (s *Store) shutdown(transfer bool) error {
	s.closeOnce.Do(func() {
		if transfer && s.raft.State() == raft.Leader && s.numPeers() > 0 {
			if err := s.raft.LeadershipTransfer().Error(); err != nil {
				s.log.Warn("leadership transfer before close failed", "err", err)
			}
		}
		s.closed.Store(true)
		var errs []error
		// Shutdown also closes the transport (it implements raft.WithClose).
		// It waits for all of Raft's goroutines; a replication pipeline
		// stuck on a peer that accepts but never answers can hold it
		// forever, so the wait is bounded and Close goes on regardless.
		shutdown := make(chan error, 1)
		go func() { shutdown <- s.raft.Shutdown().Error() }()
		select {
		case err := <-shutdown:
			if err != nil {
				errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
			}
		case <-time.After(shutdownTimeout):
			s.log.Error("raft did not shut down in time; closing files anyway", "timeout", shutdownTimeout)
			errs = append(errs, fmt.Errorf("raft shutdown: %w", ErrTimeout))
		}
		close(s.done)
		s.wg.Wait()
		s.fanout.close()
		// Closing the transport stops its listener but not the connections
		// this member opened to its peers, whose handlers on the peers would
		// wait on them until this process exits; CloseStreams closes them.
		s.trans.CloseStreams()
		if err := s.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("transport: %w", err))
		}
		if err := s.logs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("log: %w", err))
		}
		_ = s.lock.Close()
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("raftstore: close: %w", err)
		}
		s.log.Info("raft store closed", "graceful", transfer)
	})
	return s.closeErr
}

// IsLeader reports whether this member is the leader right now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the leader's node ID, Raft address and HTTP address as this
// member knows them. All are "" when no leader is known; httpAddr is "" until
// the leader's metadata has been committed and applied here.
func (s *Store) Leader() (id, raftAddr, httpAddr string) {
	addr, sid := s.raft.LeaderWithID()
	if sid == "" {
		return "", "", ""
	}
	m, _ := s.fsm.member(string(sid))
	return string(sid), string(addr), m.HTTPAddr
}

// LeaderCh returns a channel that receives true when this member becomes
// leader and false when it stops. It first receives the current state;
// values not yet read are replaced by newer ones, so a reader never sees a
// stale state and never slows Raft down. Closed when the store closes.
func (s *Store) LeaderCh() <-chan bool { return s.fanout.subscribe() }

// WaitForLeader blocks until some leader is known, or ctx ends
// (ErrLeaderNotFound).
func (s *Store) WaitForLeader(ctx context.Context) error {
	return s.poll(ctx, ErrLeaderNotFound, func() bool {
		_, id := s.raft.LeaderWithID()
		return id != ""
	})
}

// WaitForIndex blocks until the FSM has applied the command at index (as
// returned by an ApplyFunc's index), or ctx ends (ErrTimeout). A follower uses
// it to read its own writes.
func (s *Store) WaitForIndex(ctx context.Context, index uint64) error {
	return s.poll(ctx, ErrTimeout, func() bool { return s.fsm.applied.Load() >= index })
}

// poll checks cond every pollInterval until it holds, ctx ends (onTimeout) or
// the store closes (ErrClosed).
func (s *Store) poll(ctx context.Context, onTimeout error, cond func() bool) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if s.closed.Load() {
			return ErrClosed
		}
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", onTimeout, ctx.Err())
		case <-s.done:
			return ErrClosed
		case <-t.C:
		}
	}
}

// AppliedIndex returns the log index of the last command the FSM applied
// (Raft's no-op and configuration entries do not count).
func (s *Store) AppliedIndex() uint64 { return s.fsm.applied.Load() }

// Snapshot makes Raft take a snapshot now and compact the log. Meant for
// tests and operators; Raft also snapshots by itself (SnapshotThreshold).
// A halted member takes none (ErrHalted; see fsm.Snapshot).
func (s *Store) Snapshot() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if h, halted := s.Halted(); halted {
		// The FSM would refuse it too (fsm.Snapshot), but hashicorp/raft
		// flattens that error into a string.
		return fmt.Errorf("%w: no snapshot is taken, the log is kept for the upgraded binary: %s", ErrHalted, h)
	}
	err := s.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return mapRaftErr(err)
}

// watchLeadership reads Raft's NotifyCh (Raft blocks on it, so it must always
// be read), fans the value out and, on gaining leadership, makes sure this
// member's own metadata is in the replicated state.
func (s *Store) watchLeadership() {
	defer s.wg.Done()
	stopRecord := func() {}
	defer func() { stopRecord() }()
	for {
		select {
		case v := <-s.notifyCh:
			s.log.Info("leadership changed", "leader", v)
			s.fanout.publish(v)
			stopRecord()
			stopRecord = func() {}
			if _, halted := s.Halted(); v && halted {
				// It may be elected: its log can be the most complete
				// even though it cannot apply it.
				stopRecord = s.startHandOff()
			} else if v {
				stopRecord = s.startRecordSelf()
			}
		case <-s.haltCh:
			if s.IsLeader() {
				stopRecord()
				stopRecord = s.startHandOff()
			}
		case <-s.done:
			// Raft is shut down: pass on what it said on the way out.
			for {
				select {
				case v := <-s.notifyCh:
					s.fanout.publish(v)
				default:
					return
				}
			}
		}
	}
}

// LeaderChanged returns a channel that is closed at Raft's next leader
// observation: another member is elected, or the leader is lost (an
// election starts). Raft names the new leader (LeaderHTTPAddr) before the
// observation reaches this channel, so a channel taken after that can be
// closed for the leader the caller already knows: a caller compares the
// leader again rather than take the signal alone. A follower forwarding
// a request to the leader gives up on it when the leader differs, rather
// than wait on a leader that may have frozen.
func (s *Store) LeaderChanged() <-chan struct{} {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.leaderGen
}

// watchLeader closes the current LeaderChanged channel at every leader
// observation; once Raft shut down, LeaderChanged returns a closed one.
func (s *Store) watchLeader() {
	defer s.wg.Done()
	next := func() {
		s.leaderMu.Lock()
		close(s.leaderGen)
		s.leaderGen = make(chan struct{})
		s.leaderMu.Unlock()
	}
	for {
		select {
		case <-s.observed:
			next()
		case <-s.done:
			s.leaderMu.Lock()
			close(s.leaderGen) // stays closed: no leader is known any more
			s.leaderMu.Unlock()
			return
		}
	}
}

// startHandOff runs handOffIfHalted in the background and returns its
// stop.
func (s *Store) startHandOff() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.handOffIfHalted(ctx)
	}()
	return cancel
}

// recordVoteRequest notes a vote request this member received.
func (s *Store) recordVoteRequest(v raft.RequestVoteRequest) {
	s.voteMu.Lock()
	defer s.voteMu.Unlock()
	if v.Term >= s.voteTerm {
		s.voteTerm, s.voteTransfer = v.Term, v.LeadershipTransfer
	}
}

// LastVoteRequest returns the term of the newest vote request this member
// received (0: none) and whether a leadership transfer asked for it: a
// leader that hands over on Close (or TransferLeadership) makes its
// successor ask for votes with that mark, so a member that sees the new
// leader's term marked knows the leader changed by a hand-over, not by an
// election after a timeout.
func (s *Store) LastVoteRequest() (term uint64, transfer bool) {
	s.voteMu.Lock()
	defer s.voteMu.Unlock()
	return s.voteTerm, s.voteTransfer
}

// startRecordSelf runs recordSelf in the background and returns its stop.
func (s *Store) startRecordSelf() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.recordSelf(ctx)
	}()
	return cancel
}

// recordSelf commits this member's metadata if the replicated copy is missing
// or differs (first bootstrap, or a new HTTP address after a restart). It
// retries until it succeeds or leadership is lost.
func (s *Store) recordSelf(ctx context.Context) {
	want := memberMeta{RaftAddr: s.RaftAddr(), HTTPAddr: s.cfg.HTTPAddr}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.ensureMember(ctx, s.cfg.NodeID, want)
		if err == nil {
			return
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			return
		}
		s.log.Warn("recording own member metadata failed, will retry", "err", err)
		t.Reset(retryInterval)
	}
}
