package main

import (
	"log/slog"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moltproject/molt/coordinator"
)

// kubeConnector reaches clusters through their kubeconfig.
type kubeConnector struct{ log *slog.Logger }

func (k kubeConnector) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	return coordinator.ConnectKube(cluster, kubeconfig, k.log)
}

func registerMetrics(reg *prometheus.Registry, c *coordinator.Coordinator) {}

func extraRoutes(c *coordinator.Coordinator) func(chi.Router) { return nil }
