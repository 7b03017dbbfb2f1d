package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/seal"
)

// Secrets at rest (statemachine/secrets.go, docs/security.md). A
// kubeconfig is sealed with the member's key ring (Config.Keyring) before
// its PutCluster is proposed, so the Raft log and the snapshots hold only
// the envelope; it is opened where the coordinator connects to the cluster
// (clusterOps). Apply functions never see a key. Kubeconfigs left in plain
// text by entries from before sealing are used as they are until a rewrap
// seals them.

// ErrNoKeyring: the member has no encryption key ring, so it can neither
// seal a kubeconfig nor open one.
var ErrNoKeyring = errors.New("coordinator: no encryption key ring (molt-coordinator --encryption-key-file)")

// maxRewrapBatch bounds the envelopes one rewrap entry carries (bytes), so
// that many clusters' kubeconfigs make several entries, not one huge one.
const maxRewrapBatch = 256 << 10

// kubeconfigPurpose binds a sealed kubeconfig to its cluster: an envelope
// copied to another cluster does not open.
func kubeconfigPurpose(cluster string) string { return "kubeconfig/" + cluster }

// sealKubeconfig seals a kubeconfig for cluster with the primary key.
func (c *Coordinator) sealKubeconfig(cluster, kubeconfig string) (string, error) {
	if c.cfg.Keyring == nil {
		return "", fmt.Errorf("cluster %s: cannot seal its kubeconfig: %w", cluster, ErrNoKeyring)
	}
	return c.cfg.Keyring.Seal([]byte(kubeconfig), kubeconfigPurpose(cluster)), nil
}

// openKubeconfig returns a cluster's kubeconfig from its stored form
// (statemachine.ClusterRecord.StoredKubeconfig): an envelope is opened
// with the key ring; plain text, from entries older than sealing, is
// returned as it is.
func (c *Coordinator) openKubeconfig(cluster, stored string) ([]byte, error) {
	if !seal.IsSealed(stored) {
		return []byte(stored), nil
	}
	if c.cfg.Keyring == nil {
		return nil, fmt.Errorf("cluster %s: cannot open its sealed kubeconfig: %w", cluster, ErrNoKeyring)
	}
	kc, err := c.cfg.Keyring.Open(stored, kubeconfigPurpose(cluster))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig: %w", cluster, err)
	}
	return kc, nil
}

// checkSealedAtStart looks at the state restored from the latest snapshot:
// a member without a key ring refuses to start when it holds sealed
// kubeconfigs; one whose ring lacks a key they name only warns, since the
// log after the snapshot may hold a rewrap that replaced them.
func (c *Coordinator) checkSealedAtStart() error {
	for _, r := range c.sm.Clusters() {
		if r.KubeconfigSealed == "" {
			continue
		}
		if c.cfg.Keyring == nil {
			return fmt.Errorf("coordinator: the state holds sealed kubeconfigs (cluster %s) and this member has no key to open them: "+
				"copy the encryption key file of the other members: %w", r.Spec.Name, ErrNoKeyring)
		}
		if id, err := seal.KeyID(r.KubeconfigSealed); err == nil {
			if _, err := c.cfg.Keyring.Open(r.KubeconfigSealed, kubeconfigPurpose(r.Spec.Name)); errors.Is(err, seal.ErrUnknownKey) {
				c.log.Warn("a kubeconfig in the latest snapshot is sealed with a key this member's key ring lacks", "cluster", r.Spec.Name, "key", id)
			}
		}
	}
	return nil
}

// RewrapSecrets seals every stored kubeconfig again with the primary key:
// those sealed with another key of the ring, and those left in plain text
// by entries older than sealing. Every kubeconfig is opened before
// anything is proposed, so one the ring cannot open fails the call and
// changes nothing. Each replacement is checked on apply against the value
// it was made from; one that raced a PutCluster is reported stale.
func (c *Coordinator) RewrapSecrets(ctx context.Context) (api.RewrapResult, error) {
	kr := c.cfg.Keyring
	if kr == nil {
		return api.RewrapResult{}, ErrNoKeyring
	}
	res := api.RewrapResult{Key: kr.Primary(), Rewrapped: []string{}, Current: []string{}, Stale: []string{}}
	var batches [][]statemachine.KubeconfigRewrap
	var batch []statemachine.KubeconfigRewrap
	size := 0
	for _, r := range c.sm.Clusters() {
		name, stored := r.Spec.Name, r.StoredKubeconfig()
		if stored == "" {
			continue
		}
		if id, err := seal.KeyID(stored); err == nil && id == kr.Primary() {
			res.Current = append(res.Current, name)
			continue
		}
		kc, err := c.openKubeconfig(name, stored)
		if err != nil {
			return api.RewrapResult{}, fmt.Errorf("rewrap: nothing changed: %w", err)
		}
		sealed := kr.Seal(kc, kubeconfigPurpose(name))
		batch = append(batch, statemachine.KubeconfigRewrap{Cluster: name, Old: statemachine.SecretDigest(stored), Sealed: sealed})
		if size += len(sealed); size >= maxRewrapBatch {
			batches, batch, size = append(batches, batch), nil, 0
		}
	}
	if len(batch) > 0 {
		batches = append(batches, batch)
	}
	noteAudit(ctx, func(r *AuditRecord) { r.Detail = "under key " + kr.Primary() })
	for _, b := range batches {
		v, err := c.apply(ctx, statemachine.RewrapSecretsCmd{Kubeconfigs: b, Now: c.cfg.Clock.Now()})
		if err != nil {
			return res, err
		}
		out, _ := v.(statemachine.RewrapResult)
		res.Rewrapped = append(res.Rewrapped, out.Rewrapped...)
		res.Stale = append(res.Stale, out.Stale...)
	}
	return res, nil
}
