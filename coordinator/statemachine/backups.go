package statemachine

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// etcd backups (docs/backup.md): the description of each snapshot a
// coordinator member holds, per cluster, newest first. The bytes are on
// the holder's disk, never in the log.

// SinceBackups is the release that introduced CmdBackup, the backup step
// (phases.StepLayoutBackup) and the cluster's EtcdBackup setting.
const SinceBackups = "0.2.0"

// DefaultBackupKeep is how many backups of a cluster are kept when the
// command names no retention (etcdbackup.DefaultKeep, the same rule).
const DefaultBackupKeep = 5

// BackupCmd (CmdBackup) records a snapshot that a coordinator member
// stored, and keeps the cluster's newest Keep (newest by TakenAt, equal
// times by higher revision; Keep < 1 means DefaultBackupKeep, so a
// misconfigured zero never forgets every backup). A record whose ID (the
// agent operation's) is known already changes nothing: an upload repeated
// after an agent's restart is recorded once.
type BackupCmd struct {
	Cluster string
	Backup  api.Backup
	Keep    int
	Now     time.Time
}

// Type is CmdBackup.
func (BackupCmd) Type() command.Type { return CmdBackup }

// BackupResult is what applying a BackupCmd did: the record as kept (the
// earlier one for a repeated ID, with Repeated set) and the records the
// retention dropped, whose holder deletes their files.
type BackupResult struct {
	Backup   api.Backup
	Repeated bool
	Dropped  []api.Backup
}

func (s *state) backup(c BackupCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	b := c.Backup
	if err := checkBackup(b); err != nil {
		return nil, err
	}
	for _, old := range r.Backups {
		if old.ID == b.ID {
			return BackupResult{Backup: old, Repeated: true}, nil
		}
	}
	all := append(slices.Clone(r.Backups), b)
	slices.SortStableFunc(all, func(x, y api.Backup) int {
		switch {
		case !x.TakenAt.Equal(y.TakenAt):
			return y.TakenAt.Compare(x.TakenAt)
		case x.Revision != y.Revision:
			return int(min(max(y.Revision-x.Revision, -1), 1))
		}
		return 0
	})
	keep := c.Keep
	if keep < 1 {
		keep = DefaultBackupKeep
	}
	var dropped []api.Backup
	if len(all) > keep {
		dropped = slices.Clone(all[keep:])
		all = all[:keep]
	}
	r.Backups = all
	return BackupResult{Backup: b, Dropped: dropped}, nil
}

// checkBackup refuses a record that does not describe a stored snapshot.
func checkBackup(b api.Backup) error {
	switch {
	case b.ID == "":
		return fmt.Errorf("%w: backup: no operation ID", ErrInvalid)
	case len(b.SHA256) != 64:
		return fmt.Errorf("%w: backup %s: sha256 %q is not 64 hex digits", ErrInvalid, b.ID, b.SHA256)
	case b.Size <= 0:
		return fmt.Errorf("%w: backup %s: size %d", ErrInvalid, b.ID, b.Size)
	case b.Holder == "" || b.File == "":
		return fmt.Errorf("%w: backup %s: no holder or file", ErrInvalid, b.ID)
	}
	return nil
}

// Backups returns the cluster's recorded backups, newest first.
func (f *Machine) Backups(cluster string) ([]api.Backup, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.Backups), nil
}

// backupFieldsSince is SinceBackups for a value that uses what the backup
// step added ("" otherwise): entries a release before it would decode
// without the field, silently, are written only once every member reads
// it (the capability gate).
func backupFieldsSince(c command.Command) string {
	switch c := c.(type) {
	case PutClusterCmd:
		if c.Spec.EtcdBackup != "" {
			return SinceBackups
		}
	case StartUpgradeCmd:
		if c.Options.StepLayout >= phases.StepLayoutBackup {
			return SinceBackups
		}
	case AutoStartCmd:
		if c.Options.StepLayout >= phases.StepLayoutBackup {
			return SinceBackups
		}
	case AdvanceCmd:
		for _, a := range c.Actions {
			if a.Step == phases.StepIDBackup {
				return SinceBackups
			}
		}
	}
	return ""
}

// Persisted forms (see persisted.go: append-only).

type backupCmdV1 struct {
	Cluster string    `json:"cluster"`
	Backup  backupV1  `json:"backup"`
	Keep    int       `json:"keep,omitempty"`
	Now     time.Time `json:"now"`
}

type backupV1 struct {
	ID          string    `json:"id"`
	Upgrade     string    `json:"upgrade,omitempty"`
	Node        string    `json:"node"`
	Member      string    `json:"member"`
	Revision    int64     `json:"revision"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	EtcdVersion string    `json:"etcdVersion,omitempty"`
	TakenAt     time.Time `json:"takenAt"`
	Holder      string    `json:"holder"`
	File        string    `json:"file"`
}

func backupToV1(b api.Backup) backupV1   { return backupV1(b) }
func backupFromV1(b backupV1) api.Backup { return api.Backup(b) }

func (c BackupCmd) persistedV1() any {
	return backupCmdV1{Cluster: c.Cluster, Backup: backupToV1(c.Backup), Keep: c.Keep, Now: c.Now}
}

// MarshalJSON encodes the command's persisted form.
func (c BackupCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

// UnmarshalJSON decodes the command's persisted form.
func (c *BackupCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p backupCmdV1) BackupCmd {
		return BackupCmd{Cluster: p.Cluster, Backup: backupFromV1(p.Backup), Keep: p.Keep, Now: p.Now}
	})
}
