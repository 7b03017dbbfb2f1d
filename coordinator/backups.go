package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// etcd backups, the coordinator's side (docs/backup.md): an upgrade's
// backup step (phases/backup.go decides it) gives the EtcdSnapshot
// operation to the agent of one control-plane host; that agent takes the
// snapshot with the host's etcd credentials and uploads it here
// (StoreBackup); this member writes it under its data directory, checking
// size and sha256 as it writes, and records its description in one
// CmdBackup; the agent's result then passes the step (reportBackupResult)
// only if that record exists.

// Rules of the backup upload's refusals.
const (
	RuleBackupOperation = "backup-operation"
	RuleBackupSize      = "backup-size"
	RuleBackupSHA256    = "backup-sha256"
)

// backupHost is the host whose agent takes the upgrade's snapshot: the
// first node of the control-plane pools, in the order of the cluster's
// spec, whose agent is registered, not missing and healthy in the
// replicated state, and not known to run a molt-agent before 0.2.0
// (which does not know the operation). Any of them reaches every etcd
// member (the agent lists them all), so the choice is about a working
// agent, not about etcd; the same healthy host is chosen at every tick,
// so the operation stays where it was offered. When none qualifies it
// returns "" and why.
func (c *Coordinator) backupHost(cluster string, u *phases.Upgrade) (string, string) {
	old := false
	for i := range u.Pools {
		p := &u.Pools[i]
		if p.Role != phases.RoleControlPlane {
			continue
		}
		for _, n := range u.PoolNodes(p) {
			a, ok := c.sm.Agent(cluster, n.Node)
			if !ok || !a.Registered || a.Missing || !a.Healthy {
				continue
			}
			if !takesSnapshots(c.live.version(nodeKey(cluster, n.Node))) {
				old = true
				continue
			}
			return n.Node, ""
		}
	}
	if old {
		return "", "etcd snapshot: the healthy control-plane hosts run a molt-agent before 0.2.0, which cannot take one: update their agents (an upgrade to a release that names molt-agent 0.2.0) or set the cluster's etcdBackup to skip"
	}
	return "", "etcd snapshot: no control-plane host has a registered, healthy agent to take it"
}

// takesSnapshots reports whether an agent of release v knows the
// EtcdSnapshot operation: 0.2.0 on, or a release not known (not heard
// from since this leader started, or a build that names none).
func takesSnapshots(v string) bool {
	major, minor, ok := majorMinor(v)
	return !ok || major > 0 || minor >= 2
}

// backupOp is the operation of a backup step's attempt (its ActRunStep).
func backupOp(a phases.Action) api.Operation {
	return api.Operation{ID: a.ID, Kind: api.OpEtcdSnapshot, EtcdSnapshot: &api.EtcdSnapshot{}}
}

// Backups lists the cluster's recorded backups, newest first.
func (c *Coordinator) Backups(cluster string) ([]api.Backup, error) {
	return c.sm.Backups(cluster)
}

// backupDir is where this member keeps a cluster's snapshots.
func (c *Coordinator) backupDir(cluster string) string {
	return filepath.Join(c.cfg.Raft.DataDir, "backups", cluster)
}

// StoreBackup writes the snapshot an agent uploads for its backup
// operation opID, described by desc (the agent's etcdbackup.Meta), and
// records it. The bytes must be exactly desc.Size long and hash to
// desc.SHA256, else nothing is kept or recorded. An operation recorded
// already answers its record and stores nothing: an agent that restarts
// mid-upload uploads again, and the backup is recorded once.
func (c *Coordinator) StoreBackup(ctx context.Context, cluster, node, opID string, desc api.Backup, body io.Reader) (api.Backup, error) {
	if err := c.checkAgent(cluster, node); err != nil {
		return api.Backup{}, err
	}
	upgrade, _, ok := phases.ParseBackupOperationID(opID)
	if !ok || !c.sm.KnownUpgrade(cluster, upgrade) {
		return api.Backup{}, &RuleError{Rule: RuleBackupOperation, Detail: fmt.Sprintf("%q is not a backup operation of an upgrade of cluster %s", opID, cluster), Err: ErrNotFound}
	}
	all, err := c.sm.Backups(cluster)
	if err != nil {
		return api.Backup{}, err
	}
	if i := slices.IndexFunc(all, func(b api.Backup) bool { return b.ID == opID }); i >= 0 {
		return all[i], nil
	}
	if desc.Size <= 0 || len(desc.SHA256) != 64 {
		return api.Backup{}, &RuleError{Rule: RuleBackupSize, Detail: fmt.Sprintf("the upload must describe its size (%d) and sha256 (%q)", desc.Size, desc.SHA256), Err: ErrInvalid}
	}
	dir := c.backupDir(cluster)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return api.Backup{}, fmt.Errorf("backup directory: %w", err)
	}
	// The sum's first digits keep two snapshots of the same revision and
	// second apart.
	name := fmt.Sprintf("%d-%s-%s.db", desc.Revision, desc.TakenAt.UTC().Format("20060102T150405Z"), strings.ToLower(desc.SHA256[:12]))
	final := filepath.Join(dir, name)
	if err := writeChecked(dir, final, body, desc.Size, desc.SHA256); err != nil {
		return api.Backup{}, err
	}
	desc.ID, desc.Upgrade, desc.Node = opID, upgrade, node
	desc.Holder, desc.File = c.cfg.Raft.NodeID, final
	v, err := c.apply(ctx, statemachine.BackupCmd{Cluster: cluster, Backup: desc, Keep: c.cfg.BackupKeep, Now: c.cfg.Clock.Now()})
	if err != nil {
		_ = os.Remove(final)
		return api.Backup{}, err
	}
	res, _ := v.(statemachine.BackupResult)
	if res.Repeated && res.Backup.File != final {
		_ = os.Remove(final)
	}
	c.pruneBackupFiles(cluster)
	return res.Backup, nil
}

