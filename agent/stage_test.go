package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// artifactServer serves the fake host's srv directory, as h.files does,
// and counts the GETs of each path.
type artifactServer struct {
	*httptest.Server
	h    *fakeHost
	mu   sync.Mutex
	gets map[string]int
}

func newArtifactServer(t *testing.T, h *fakeHost) *artifactServer {
	s := &artifactServer{h: h, gets: map[string]int{}}
	files := http.FileServer(http.Dir(filepath.Join(h.root, "srv")))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			s.mu.Lock()
			s.gets[r.URL.Path]++
			s.mu.Unlock()
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve publishes content as name and returns its URL on s and its sum.
func (s *artifactServer) serve(name string, content []byte) (string, string) {
	_, sum := s.h.serve(name, content)
	return s.URL + "/" + name, sum
}

func (s *artifactServer) getsOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets["/"+name]
}

// stageDir is the agent's stage on the fake host.
func stageDir(h *fakeHost) string { return filepath.Join(h.root, "var/lib/molt-agent/stage") }

// stageEntries lists the staged artifacts (sha256 names) of the stage.
func stageEntries(t *testing.T, h *fakeHost) []string {
	t.Helper()
	des, err := os.ReadDir(stageDir(h))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range des {
		if isSHA256(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// stageTemps lists the temp files of the stage under dataDir.
func stageTemps(t *testing.T, dataDir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dataDir, "stage"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range des {
		if strings.HasPrefix(e.Name(), stageTempPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func checkOp(id, upgrade string, arts ...api.Artifact) api.Operation {
	return api.Operation{ID: id, Kind: api.OpCheckArtifacts, Upgrade: upgrade, CheckArtifacts: &api.CheckArtifacts{Artifacts: arts}}
}

// importingHost records the bytes of every archive the agent imports.
type importingHost struct {
	*fakeHost
	mu       sync.Mutex
	imported [][]byte
}

func (h *importingHost) ImportArchive(_ context.Context, path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.imported = append(h.imported, b)
	return []string{"example.com/img:1"}, nil
}

// TestStagedArtifactsAreFetchedOnce: what an upgrade's CheckArtifacts
// verified, its UpgradeBinary and ImportImages take from the stage — the
// artifact server sees one GET per artifact — with the same bytes
// installed and imported, and the metrics count the bytes by source.
func TestStagedArtifactsAreFetchedOnce(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	rt := &importingHost{fakeHost: h}
	h.cfg.Runtime = rt
	m := &fakeMetrics{}
	h.cfg.Metrics = m
	srv := newArtifactServer(t, h)
	bin := kubeletScript("v1.34.0", false)
	archive := bytes.Repeat([]byte("layer"), 1000)
	binURL, binSum := srv.serve("kubelet", bin)
	arURL, arSum := srv.serve("images.tar", archive)
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(checkOp("ca", "u1", api.Artifact{Name: "kubelet", URL: binURL, SHA256: binSum},
		api.Artifact{Name: "image-0", URL: arURL, SHA256: arSum}))
	res := coord.waitResult(t, "ca")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.ElementsMatch(t, []string{binSum, arSum}, stageEntries(t, h))
	netAfterCheck := m.artifactBytes(SourceNetwork)
	require.EqualValues(t, len(bin)+len(archive), netAfterCheck)

	up := upgradeOp("up", binURL, binSum, "v1.34.0")
	up.Upgrade = "u1"
	coord.enqueue(up)
	res = coord.waitResult(t, "up")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, binSum, sha(t, h.kubelet()))
	fi, err := os.Stat(h.kubelet())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "installed as a download is")

	coord.enqueue(api.Operation{ID: "img", Kind: api.OpImportImages, Upgrade: "u1",
		ImportImages: &api.ImportImages{Archives: []api.ImageArchive{{URL: arURL, SHA256: arSum}}}})
	res = coord.waitResult(t, "img")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	rt.mu.Lock()
	require.Equal(t, [][]byte{archive}, rt.imported)
	rt.mu.Unlock()
	downloads, err := os.ReadDir(filepath.Join(h.root, "var/lib/molt-agent/downloads"))
	require.NoError(t, err)
	require.Empty(t, downloads, "the imported copy is deleted, as a download is")

	require.Equal(t, 1, srv.getsOf("kubelet"), "one GET of the kubelet: the check's")
	require.Equal(t, 1, srv.getsOf("images.tar"), "one GET of the archive: the check's")
	require.Equal(t, netAfterCheck, m.artifactBytes(SourceNetwork), "nothing fetched after the check")
	require.EqualValues(t, len(bin)+len(archive), m.artifactBytes(SourceStage))
	require.ElementsMatch(t, []string{binSum, arSum}, stageEntries(t, h), "kept until the upgrade ends (a retry may need them)")
	noTempFiles(t, filepath.Dir(h.kubelet()))
}

// TestChangedStagedArtifactIsNotUsed: a staged file whose bytes were
// changed on disk is removed and the artifact fetched again; the right
// bytes are installed.
func TestChangedStagedArtifactIsNotUsed(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	m := &fakeMetrics{}
	h.cfg.Metrics = m
	srv := newArtifactServer(t, h)
	bin := kubeletScript("v1.34.0", false)
	url, sum := srv.serve("kubelet", bin)
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(checkOp("ca", "u1", api.Artifact{Name: "kubelet", URL: url, SHA256: sum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca").State)
	require.Equal(t, []string{sum}, stageEntries(t, h))
	// Same size, other bytes: only the hash tells.
	tampered := kubeletScript("v1.34.9", false)
	require.Len(t, tampered, len(bin))
	require.NoError(t, os.WriteFile(filepath.Join(stageDir(h), sum), tampered, 0o600))

	up := upgradeOp("up", url, sum, "v1.34.0")
	up.Upgrade = "u1"
	coord.enqueue(up)
	res := coord.waitResult(t, "up")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, sum, sha(t, h.kubelet()))
	require.Equal(t, "v1.34.0", res.Details["runningVersion"])
	require.Equal(t, 2, srv.getsOf("kubelet"), "fetched again")
	require.Empty(t, stageEntries(t, h), "the changed file is removed")
	require.Zero(t, m.artifactBytes(SourceStage))
	require.EqualValues(t, 2*len(bin), m.artifactBytes(SourceNetwork))
	noTempFiles(t, filepath.Dir(h.kubelet()))
}

// upgradeSignal stands between the agent and the fake coordinator and
// adds the upgrade in progress to every poll answer (nil: leaves it out,
// as an older coordinator does). It counts the answers it changed.
type upgradeSignal struct {
	*httptest.Server
	mu      sync.Mutex
	upgrade *string
	polls   int
}

func newUpgradeSignal(t *testing.T, coord *fakeCoordinator) *upgradeSignal {
	s := &upgradeSignal{}
	next := coord.Config.Handler
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/operations") {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var resp api.OperationsResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &resp) != nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		s.mu.Lock()
		resp.Upgrade = s.upgrade
		s.polls++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	s.EnableHTTP2 = true
	s.TLS = coord.TLS
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// set makes the following answers say upgrade (nil: nothing).
func (s *upgradeSignal) set(upgrade *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgrade = upgrade
}

// awaitPolls returns once n more poll answers were sent.
func (s *upgradeSignal) awaitPolls(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	want := s.polls + n
	s.mu.Unlock()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.polls >= want
	}, 10*time.Second, 5*time.Millisecond)
}

// TestStageIsCleanedWhenTheUpgradeEnds: the stage stays while the poll
// answers name its upgrade or name nothing (an older coordinator), and is
// emptied once they name another upgrade or none. A check of no upgrade
// from a coordinator that names upgrades keeps nothing.
func TestStageIsCleanedWhenTheUpgradeEnds(t *testing.T) {
	coord := newFakeCoordinator(t)
	sig := newUpgradeSignal(t, coord)
	h := newFakeHostAt(t, sig.URL, coord)
	url, sum := h.serve("kubelet", kubeletScript("v1.34.0", false))
	u1, u2, none := "u1", "u2", ""
	sig.set(&u1)
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(checkOp("ca-1", "u1", api.Artifact{Name: "kubelet", URL: url, SHA256: sum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca-1").State)
	require.Equal(t, []string{sum}, stageEntries(t, h))
	label, err := os.ReadFile(filepath.Join(stageDir(h), stageLabel))
	require.NoError(t, err)
	require.Equal(t, "u1\n", string(label))

	sig.awaitPolls(t, 2)
	require.Equal(t, []string{sum}, stageEntries(t, h), "kept while u1 is in progress")
	sig.set(nil)
	sig.awaitPolls(t, 2)
	require.Equal(t, []string{sum}, stageEntries(t, h), "an answer that says nothing changes nothing")

	sig.set(&u2)
	require.Eventually(t, func() bool { return len(stageEntries(t, h)) == 0 }, 10*time.Second, 5*time.Millisecond,
		"another upgrade in progress empties the stage")

	coord.enqueue(checkOp("ca-2", "u2", api.Artifact{Name: "kubelet", URL: url, SHA256: sum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca-2").State)
	require.Equal(t, []string{sum}, stageEntries(t, h))
	sig.set(&none)
	require.Eventually(t, func() bool {
		des, err := os.ReadDir(stageDir(h))
		return err == nil && len(des) == 0
	}, 10*time.Second, 5*time.Millisecond, "no upgrade in progress: the stage dir is empty")

	// A preflight run of no upgrade, from a coordinator that names
	// upgrades, is a dry run.
	coord.enqueue(checkOp("ca-3", "", api.Artifact{Name: "kubelet", URL: url, SHA256: sum}))
	res := coord.waitResult(t, "ca-3")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "ok", res.Details["artifact.kubelet"])
	require.Empty(t, stageEntries(t, h))
}

// TestStageIsBounded: an artifact larger than StageMaxBytes is verified
// but not kept; to keep a new one the oldest give way.
func TestStageIsBounded(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	h.cfg.StageMaxBytes = 100
	bigURL, bigSum := h.serve("big", bytes.Repeat([]byte("b"), 101))
	aURL, aSum := h.serve("a", bytes.Repeat([]byte("a"), 60))
	bURL, bSum := h.serve("b", bytes.Repeat([]byte("c"), 60))
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(checkOp("ca-big", "u1", api.Artifact{Name: "big", URL: bigURL, SHA256: bigSum}))
	res := coord.waitResult(t, "ca-big")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Empty(t, stageEntries(t, h), "over the bound: verified, not kept")

	coord.enqueue(checkOp("ca-a", "u1", api.Artifact{Name: "a", URL: aURL, SHA256: aSum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca-a").State)
	require.Equal(t, []string{aSum}, stageEntries(t, h))
	coord.enqueue(checkOp("ca-b", "u1", api.Artifact{Name: "b", URL: bURL, SHA256: bSum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca-b").State)
	require.Equal(t, []string{bSum}, stageEntries(t, h), "the oldest gave way")
	require.Empty(t, stageTemps(t, filepath.Join(h.root, "var/lib/molt-agent")))
}

// TestStageKeepsOnlyWhatIsSafe: the stage's own refusals, below the
// agent: unknown sizes, too little free space left, names that are not a
// sha256 (never a path), staging off.
func TestStageKeepsOnlyWhatIsSafe(t *testing.T) {
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	dir := filepath.Join(t.TempDir(), "stage")
	s := openStage(dir, 1<<20, time.Now, log)
	sum := sumOf([]byte("x"))
	require.Nil(t, s.begin(sum, -1), "size unknown")
	require.Nil(t, s.begin("../../etc/passwd", 1), "not a sha256")
	n, ok := s.copyTo("../journal.jsonl", filepath.Join(t.TempDir(), "out"))
	require.False(t, ok)
	require.Zero(t, n)
	s.keepFree = 1 << 62
	require.Nil(t, s.begin(sum, 1), "would leave too little free space")
	s.keepFree = 0
	w := s.begin(sum, 1)
	require.NotNil(t, w)
	_, _ = io.WriteString(w, "x")
	w.finish(true)
	require.FileExists(t, filepath.Join(dir, sum))

	off := openStage(dir, 0, time.Now, log)
	require.NoDirExists(t, dir, "staging off removes the stage")
	require.Nil(t, off.begin(sum, 1))
	off.upgradeInProgress("") // no stage, nothing to do
}

// TestStageSurvivesRestart: a staged artifact outlives the agent; temp
// files a crash left and anything else that is not an entry are removed
// when the next agent starts on the same data directory, and the next
// upgrade takes the artifact from the stage.
func TestStageSurvivesRestart(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	srv := newArtifactServer(t, h)
	url, sum := srv.serve("kubelet", kubeletScript("v1.34.0", false))
	stop, _ := runAgent(t, h.cfg)
	coord.enqueue(checkOp("ca", "u1", api.Artifact{Name: "kubelet", URL: url, SHA256: sum}))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "ca").State)
	require.NoError(t, stop())

	// What a crash mid-fetch leaves, and a stray file.
	dir := stageDir(h)
	require.NoError(t, os.WriteFile(filepath.Join(dir, stageTempPrefix+"123"), []byte("half"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray"), []byte("?"), 0o600))

	_, _ = runAgent(t, h.cfg) // New opens the stage before it returns
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range des {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{sum, stageLabel}, names)

	up := upgradeOp("up", url, sum, "v1.34.0")
	up.Upgrade = "u1"
	coord.enqueue(up)
	res := coord.waitResult(t, "up")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, sum, sha(t, h.kubelet()))
	require.Equal(t, 1, srv.getsOf("kubelet"), "the upgrade after the restart took the staged copy")
}
