package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// agentBinary is a stand-in molt-agent binary: the release it runs, and
// whether it exits at start.
func agentBinary(version string, broken bool) []byte {
	s := "#!/bin/sh\n# molt-agent " + version + "\n"
	if broken {
		s += "exit 1 # BROKEN\n"
	}
	return []byte(s)
}

func binaryVersion(b []byte) string {
	_, rest, _ := strings.Cut(string(b), "# molt-agent ")
	v, _, _ := strings.Cut(rest, "\n")
	return v
}

// fakeAgentUnit plays systemd for molt-agent.service on a fakeHost: a
// start runs the guard (ExecStartPre) and then the agent of the release
// the binary in place says (ExecStart); a binary that exits at start, or
// an agent that crashes, is started again (Restart=on-failure); the
// agent's RestartSelf stops it and starts the unit again.
type fakeAgentUnit struct {
	t   *testing.T
	h   *fakeHost
	cfg Config

	mu           sync.Mutex
	cancel       context.CancelFunc
	done         chan struct{}
	starts       []string // the release of each start; "exited" for one that exited at start
	selfRestarts int
	stopped      bool
	// stopsFirst: systemd stops the agent before it answers the restart
	// call, which then fails (what a real unit does; the lab found it).
	stopsFirst bool
}

func newFakeAgentUnit(t *testing.T, h *fakeHost, installed []byte) *fakeAgentUnit {
	require.NoError(t, os.WriteFile(filepath.Join(h.root, "usr/bin/molt-agent"), installed, 0o755))
	u := &fakeAgentUnit{t: t, h: h, cfg: h.cfg}
	t.Cleanup(u.stop)
	return u
}

func (u *fakeAgentUnit) bin() string { return filepath.Join(u.h.root, "usr/bin/molt-agent") }

func (u *fakeAgentUnit) start() {
	for range 10 {
		if _, err := Guard(filepath.Join(u.h.root, u.cfg.DataDir)); err != nil {
			u.t.Errorf("guard: %v", err)
		}
		b, err := os.ReadFile(u.bin())
		if err != nil {
			u.t.Errorf("read the agent's binary: %v", err)
			return
		}
		u.mu.Lock()
		if u.stopped {
			u.mu.Unlock()
			return
		}
		if strings.Contains(string(b), "BROKEN") {
			u.starts = append(u.starts, "exited")
			u.mu.Unlock()
			continue
		}
		v := binaryVersion(b)
		u.starts = append(u.starts, v)
		cfg := u.cfg
		cfg.Version, cfg.RestartSelf = v, u.restartSelf
		a, err := New(cfg)
		if err != nil {
			u.mu.Unlock()
			u.t.Errorf("new agent: %v", err)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		u.cancel, u.done = cancel, done
		u.mu.Unlock()
		go func() {
			err := a.Run(ctx)
			_ = a.Close()
			close(done)
			if err != nil && ctx.Err() == nil {
				go u.start() // it crashed: systemd starts it again
			}
		}()
		return
	}
	u.t.Errorf("molt-agent.service never started")
}

func (u *fakeAgentUnit) current() (context.CancelFunc, chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cancel, u.done
}

// restartSelf is the agent's RestartSelf: systemd queues the restart and
// carries it out on its own.
func (u *fakeAgentUnit) restartSelf(context.Context) error {
	u.mu.Lock()
	u.selfRestarts++
	stopsFirst := u.stopsFirst
	u.mu.Unlock()
	if stopsFirst {
		cancel, done := u.current()
		cancel() // SIGTERM: the agent's ctx ends before the answer
		go func() {
			<-done
			u.start()
		}()
		return context.Canceled
	}
	go func() {
		cancel, done := u.current()
		cancel()
		<-done
		u.start()
	}()
	return nil
}

func (u *fakeAgentUnit) stop() {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	if cancel, done := u.current(); cancel != nil {
		cancel()
		<-done
	}
}

func (u *fakeAgentUnit) counts() (starts []string, selfRestarts int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.starts...), u.selfRestarts
}