// writeChecked copies body into a temporary file in dir, checking its
// length and sha256 as it writes, and renames it to final once both
// match and the bytes are on disk.
func writeChecked(dir, final string, body io.Reader, size int64, sum string) error {
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	h := sha256.New()
	// One byte more than announced shows a body that is too long.
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, size+1))
	if err != nil {
		return fmt.Errorf("backup upload after %d bytes: %w", n, err)
	}
	if n != size {
		return &RuleError{Rule: RuleBackupSize, Detail: fmt.Sprintf("the upload is %d bytes, described as %d", n, size), Err: ErrInvalid}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sum) {
		return &RuleError{Rule: RuleBackupSHA256, Detail: fmt.Sprintf("the upload's sha256 is %s, described as %s", got, sum), Err: ErrInvalid}
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	return nil
}

// pruneBackupFiles deletes the snapshots of cluster this member holds
// that the replicated state no longer lists (dropped by the retention,
// or left by an upload that was never recorded). A member runs it after
// each backup it stores: files another member holds stay until that
// member stores one.
func (c *Coordinator) pruneBackupFiles(cluster string) {
	kept := map[string]bool{}
	if all, err := c.sm.Backups(cluster); err == nil {
		for _, b := range all {
			if b.Holder == c.cfg.Raft.NodeID {
				kept[b.File] = true
			}
		}
	}
	dir := c.backupDir(cluster)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() || strings.HasPrefix(e.Name(), ".upload-") || kept[p] {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("delete a dropped backup", "file", p, "err", err)
			continue
		}
		c.log.Info("deleted a backup the retention dropped", "cluster", cluster, "file", p)
	}
}

// reportBackupResult commits the end of a backup step's attempt: a
// failure with the agent's reason, or a success only when the snapshot it
// names is recorded (never a control plane without a backup).
func (c *Coordinator) reportBackupResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	upgrade, attempt, _ := phases.ParseBackupOperationID(r.ID)
	if !c.sm.KnownUpgrade(cluster, upgrade) {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("cluster %s has no upgrade %s", cluster, upgrade), Err: ErrNotFound}
	}
	res := phases.StepResult{Upgrade: upgrade, Step: phases.StepIDBackup, Attempt: attempt}
	if r.State == api.OpSucceeded {
		res.OK, res.Message = c.recordedBackup(cluster, node, r.ID)
	} else {
		res.Message = fmt.Sprintf("etcd snapshot on %s: %s", node, r.Message)
	}
	return c.commitBackupStep(ctx, cluster, res)
}

// recordedBackup says whether the backup of operation id is recorded, and
// the step's message either way.
func (c *Coordinator) recordedBackup(cluster, node, id string) (bool, string) {
	all, _ := c.sm.Backups(cluster)
	for _, b := range all {
		if b.ID == id {
			return true, fmt.Sprintf("etcd snapshot at revision %d (%d bytes, sha256 %s) from %s, taken by %s, held by coordinator member %s",
				b.Revision, b.Size, b.SHA256, b.Member, node, b.Holder)
		}
	}
	return false, fmt.Sprintf("etcd snapshot on %s: the agent reported success but no coordinator member recorded the snapshot", node)
}

// commitBackupStep commits a backup attempt's result; a stale one (the
// attempt was answered already) is acknowledged.
func (c *Coordinator) commitBackupStep(ctx context.Context, cluster string, res phases.StepResult) error {
	cmd := statemachine.StepResultCmd{Cluster: cluster, Result: res, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		if isStale(err) {
			return nil
		}
		return err
	}
	_, err := c.apply(ctx, cmd)
	if isStale(err) {
		return nil
	}
	return err
}
