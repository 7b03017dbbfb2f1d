package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// BackupService is what the backup routes need (docs/backup.md).
type BackupService interface {
	// Backups lists a cluster's recorded etcd backups, newest first.
	Backups(cluster string) ([]api.Backup, error)
	// StoreBackup writes and records the snapshot an agent uploads for
	// its backup operation.
	StoreBackup(ctx context.Context, cluster, node, opID string, desc api.Backup, body io.Reader) (api.Backup, error)
}

// backupUploadTimeout bounds reading one snapshot upload. The server's
// ReadTimeout (60 s) is sized for JSON bodies; etcd's largest database
// (8 GiB) at 10 MB/s takes about 14 minutes.
const backupUploadTimeout = 30 * time.Minute

// MaxBackupBytes bounds a snapshot upload: etcd's largest backend quota
// (8 GiB) and a margin.
const MaxBackupBytes = 9 << 30

type backupHandlers struct{ svc BackupService }

// list serves GET /v1/clusters/{name}/backups.
func (h *backupHandlers) list(w http.ResponseWriter, r *http.Request) {
	all, err := h.svc.Backups(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if all == nil {
		all = []api.Backup{}
	}
	writeJSON(w, http.StatusOK, api.BackupList{Backups: all})
}

// upload serves POST /v1/agents/{cluster}/{node}/backups?operation=<id>:
// the body is the snapshot's bytes, the api.BackupHeader header its
// description. It answers the record (200), the same one for an
// operation uploaded again.
func (h *backupHandlers) upload(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
		writeProblem(w, r, fmt.Errorf("%w: a snapshot upload is application/octet-stream, not %q", errMediaType, ct))
		return
	}
	if r.ContentLength > MaxBackupBytes {
		writeProblem(w, r, fmt.Errorf("%w: a snapshot upload is at most %d bytes, this one %d", errTooLarge, int64(MaxBackupBytes), r.ContentLength))
		return
	}
	var desc api.Backup
	if err := json.Unmarshal([]byte(r.Header.Get(api.BackupHeader)), &desc); err != nil {
		writeProblem(w, r, &coordinator.RuleError{Rule: "backup-header",
			Detail: fmt.Sprintf("header %s must hold the snapshot's description as JSON: %v", api.BackupHeader, err), Err: coordinator.ErrInvalid})
		return
	}
	op := r.URL.Query().Get("operation")
	if op == "" {
		writeProblem(w, r, &coordinator.RuleError{Rule: "backup-operation", Detail: "query parameter operation (the backup operation's ID) is required", Err: coordinator.ErrInvalid})
		return
	}
	// A snapshot is far larger than an API body: give it its own
	// deadline instead of the server's.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(backupUploadTimeout))
	body := http.MaxBytesReader(w, r.Body, MaxBackupBytes)
	b, err := h.svc.StoreBackup(r.Context(), chi.URLParam(r, "cluster"), chi.URLParam(r, "node"), op, desc, body)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}
