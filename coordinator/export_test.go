package coordinator

// Hooks for the external tests of this package.

// ConnectCluster connects to cluster as the leader's work does, with its
// kubeconfig as stored (opened when sealed).
func (c *Coordinator) ConnectCluster(cluster string) (ClusterOps, error) {
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return nil, err
	}
	return c.clusterOps(cluster, r.StoredKubeconfig())
}

// StoredKubeconfig returns a cluster's kubeconfig as the replicated state
// holds it: sealed, and plain (from entries older than sealing).
func (c *Coordinator) StoredKubeconfig(cluster string) (sealed, plain string) {
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return "", ""
	}
	return r.KubeconfigSealed, r.Kubeconfig
}
