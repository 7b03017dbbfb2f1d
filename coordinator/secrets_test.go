package coordinator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/seal"
)

// kubeconfigRecorder is a Connector that records the kubeconfig each
// cluster was connected with.
type kubeconfigRecorder struct {
	*fakeOps
	mu   sync.Mutex
	seen map[string]string
}

func newKubeconfigRecorder() *kubeconfigRecorder {
	return &kubeconfigRecorder{fakeOps: newFakeOps(), seen: map[string]string{}}
}

func (k *kubeconfigRecorder) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	k.mu.Lock()
	k.seen[cluster] = string(kubeconfig)
	k.mu.Unlock()
	return k.fakeOps, nil
}

func (k *kubeconfigRecorder) kubeconfig(cluster string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[cluster]
}

// connected connects to cluster as the leader's work does and returns the
// kubeconfig the Connector received.
func (k *kubeconfigRecorder) connected(t *testing.T, m *member, cluster string) string {
	t.Helper()
	_, err := m.c.ConnectCluster(cluster)
	require.NoError(t, err)
	return k.kubeconfig(cluster)
}

func marker(t *testing.T) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "molt-test-secret-" + hex.EncodeToString(b[:])
}

func kubeconfigWith(secret string) string {
	return "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: " + secret + "\n"
}

// withConnector and withKeyring adjust a member's configuration
// (startMemberAt's mutate).
func withConnector(c coordinator.Connector) func(*coordinator.Config) {
	return func(cfg *coordinator.Config) { cfg.Connector = c }
}

func withKeyring(r *seal.Keyring) func(*coordinator.Config) {
	return func(cfg *coordinator.Config) { cfg.Keyring = r }
}

// TestKubeconfigNeverOnDiskInPlainText registers a cluster whose
// kubeconfig holds a unique marker, forces a snapshot, stops the member and
// reads every file of its data directory: the marker is in none of them,
// while the envelope is. The API never returns the kubeconfig, and the
// Connector still receives it in plain text.
func TestKubeconfigNeverOnDiskInPlainText(t *testing.T) {
	secret := marker(t)
	rec := newKubeconfigRecorder()
	dir := t.TempDir()
	m := startMemberAt(t, "m1", dir, true, nil, "", "127.0.0.1:0", nil, withConnector(rec))
	eventually(t, "leader", m.c.IsLeader)
	cl := m.client()
	spec := clusterSpec("lab", "1.33.6")
	spec.Kubeconfig = kubeconfigWith(secret)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/clusters/lab", spec)

	require.Equal(t, kubeconfigWith(secret), rec.connected(t, m, "lab"), "the Connector gets the kubeconfig in plain text")
	sealed, plain := m.c.StoredKubeconfig("lab")
	require.Empty(t, plain)
	require.True(t, seal.IsSealed(sealed), "the state holds the envelope: %.40s", sealed)

	ctx := context.Background()
	for _, path := range []string{"/v1/clusters/lab", "/v1/clusters"} {
		var raw map[string]any
		if path == "/v1/clusters" {
			var list []map[string]any
			_, err := cl.Do(ctx, http.MethodGet, path, nil, &list)
			require.NoError(t, err)
			require.Len(t, list, 1)
			raw = list[0]
		} else {
			_, err := cl.Do(ctx, http.MethodGet, path, nil, &raw)
			require.NoError(t, err)
		}
		b, err := json.Marshal(raw)
		require.NoError(t, err)
		require.NotContains(t, string(b), secret, "GET %s", path)
		require.NotContains(t, string(b), seal.Prefix, "GET %s returns no envelope either", path)
	}

	require.NoError(t, m.c.Store().Snapshot())
	m.stop(false)

	var files, withEnvelope int
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		files++
		require.False(t, bytes.Contains(b, []byte(secret)), "%s holds the kubeconfig in plain text", path)
		if bytes.Contains(b, []byte(seal.Prefix)) {
			withEnvelope++
		}
		return nil
	}))
	require.GreaterOrEqual(t, files, 2, "the Raft log and a snapshot at least")
	require.GreaterOrEqual(t, withEnvelope, 2, "the envelope is in the log and in the snapshot")
}