// countingServer serves one file and counts its downloads.
func countingServer(t *testing.T, content []byte) (url, sum string, downloads *atomic.Int32) {
	downloads = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		downloads.Add(1)
		_, _ = w.Write(content)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/molt-agent", sumOf(content), downloads
}

func updateAgentOp(id, url, sum, version string) api.Operation {
	return api.Operation{ID: id, Kind: api.OpUpdateAgent, UpdateAgent: &api.UpdateAgent{Version: version, URL: url, SHA256: sum}}
}

// The agent replaces itself: the new binary in place, the old one kept,
// one download, one restart, and the new agent reports the operation
// with the release it runs.
func TestUpdateAgentReplacesItself(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := agentBinary("0.1.9", false)
	u := newFakeAgentUnit(t, h, old)
	url, sum, downloads := countingServer(t, agentBinary("0.2.0", false))
	u.start()

	coord.enqueue(updateAgentOp("up-1", url, sum, "0.2.0"))
	res := coord.waitResult(t, "up-1")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "0.2.0", res.Details[api.DetailAgentVersion])
	require.Equal(t, sum, sha(t, u.bin()))
	require.Equal(t, sumOf(old), sha(t, filepath.Join(h.root, h.cfg.DataDir, PrevAgentName)), "the previous agent is kept")
	require.NoFileExists(t, filepath.Join(h.root, h.cfg.DataDir, SelfUpdateFile))
	starts, restarts := u.counts()
	require.Equal(t, []string{"0.1.9", "0.2.0"}, starts)
	require.Equal(t, 1, restarts)
	require.Equal(t, int32(1), downloads.Load())
	noTempFiles(t, filepath.Dir(u.bin()))
}

// systemd may stop the agent before it answers the agent's restart call:
// the call fails, and the agent must not take that for a failed restart
// (putting the old binary back under the restart that is under way).
func TestUpdateAgentStoppedBeforeTheRestartAnswers(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	u := newFakeAgentUnit(t, h, agentBinary("0.1.9", false))
	u.stopsFirst = true
	url, sum, _ := countingServer(t, agentBinary("0.2.0", false))
	u.start()
	coord.enqueue(updateAgentOp("up-1", url, sum, "0.2.0"))
	res := coord.waitResult(t, "up-1")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, sum, sha(t, u.bin()))
	starts, _ := u.counts()
	require.Equal(t, []string{"0.1.9", "0.2.0"}, starts)
}

// A release that exits at start is put back by the guard after
// MaxAgentStarts starts, without anyone; the agent that runs again
// reports the failure with the reason.
func TestUpdateAgentBrokenReleaseIsRolledBack(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := agentBinary("0.2.0", false)
	u := newFakeAgentUnit(t, h, old)
	url, sum, _ := countingServer(t, agentBinary("0.2.1", true))
	u.start()

	coord.enqueue(updateAgentOp("up-1", url, sum, "0.2.1"))
	res := coord.waitResult(t, "up-1")
	require.Equal(t, api.OpFailed, res.State)
	require.Equal(t, "molt-agent 0.2.1 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent 0.2.0 was put back", res.Message)
	require.Equal(t, "0.2.0", res.Details[api.DetailAgentVersion])
	require.Equal(t, sumOf(old), sha(t, u.bin()), "the working agent is back in place")
	starts, restarts := u.counts()
	require.Equal(t, []string{"0.2.0", "exited", "exited", "0.2.0"}, starts)
	require.Equal(t, 1, restarts)
	require.NoFileExists(t, filepath.Join(h.root, h.cfg.DataDir, SelfUpdateFile))
}

