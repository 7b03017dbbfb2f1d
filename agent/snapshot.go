package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/etcdbackup"
)

// The EtcdSnapshot operation (an upgrade's backup step, docs/backup.md):
// the snapshot is taken with this host's etcd client credentials from the
// first healthy member (etcdConfig lists them all), written to a file
// under the data directory, then uploaded to the coordinator, which
// records it. Journal steps make a restart resume where it stopped: a
// snapshot taken is uploaded, not taken again, and an upload repeated is
// recorded once by the coordinator (one record per operation ID).

// Journal steps of an EtcdSnapshot.
const (
	stepSnapshotTaken    = "snapshot-taken"
	stepSnapshotUploaded = "snapshot-uploaded"
)

// defaultSnapshotTimeout bounds taking and uploading a snapshot when the
// operation names no timeout.
const defaultSnapshotTimeout = 30 * time.Minute

// snapshotFile is where the operation's snapshot waits for its upload.
func (a *Agent) snapshotFile(opID string) string {
	return a.dataPath("snapshots", strings.NewReplacer("/", "_", "\\", "_").Replace(opID)+".db")
}

func (r *run) etcdSnapshot(ctx context.Context) (map[string]string, error) {
	a := r.a
	if r.done(stepSnapshotUploaded) {
		a.removeSnapshot(a.snapshotFile(r.op.ID)) // left by a restart right after the upload
		return snapshotDetails(r.st.Data), nil
	}
	timeout := defaultSnapshotTimeout
	if s := r.op.EtcdSnapshot.TimeoutSeconds; s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	file := a.snapshotFile(r.op.ID)
	if !r.done(stepSnapshotTaken) || !fileHas(file, r.st.Data[api.DetailBackupSHA256]) {
		m, err := a.takeSnapshot(ctx, file)
		if err != nil {
			return nil, err
		}
		if err := r.mark(ctx, stepSnapshotTaken, map[string]string{
			api.DetailBackupSHA256: m.SHA256, api.DetailBackupRevision: strconv.FormatInt(m.Revision, 10),
			api.DetailBackupSize: strconv.FormatInt(m.Size, 10), api.DetailBackupMember: m.Member,
			"etcdVersion": m.EtcdVersion, "takenAt": m.TakenAt.UTC().Format(time.RFC3339Nano)}); err != nil {
			return nil, err
		}
	}
	d := r.st.Data
	desc := api.Backup{Member: d[api.DetailBackupMember], SHA256: d[api.DetailBackupSHA256], EtcdVersion: d["etcdVersion"]}
	desc.Revision, _ = strconv.ParseInt(d[api.DetailBackupRevision], 10, 64)
	desc.Size, _ = strconv.ParseInt(d[api.DetailBackupSize], 10, 64)
	desc.TakenAt, _ = time.Parse(time.RFC3339Nano, d["takenAt"])
	rec, err := a.client.UploadBackup(ctx, a.cfg.Cluster, a.cfg.Node, r.op.ID, desc, func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		return nil, fmt.Errorf("upload the snapshot to the coordinator: %w", err)
	}
	if err := r.mark(ctx, stepSnapshotUploaded, map[string]string{"holder": rec.Holder}); err != nil {
		return nil, err
	}
	a.removeSnapshot(file)
	return snapshotDetails(r.st.Data), nil
}

// removeSnapshot deletes an uploaded snapshot: the coordinator holds it
// now, and this host keeps no copy of the cluster's secrets.
func (a *Agent) removeSnapshot(file string) {
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		a.log.Warn("remove the uploaded snapshot", "file", file, "err", err)
	}
}

// takeSnapshot writes a snapshot of the host's etcd cluster to file (a
// partial one is removed) and describes it.
func (a *Agent) takeSnapshot(ctx context.Context, file string) (etcdbackup.Meta, error) {
	cfg, err := a.etcdConfig(ctx)
	if err != nil {
		return etcdbackup.Meta{}, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return etcdbackup.Meta{}, err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return etcdbackup.Meta{}, err
	}
	m, err := etcdbackup.Take(ctx, cfg, f, a.clock.Now())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(file)
		return etcdbackup.Meta{}, err
	}
	a.log.Info("etcd snapshot taken", "member", m.Member, "revision", m.Revision, "size", m.Size)
	return m, nil
}

// fileHas reports whether file's bytes hash to sum: a snapshot journaled
// as taken is uploaded only if it is still whole.
func fileHas(file, sum string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == sum
}

func snapshotDetails(d map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{api.DetailBackupSHA256, api.DetailBackupRevision, api.DetailBackupSize, api.DetailBackupMember} {
		out[k] = d[k]
	}
	return out
}
