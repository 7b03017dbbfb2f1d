package main

import (
	"log/slog"

	"github.com/moltproject/molt/coordinator"
)

// kubeConnector reaches clusters through their kubeconfig.
type kubeConnector struct{ log *slog.Logger }

func (k kubeConnector) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	return coordinator.ConnectKube(cluster, kubeconfig, k.log)
}
