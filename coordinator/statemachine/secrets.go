package statemachine

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Secrets at rest. A cluster's kubeconfig reaches the log sealed: the
// leader encrypts it (package seal, purpose "kubeconfig/<cluster>") before
// proposing, so the entry, the state and every snapshot hold only the
// envelope, and applying stays deterministic (no key, no randomness in an
// apply function). Entries written before sealing carry the kubeconfig in
// plain text (PutClusterCmd.Kubeconfig) and still apply as they did.
//
// RewrapSecretsCmd replaces stored secrets with new envelopes: the leader
// opens each with its key ring and seals it again with the primary key
// (key rotation), which also seals the plain-text kubeconfigs left by old
// entries. Each replacement names the digest of the value it replaces
// (SecretDigest), so one that raced a PutCluster is refused, not applied.

// RewrapSecretsCmd (CmdRewrapSecrets) replaces stored kubeconfigs by new
// envelopes of the same plain text.
type RewrapSecretsCmd struct {
	Kubeconfigs []KubeconfigRewrap
	Now         time.Time
}

// KubeconfigRewrap replaces one cluster's stored kubeconfig.
type KubeconfigRewrap struct {
	Cluster string
	// Old is SecretDigest of the stored value it replaces (sealed, or
	// plain text from old entries).
	Old string
	// Sealed is the new envelope.
	Sealed string
}

// RewrapResult reports, by cluster, which replacements applied and which
// were stale (the cluster is gone or its kubeconfig changed since).
type RewrapResult struct {
	Rewrapped []string
	Stale     []string
}

// SecretDigest is how a rewrap names the value it replaces: the SHA-256,
// in hex, of the stored form.
func SecretDigest(stored string) string {
	sum := sha256.Sum256([]byte(stored))
	return hex.EncodeToString(sum[:])
}

// StoredKubeconfig returns the cluster's kubeconfig as stored: sealed, or
// in plain text from entries older than sealing; "" when it has none.
func (r *ClusterRecord) StoredKubeconfig() string {
	if r.KubeconfigSealed != "" {
		return r.KubeconfigSealed
	}
	return r.Kubeconfig
}

// setKubeconfig records a PutCluster's kubeconfig, when it has one: the
// newest one wins, so a sealed one replaces a plain one and the reverse
// (an old entry) too.
func (r *ClusterRecord) setKubeconfig(c PutClusterCmd) {
	switch {
	case c.KubeconfigSealed != "":
		r.KubeconfigSealed, r.Kubeconfig = c.KubeconfigSealed, ""
	case c.Kubeconfig != "":
		r.Kubeconfig, r.KubeconfigSealed = c.Kubeconfig, ""
	}
}

func (s *state) rewrapSecrets(c RewrapSecretsCmd) (any, error) {
	var res RewrapResult
	for _, k := range c.Kubeconfigs {
		r, ok := s.Clusters[k.Cluster]
		if !ok || k.Sealed == "" || r.StoredKubeconfig() == "" || SecretDigest(r.StoredKubeconfig()) != k.Old {
			res.Stale = append(res.Stale, k.Cluster)
			continue
		}
		r.KubeconfigSealed, r.Kubeconfig = k.Sealed, ""
		res.Rewrapped = append(res.Rewrapped, k.Cluster)
	}
	return res, nil
}
