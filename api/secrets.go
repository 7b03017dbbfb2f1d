package api

// RewrapResult answers POST /v1/secrets/rewrap (admin): every stored secret
// is sealed again with the coordinator's primary encryption key
// (docs/security.md). Clusters are named by the kubeconfig the leader
// re-sealed, found already sealed with the primary key, or left as they
// were because the kubeconfig changed while the rewrap ran (run it again).
type RewrapResult struct {
	// Key is the ID of the primary key the secrets are now sealed with.
	Key       string   `json:"key"`
	Rewrapped []string `json:"rewrapped"`
	Current   []string `json:"current"`
	Stale     []string `json:"stale"`
}
