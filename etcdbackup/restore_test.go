package etcdbackup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// etcdBin is the etcd build/k8s/etcd.sh produces (make deps), the one the
// lab and kubetest run.
func etcdBin(t *testing.T) string {
	dir := os.Getenv("MOLT_ETCD_BIN")
	if dir == "" {
		dir = filepath.Join(cachedir.Build(), "etcd", "v3.6.4", "bin")
	}
	return testenv.RequireFile(t, filepath.Join(dir, "etcd"), "etcd (build it: build/k8s/etcd.sh, or make deps)")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// member is one etcd process on loopback.
type member struct {
	name, client, peer string
}

func newMember(t *testing.T, name string) member {
	return member{
		name:   name,
		client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		peer:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
	}
}

// startEtcd runs a single-member etcd on dataDir (fresh, or a restored one)
// and returns a client once a read succeeds.
func startEtcd(t *testing.T, bin, dataDir string, m member) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--name", m.name, "--data-dir", dataDir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", m.name+"="+m.peer, "--log-level", "error")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("etcd %s log:\n%s", m.name, logs.String())
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(rctx, "health-probe")
		rcancel()
		if err == nil {
			return cli
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd %s not serving after 30s: %v", m.name, err)
		}
	}
}

// TestSnapshotRestoresIntoFreshEtcd is the restore docs/backup.md
// describes: a snapshot Take wrote from a real etcd holding objects,
// restored with etcdutl's restore (the Go API the etcdutl command calls)
// into a fresh data directory, served by a new etcd that then holds the
// same objects at the snapshot's revision.
func TestSnapshotRestoresIntoFreshEtcd(t *testing.T) {
	bin := etcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	src := newMember(t, "src")
	cli := startEtcd(t, bin, filepath.Join(t.TempDir(), "src"), src)
	// Objects as kube-apiserver stores them: keys under /registry.
	want := map[string]string{}
	for i := range 20 {
		k := fmt.Sprintf("/registry/configmaps/default/cm-%02d", i)
		want[k] = fmt.Sprintf("value-%d", i)
		if _, err := cli.Put(ctx, k, want[k]); err != nil {
			t.Fatal(err)
		}
	}

	// The first endpoint is dead: Take must go on to the healthy member.
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	path := filepath.Join(t.TempDir(), "snap.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	takenAt := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	meta, err := Take(ctx, clientv3.Config{Endpoints: []string{dead, src.client}, DialTimeout: 2 * time.Second}, f, takenAt)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if meta.Member != src.client || meta.Size != int64(len(b)) || meta.SHA256 != hex.EncodeToString(sum[:]) || !meta.TakenAt.Equal(takenAt) {
		t.Fatalf("meta = %+v; want member %s, size %d, sha256 %x", meta, src.client, len(b), sum)
	}
	// 20 puts on a fresh store: revision 21.
	if meta.Revision != 21 {
		t.Fatalf("meta.Revision = %d, want 21", meta.Revision)
	}
	if meta.EtcdVersion == "" {
		t.Errorf("meta.EtcdVersion empty; etcd 3.6 reports it")
	}

	// A write after the snapshot must not come back from it.
	if _, err := cli.Put(ctx, "/registry/configmaps/default/after", "x"); err != nil {
		t.Fatal(err)
	}

	dst := newMember(t, "dst")
	restored := filepath.Join(t.TempDir(), "restored")
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        path,
		Name:                dst.name,
		OutputDataDir:       restored,
		PeerURLs:            []string{dst.peer},
		InitialCluster:      dst.name + "=" + dst.peer,
		InitialClusterToken: "restored",
	}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	rcli := startEtcd(t, bin, restored, dst)
	got, err := rcli.Get(ctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != len(want) {
		t.Fatalf("restored etcd holds %d keys under /registry/, want %d", len(got.Kvs), len(want))
	}
	for _, kv := range got.Kvs {
		if want[string(kv.Key)] != string(kv.Value) {
			t.Errorf("restored %s = %q, want %q", kv.Key, kv.Value, want[string(kv.Key)])
		}
	}
	if got.Header.Revision < meta.Revision {
		t.Errorf("restored revision %d < snapshot revision %d", got.Header.Revision, meta.Revision)
	}
}

// TestTakeFailsWithoutHealthyMember: with no member answering, Take fails
// with ErrNoHealthyMember and writes nothing — the error the upgrade holds
// its control plane on.
func TestTakeFailsWithoutHealthyMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buf bytes.Buffer
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	_, err := Take(ctx, clientv3.Config{Endpoints: []string{dead}, DialTimeout: time.Second}, &buf, time.Time{})
	if !errors.Is(err, ErrNoHealthyMember) {
		t.Fatalf("Take = %v, want ErrNoHealthyMember", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("Take wrote %d bytes with no member", buf.Len())
	}
}

// TestTakeNamesTheVersionOfEtcd35: etcd 3.5 sends no version with its
// snapshot; the member's status just before says it (the lab's demo
// listed a 3.5.21 snapshot with no etcd version before).
func TestTakeNamesTheVersionOfEtcd35(t *testing.T) {
	bin := testenv.RequireFile(t, filepath.Join(cachedir.Build(), "etcd", "v3.5.21", "bin", "etcd"), "etcd 3.5.21 (build it: build/k8s/etcd.sh 3.5.21, or make deps)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := newMember(t, "old")
	startEtcd(t, bin, filepath.Join(t.TempDir(), "old"), m)
	meta, err := Take(ctx, clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 2 * time.Second}, io.Discard, time.Now())
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if meta.EtcdVersion != "3.5.21" {
		t.Fatalf("meta.EtcdVersion = %q, want 3.5.21", meta.EtcdVersion)
	}
}
