package lab

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// CheckWorkloadPaths sends one request down each of WorkloadProbes' paths
// (Service name through cluster DNS and kube-proxy; the data-plane load
// balancer from outside the hosts) and fails (ErrNotReady) naming the first
// path that does not answer with a sample pod.
func (l *Lab) CheckWorkloadPaths(ctx context.Context) error {
	for _, pc := range l.WorkloadProbes() {
		if msg := askOnce(ctx, &http.Client{Timeout: 5 * time.Second, Transport: pc.Transport}, pc); msg != "" {
			return fmt.Errorf("%w: %s: %s", ErrNotReady, pc.Name, msg)
		}
	}
	return nil
}
