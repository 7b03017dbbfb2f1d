package phases

import (
	"fmt"
	"strconv"
	"strings"
)

// The backup step (StepLayoutBackup): before the first control-plane node
// of an upgrade, an etcd snapshot of the cluster is taken and recorded
// (docs/backup.md). The step is a cluster-level step run like the add-ons:
// each attempt is an ActRunStep whose ID is the agent operation's ID
// (BackupOperationID); the coordinator gives the operation to the agent
// of one control-plane host and commits the step's result once the
// snapshot is recorded, or its failure. A failed attempt leaves the step
// running with the reason as its message and is tried again after
// StepRetryInterval: the control-plane pools depend on the step, so they
// never start without a recorded backup.

// Cluster settings of ClusterSpec.EtcdBackup.
const (
	// EtcdBackupTake (the default, "") takes a snapshot before the control
	// plane of every upgrade.
	EtcdBackupTake = ""
	// EtcdBackupSkip lays upgrades out without the backup step: for a
	// cluster whose control-plane hosts hold no etcd client credentials
	// (an external etcd backed up on its own), said explicitly.
	EtcdBackupSkip = "skip"
)

// RuleEtcdBackup names the refusal of an unknown EtcdBackup setting.
const RuleEtcdBackup = "etcd-backup"

// backupStep reports whether an upgrade of c laid out at layout has a
// backup step (when c has a control-plane pool).
func backupStep(c *ClusterSpec, layout int) bool {
	return layout >= StepLayoutBackup && c.EtcdBackup != EtcdBackupSkip
}

// BackupOperationID is the ID of the agent operation of the backup step's
// attempt: the ID of the step's ActRunStep, "<upgrade>/run/backup/a<attempt>".
func (u *Upgrade) BackupOperationID(attempt int) string {
	return fmt.Sprintf("%s/run/%s/a%d", u.ID, StepIDBackup, attempt)
}

// ParseBackupOperationID splits a backup operation's ID
// (BackupOperationID).
func ParseBackupOperationID(id string) (upgrade string, attempt int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[1] != "run" || parts[2] != StepIDBackup || !strings.HasPrefix(parts[3], "a") {
		return "", 0, false
	}
	a, err := strconv.Atoi(parts[3][1:])
	if err != nil || a < 0 || parts[3][1:] != strconv.Itoa(a) {
		return "", 0, false
	}
	return parts[0], a, true
}
