package main

import (
	"log/slog"

	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/kube"
)

// kubeConnector reaches clusters through their kubeconfig.
type kubeConnector struct {
	cfg kube.Config
	log *slog.Logger
}

func (k kubeConnector) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	return coordinator.ConnectKube(cluster, kubeconfig, k.cfg, k.log)
}
