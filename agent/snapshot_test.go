package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/trust"
)

// etcdBin is the etcd build/k8s/etcd.sh produces (make deps), the one the
// lab runs (3.6.4).
func etcdBin(t *testing.T) string {
	dir := os.Getenv("MOLT_ETCD_BIN")
	if dir == "" {
		dir = filepath.Join(cachedir.Build(), "etcd", "v3.6.4", "bin")
	}
	return testenv.RequireFile(t, filepath.Join(dir, "etcd"), "etcd (build it: build/k8s/etcd.sh, or make deps)")
}

func loopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tlsEtcd starts a single-member etcd that serves its clients over TLS
// and asks for their certificates, as kubeadm's does, and lays the
// client credentials out under root where kubeadm keeps them (the
// agent's defaults). It returns the client URL and a client that wrote
// objects into it.
func tlsEtcd(t *testing.T, root string) string {
	t.Helper()
	bin := etcdBin(t)
	now := time.Now()
	ca, err := trust.NewCA("etcd-ca", now)
	require.NoError(t, err)
	pair := func(id string, hosts []string) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		certPEM, err = ca.IssueMember(id, hosts, key.Public(), now)
		require.NoError(t, err)
		keyPEM, err = trust.EncodeKey(key)
		require.NoError(t, err)
		return certPEM, keyPEM
	}
	pki := filepath.Join(root, "etc/kubernetes/pki/etcd")
	require.NoError(t, os.MkdirAll(pki, 0o755))
	caPEM := trust.EncodeCert(ca.Cert.Raw)
	srvCert, srvKey := pair("etcd", []string{"127.0.0.1"})
	cliCert, cliKey := pair("healthcheck-client", nil)
	for name, b := range map[string][]byte{"ca.crt": caPEM, "server.crt": srvCert, "server.key": srvKey,
		"healthcheck-client.crt": cliCert, "healthcheck-client.key": cliKey} {
		require.NoError(t, os.WriteFile(filepath.Join(pki, name), b, 0o600))
	}
	client := fmt.Sprintf("https://127.0.0.1:%d", loopbackPort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", loopbackPort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--name", "cp-1", "--data-dir", t.TempDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "cp-1="+peer,
		"--cert-file", filepath.Join(pki, "server.crt"), "--key-file", filepath.Join(pki, "server.key"),
		"--trusted-ca-file", filepath.Join(pki, "ca.crt"), "--client-cert-auth", "--log-level", "error")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("etcd log:\n%s", logs.String())
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	kp, err := tls.X509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Put(rctx, "/registry/namespaces/default", "{}")
		rcancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "etcd not serving after 30s: %v", err)
	}
	for i := range 50 {
		_, err := cli.Put(context.Background(), fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "data")
		require.NoError(t, err)
	}
	return client
}

// TestEtcdSnapshotOperation: against a real etcd 3.6.4 with client
// certificate authentication, the agent takes the snapshot with the
// host's credentials where kubeadm keeps them, uploads it, and reports
// its description; the bytes the coordinator got are those described,
// and the host keeps no copy. An agent that dies after the snapshot was
// taken uploads that snapshot when it starts again, and one that dies
// after the upload does not upload again: one backup per operation.
func TestEtcdSnapshotOperation(t *testing.T) {
	for _, crash := range []string{"", stepSnapshotTaken, stepSnapshotUploaded} {
		name := "no crash"
		if crash != "" {
			name = "crash at " + crash
		}
		t.Run(name, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			h.cfg.EtcdEndpoints = []string{tlsEtcd(t, h.root)}
			op := api.Operation{ID: "lab-1.34.4-1/run/backup/a0", Kind: api.OpEtcdSnapshot, EtcdSnapshot: &api.EtcdSnapshot{}}
			var res api.OperationResult
			if crash == "" {
				stop, _ := runAgent(t, h.cfg)
				coord.enqueue(op)
				res = coord.waitResult(t, op.ID)
				require.NoError(t, stop())
			} else {
				res = crashAndResume(t, coord, h, op, crash, func() {})
			}
			require.Equal(t, api.OpSucceeded, res.State, res.Message)
			up, ok, uploads := coord.Backup(op.ID)
			require.True(t, ok, "the snapshot was uploaded")
			require.Equal(t, 1, uploads, "one upload: after a crash past the upload, none again")
			sum := sha256.Sum256(up.Data)
			require.Equal(t, hex.EncodeToString(sum[:]), up.Backup.SHA256, "the bytes are those described")
			require.Equal(t, up.Backup.SHA256, res.Details[api.DetailBackupSHA256])
			require.Equal(t, strconv.Itoa(len(up.Data)), res.Details[api.DetailBackupSize])
			require.Equal(t, h.cfg.EtcdEndpoints[0], res.Details[api.DetailBackupMember])
			rev, err := strconv.ParseInt(res.Details[api.DetailBackupRevision], 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, rev, int64(51), "the snapshot holds every write")
			require.Regexp(t, `^3\.6\.`, up.Backup.EtcdVersion, "etcd 3.6 names its storage version: the etcdutl to restore with")
			entries, _ := os.ReadDir(filepath.Join(h.root, h.cfg.DataDir, "snapshots"))
			require.Empty(t, entries, "the host keeps no copy once the coordinator holds it")
		})
	}
}

// TestEtcdSnapshotWithoutCredentials: a host with no etcd client
// certificate fails the operation saying so, and uploads nothing.
func TestEtcdSnapshotWithoutCredentials(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	stop, _ := runAgent(t, h.cfg)
	op := api.Operation{ID: "lab-1.34.4-1/run/backup/a0", Kind: api.OpEtcdSnapshot, EtcdSnapshot: &api.EtcdSnapshot{}}
	coord.enqueue(op)
	res := coord.waitResult(t, op.ID)
	require.NoError(t, stop())
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, ErrNoEtcd.Error())
	_, ok, uploads := coord.Backup(op.ID)
	require.False(t, ok)
	require.Zero(t, uploads)
}
