package agenttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// Snapshot answers an EtcdSnapshot operation as a simulated control-plane
// host does: it uploads a small made-up snapshot of the operation through
// cl, as molt-agent uploads a real one, and returns the operation's
// result (failed when the upload is refused). What the simulated agents
// of the coordinator's, the web view's and the mixed-version tests do.
func Snapshot(ctx context.Context, cl *client.Client, cluster, node string, op api.Operation, now time.Time) api.OperationResult {
	data := []byte("simulated etcd snapshot of " + cluster + " for " + op.ID)
	sum := sha256.Sum256(data)
	desc := api.Backup{Member: "https://" + node + ":2379", Revision: int64(len(op.ID)), Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), EtcdVersion: "3.6.4", TakenAt: now.UTC().Truncate(time.Second)}
	res := api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Message: "simulated"}
	b, err := cl.UploadBackup(ctx, cluster, node, op.ID, desc, func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		res.State, res.Message = api.OpFailed, fmt.Sprintf("upload: %v", err)
		return res
	}
	res.Details = map[string]string{api.DetailBackupSHA256: b.SHA256, api.DetailBackupRevision: strconv.FormatInt(b.Revision, 10),
		api.DetailBackupSize: strconv.FormatInt(b.Size, 10), api.DetailBackupMember: b.Member}
	return res
}