// An agent that stops at any point of its update (a crash, a power cut:
// systemd starts it again) loses nothing and repeats nothing: one
// download, the binary whole at every point, the previous one kept, one
// restart — the one the agent asks for, or, once the new binary is in
// place, the crash's own — and one result.
func TestUpdateAgentCrashAtEveryStep(t *testing.T) {
	for _, step := range []string{StepStarted, StepDownloaded, StepVerified, StepBackedUp, StepRenamed,
		StepRestarting, StepHealthy, StepFinished} {
		t.Run(step, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			old := agentBinary("0.1.9", false)
			u := newFakeAgentUnit(t, h, old)
			url, sum, downloads := countingServer(t, agentBinary("0.2.0", false))
			hooks, crashed := crashAt(step)
			u.cfg.Hooks = hooks
			u.start()

			coord.enqueue(updateAgentOp("up-1", url, sum, "0.2.0"))
			select {
			case <-crashed:
			case <-time.After(30 * time.Second):
				t.Fatalf("the agent never reached %s", step)
			}
			require.Contains(t, []string{sumOf(old), sum}, sha(t, u.bin()), "binary torn at the crash")
			res := coord.waitResult(t, "up-1")
			require.Equal(t, api.OpSucceeded, res.State, res.Message)
			require.Equal(t, "0.2.0", res.Details[api.DetailAgentVersion])
			require.Equal(t, sum, sha(t, u.bin()))
			require.Equal(t, sumOf(old), sha(t, filepath.Join(h.root, h.cfg.DataDir, PrevAgentName)))
			require.Equal(t, int32(1), downloads.Load(), "downloaded once")
			_, restarts := u.counts()
			asked := 1
			if step == StepRenamed || step == StepRestarting {
				asked = 0 // systemd's start after the crash runs the new release
			}
			require.Equal(t, asked, restarts, "restarts the agent asked for")
			require.Len(t, coord.resultsFor("up-1"), 1)
			noTempFiles(t, filepath.Dir(u.bin()))
		})
	}
}

// The guard counts only starts of the new release in place, and leaves a
// confirmed update alone.
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	bin, prev := filepath.Join(dir, "molt-agent"), filepath.Join(dir, PrevAgentName)
	oldB, newB := agentBinary("0.2.0", false), agentBinary("0.2.1", true)
	require.NoError(t, os.WriteFile(bin, oldB, 0o755))
	require.NoError(t, os.WriteFile(prev, oldB, 0o755))
	did, err := Guard(dir)
	require.NoError(t, err)
	require.Empty(t, did, "no update record: nothing to do")
	rec := filepath.Join(dir, SelfUpdateFile)
	require.NoError(t, writeSelfUpdate(rec, selfUpdate{Op: "op", Want: "0.2.1", WantSHA256: sumOf(newB), From: "0.2.0", Bin: bin, Prev: prev}))
	did, err = Guard(dir)
	require.NoError(t, err)
	require.Empty(t, did, "the new binary is not in place yet: not counted")
	require.NoError(t, os.WriteFile(bin, newB, 0o755))
	for i := 1; i <= MaxAgentStarts; i++ {
		did, err = Guard(dir)
		require.NoError(t, err)
		require.Contains(t, did, "starting molt-agent 0.2.1")
		require.Equal(t, sumOf(newB), sha(t, bin))
	}
	did, err = Guard(dir)
	require.NoError(t, err)
	require.Contains(t, did, "did not come up")
	require.Equal(t, sumOf(oldB), sha(t, bin))
	s, _, err := readSelfUpdate(rec)
	require.NoError(t, err)
	require.True(t, s.RolledBack)

	require.NoError(t, writeSelfUpdate(rec, selfUpdate{Op: "op2", Want: "0.2.1", WantSHA256: sumOf(oldB), Bin: bin, Prev: prev, Confirmed: true, Starts: 5}))
	did, err = Guard(dir)
	require.NoError(t, err)
	require.Empty(t, did, "a confirmed update is left alone")
	require.Equal(t, sumOf(oldB), sha(t, bin))
}
