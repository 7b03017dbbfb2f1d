package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/lab"
)

// EtcdMove is how one control-plane host's etcd moved in an upgrade, as
// its agent's journal records the UpgradeStaticPods operation.
type EtcdMove struct {
	Host     string
	From, To string // images
	// EtcdWritten and OthersWritten are when etcd's manifest and then the
	// other components' were in place; Gate is the etcd gate's summary.
	EtcdWritten, OthersWritten time.Time
	Gate                       string
}

func (m EtcdMove) String() string {
	return fmt.Sprintf("%s: %s → %s, the other components %s after etcd; gate %s",
		m.Host, strings.TrimPrefix(m.From, "registry.k8s.io/"), strings.TrimPrefix(m.To, "registry.k8s.io/"),
		m.OthersWritten.Sub(m.EtcdWritten).Round(100*time.Millisecond), m.Gate)
}

// EtcdMoves reads every control-plane host's agent journal for the etcd
// part of its static-pod upgrade operations.
func EtcdMoves(ctx context.Context, env *Env) ([]EtcdMove, error) {
	var out []EtcdMove
	for _, h := range env.Lab.Config().Topology.WithRole(lab.RoleControlPlane) {
		b, err := env.Lab.Exec(ctx, h.Name, "cat", "/var/lib/molt-agent/journal.jsonl")
		if err != nil {
			return nil, fmt.Errorf("%s: journal: %w", h.Name, err)
		}
		moves := map[string]*EtcdMove{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var r struct {
				Time   time.Time            `json:"time"`
				ID     string               `json:"id"`
				Step   string               `json:"step"`
				Result *api.OperationResult `json:"result"`
			}
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			m := moves[r.ID]
			switch {
			case r.Step == "etcd-written":
				m = &EtcdMove{Host: h.Name, EtcdWritten: r.Time}
				moves[r.ID] = m
			case m == nil:
			case r.Step == "written":
				m.OthersWritten = r.Time
			case r.Result != nil:
				m.From, m.To, m.Gate = r.Result.Details["etcdPreviousImage"], r.Result.Details["etcdImage"], r.Result.Details["etcdGate"]
			}
		}
		for _, m := range moves {
			out = append(out, *m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EtcdWritten.Before(out[j].EtcdWritten) })
	return out, nil
}

// VerifyEtcdMoved: every control-plane host moved etcd from the etcd of
// release from to that of release to, etcd before the other components,
// behind a gate that ran (when the two releases' etcds differ).
func VerifyEtcdMoved(ctx context.Context, env *Env, from, to string) error {
	if lab.EtcdImage(from) == lab.EtcdImage(to) {
		return nil
	}
	moves, err := EtcdMoves(ctx, env)
	if err != nil {
		return err
	}
	var p problems
	byHost := map[string]EtcdMove{}
	for _, m := range moves {
		byHost[m.Host] = m
	}
	for _, h := range env.Lab.Config().Topology.WithRole(lab.RoleControlPlane) {
		m, ok := byHost[h.Name]
		if !ok {
			p.addf("%s: no etcd move in its agent's journal", h.Name)
			continue
		}
		p.check(m.From == lab.EtcdImage(from) && m.To == lab.EtcdImage(to), "%s: etcd %s → %s, not %s → %s", h.Name, m.From, m.To, lab.EtcdImage(from), lab.EtcdImage(to))
		p.check(!m.OthersWritten.IsZero() && !m.OthersWritten.Before(m.EtcdWritten), "%s: the other components written at %s, etcd at %s", h.Name, m.OthersWritten, m.EtcdWritten)
		p.check(strings.HasPrefix(m.Gate, "held "), "%s: the etcd gate did not run: %q", h.Name, m.Gate)
	}
	return p.err("etcd moved")
}

// Backups lists the cluster's etcd backups, newest first.
func Backups(ctx context.Context, env *Env) ([]api.Backup, error) {
	var l api.BackupList
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/backups", nil, &l); err != nil {
		return nil, err
	}
	return l.Backups, nil
}

// VerifyBackupFirst: upgrade u recorded an etcd backup, taken before any
// control-plane host's agent wrote its first new manifest (the journals'
// etcd-written step, so only when etcd moved; else only its presence).
func VerifyBackupFirst(ctx context.Context, env *Env, u *api.Upgrade) error {
	bs, err := Backups(ctx, env)
	if err != nil {
		return err
	}
	var b *api.Backup
	for i := range bs {
		if bs[i].Upgrade == u.ID {
			b = &bs[i]
		}
	}
	if b == nil {
		return fmt.Errorf("no etcd backup of upgrade %s among %d listed", u.ID, len(bs))
	}
	if b.Size <= 0 || len(b.SHA256) != 64 || b.Revision <= 0 {
		return fmt.Errorf("backup %s: size %d, sha256 %q, revision %d", b.ID, b.Size, b.SHA256, b.Revision)
	}
	moves, err := EtcdMoves(ctx, env)
	if err != nil {
		return err
	}
	for _, m := range moves {
		if !b.TakenAt.Before(m.EtcdWritten) {
			return fmt.Errorf("backup %s taken at %s, not before %s's etcd moved at %s", b.ID, b.TakenAt, m.Host, m.EtcdWritten)
		}
	}
	return nil
}
