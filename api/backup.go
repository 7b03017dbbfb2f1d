package api

import "time"

// Backup describes one etcd snapshot the coordinator holds
// (GET /v1/clusters/{c}/backups, docs/backup.md). The bytes live on one
// coordinator member's disk (Holder), never in the replicated state.
type Backup struct {
	// ID is the ID of the agent operation that took it (one record per
	// operation: an upload repeated after a restart is not recorded twice).
	ID string `json:"id"`
	// Upgrade is the upgrade whose backup step took it ("" for none).
	Upgrade string `json:"upgrade,omitempty"`
	// Node is the host whose agent took it.
	Node string `json:"node"`
	// Member is the etcd member's client URL the snapshot came from.
	Member string `json:"member"`
	// Revision is the etcd store revision the snapshot holds at least.
	Revision int64 `json:"revision"`
	// Size is the snapshot's length in bytes; SHA256 the hex sha256 of
	// its bytes, both checked by the coordinator as it wrote them.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// EtcdVersion is the version of the member that produced it (etcd ≥
	// 3.6 reports it): restore with an etcdutl of that minor or newer.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// TakenAt is when the agent took it.
	TakenAt time.Time `json:"takenAt"`
	// Holder is the ID of the coordinator member whose data directory
	// holds the file, and File its path there.
	Holder string `json:"holder"`
	File   string `json:"file"`
}

// BackupList answers GET /v1/clusters/{c}/backups: newest first.
type BackupList struct {
	Backups []Backup `json:"backups"`
}

// BackupHeader carries the agent's description of an uploaded snapshot
// (a Backup as JSON, without Holder and File) on
// POST /v1/agents/{cluster}/{node}/backups.
const BackupHeader = "Molt-Backup"