// TestRewrapRotatesTheKey: a new primary key joins the ring, the rewrap
// seals every kubeconfig with it (a plain-text one from before sealing
// too), and the old key can then leave the ring with every kubeconfig
// still opening. A member without any key refuses to start on that state.
func TestRewrapRotatesTheKey(t *testing.T) {
	ctx := context.Background()
	rec := newKubeconfigRecorder()
	dir := t.TempDir()
	oldRing, err := seal.NewKeyring(seal.GenerateKey())
	require.NoError(t, err)
	m := startMemberAt(t, "m1", dir, true, nil, "", "127.0.0.1:0", nil, withConnector(rec), withKeyring(oldRing))
	eventually(t, "leader", m.c.IsLeader)
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	lab, legacy := marker(t), marker(t)
	spec := clusterSpec("lab", "1.33.6")
	spec.Kubeconfig = kubeconfigWith(lab)
	put(t, cl, "/v1/clusters/lab", spec)
	// A cluster registered by a release before sealing: its entry carries
	// the kubeconfig in plain text.
	old := statemachine.PutClusterCmd{Spec: phases.ClusterSpec{Name: "legacy", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-1"}}}}}, Kubeconfig: kubeconfigWith(legacy)}
	_, err = m.c.Store().Apply(ctx, old)
	require.NoError(t, err)
	_, plain := m.c.StoredKubeconfig("legacy")
	require.Equal(t, kubeconfigWith(legacy), plain)
	require.Equal(t, kubeconfigWith(legacy), rec.connected(t, m, "legacy"), "a plain kubeconfig from old entries still connects")

	restart := func(ring *seal.Keyring) *member {
		addr, raftAddr := m.addr, m.c.Store().RaftAddr()
		m.stop(false)
		m = startMemberAt(t, "m1", dir, false, nil, addr, raftAddr, nil, withConnector(rec), withKeyring(ring))
		eventually(t, "leader after restart", m.c.IsLeader)
		// Leading comes before the log is replayed (it is, once the new
		// term's first entry commits): wait for the admin token.
		eventually(t, "log replayed after restart", func() bool { _, err := m.c.AuthenticateToken(testAdmin); return err == nil })
		return m
	}

	// Every member gets the new key as primary and restarts; then rewrap.
	newKey := seal.GenerateKey()
	rotated, err := oldRing.WithPrimary(newKey)
	require.NoError(t, err)
	m = restart(rotated)
	var res api.RewrapResult
	_, err = m.client().Do(ctx, http.MethodPost, "/v1/secrets/rewrap", nil, &res)
	require.NoError(t, err)
	require.Equal(t, api.RewrapResult{Key: newKey.ID, Rewrapped: []string{"lab", "legacy"}, Current: []string{}, Stale: []string{}}, res)
	for _, name := range []string{"lab", "legacy"} {
		sealed, plain := m.c.StoredKubeconfig(name)
		require.Empty(t, plain, "%s: no plain text left in the state", name)
		id, err := seal.KeyID(sealed)
		require.NoError(t, err)
		require.Equal(t, newKey.ID, id, name)
	}
	_, err = m.client().Do(ctx, http.MethodPost, "/v1/secrets/rewrap", nil, &res)
	require.NoError(t, err)
	require.Equal(t, api.RewrapResult{Key: newKey.ID, Rewrapped: []string{}, Current: []string{"lab", "legacy"}, Stale: []string{}}, res, "a second rewrap has nothing to do")

	// The old key leaves the ring: everything still opens.
	require.NoError(t, m.c.Store().Snapshot())
	pruned, err := rotated.Without(oldRing.Primary())
	require.NoError(t, err)
	m = restart(pruned)
	require.Equal(t, kubeconfigWith(lab), rec.connected(t, m, "lab"))
	require.Equal(t, kubeconfigWith(legacy), rec.connected(t, m, "legacy"))

	// A member with no key at all refuses to start on sealed state.
	require.NoError(t, m.c.Store().Snapshot())
	addr, raftAddr := m.addr, m.c.Store().RaftAddr()
	m.stop(false)
	cfg := memberConfig(t, "m1", dir, addr, raftAddr, false, nil, nil)
	cfg.Keyring = nil
	_, err = coordinator.New(cfg)
	require.ErrorIs(t, err, coordinator.ErrNoKeyring)
	require.True(t, strings.Contains(err.Error(), "encryption key file"), err.Error())
}

// TestPutClusterWithoutKeyring: a member without a key ring refuses to
// store a kubeconfig rather than store it in plain text.
func TestPutClusterWithoutKeyring(t *testing.T) {
	m := startMemberAt(t, "m1", t.TempDir(), true, nil, "", "127.0.0.1:0", nil, withKeyring(nil))
	eventually(t, "leader", m.c.IsLeader)
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	_, err := cl.Do(context.Background(), http.MethodPut, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"), nil)
	require.ErrorContains(t, err, "no encryption key ring")
	spec := clusterSpec("lab", "1.33.6")
	spec.Kubeconfig = ""
	put(t, cl, "/v1/clusters/lab", spec)
}
