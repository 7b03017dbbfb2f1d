package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/gce"
	"github.com/moltproject/molt/cloud/labcloud"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/phases"
)

// kubeConnector reaches clusters through their kubeconfig.
type kubeConnector struct {
	cfg kube.Config
	log *slog.Logger
}

func (k kubeConnector) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	return coordinator.ConnectKube(cluster, kubeconfig, k.cfg, k.log)
}

// cloudConnector builds the cloud adapter a cluster's cloud spec names,
// once per spec: gce (application-default credentials, the spec's project
// and endpoint) and lab (the lab's instance groups, served over HTTP by the
// process that runs the lab, at the spec's endpoint).
type cloudConnector struct {
	mu        sync.Mutex
	providers map[phases.CloudSpec]cloud.Provider
	// lab builds the lab's adapter for an endpoint (nil: none).
	lab func(endpoint string) (cloud.Provider, error)
}

func newCloudConnector() *cloudConnector {
	return &cloudConnector{providers: map[phases.CloudSpec]cloud.Provider{}, lab: newLabAdapter}
}

// newLabAdapter is the lab adapter for an endpoint: the lab driver's
// instance-group service (lab.GroupService), which listens on the loopback
// of the lab's network namespace, where the members of a lab's
// coordinator run.
func newLabAdapter(endpoint string) (cloud.Provider, error) {
	if endpoint == "" {
		return nil, fmt.Errorf("the lab adapter needs cloud.endpoint: the URL the lab driver serves its instance groups on (molt-lab prints it)")
	}
	return labcloud.New(labcloud.Config{Endpoint: endpoint})
}

func (c *cloudConnector) Provider(spec phases.CloudSpec) (cloud.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.providers[spec]; ok {
		return p, nil
	}
	var p cloud.Provider
	var err error
	switch spec.Provider {
	case phases.CloudGCE:
		p, err = gce.New(context.Background(), gce.Config{Project: spec.Project, Endpoint: spec.Endpoint})
	case phases.CloudLab:
		if c.lab == nil {
			return nil, fmt.Errorf("this binary has no lab adapter")
		}
		p, err = c.lab(spec.Endpoint)
	default:
		return nil, fmt.Errorf("unknown cloud adapter %q", spec.Provider)
	}
	if err != nil {
		return nil, err
	}
	c.providers[spec] = p
	return p, nil
}
