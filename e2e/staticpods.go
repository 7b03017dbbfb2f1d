package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	pollpkg "github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/lab"
)

// staticPodsReported bounds how long the agents' beats may take to bring
// the images of the pods the upgrade started last into molt's record: a
// few heartbeat intervals.
const staticPodsReported = 90 * time.Second

// VerifyStaticPodsObserved: molt's record of every control-plane host's
// static pods, as its agent reported them (status.agents[].staticPods,
// not the agents' journals nor molt's own bookkeeping), names the images
// release v names for them, and no node drifted. It polls until the last
// beats arrived.
func VerifyStaticPodsObserved(ctx context.Context, env *Env, v string) error {
	var rel api.Release
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+v, nil, &rel); err != nil {
		return err
	}
	if len(rel.Components.StaticPods) == 0 {
		return fmt.Errorf("release %s names no static pods", v)
	}
	cps := env.Lab.Config().Topology.WithRole(lab.RoleControlPlane)
	return pollpkg.Until(ctx, staticPodsReported, time.Second, func(ctx context.Context) (bool, string, error) {
		var c api.Cluster
		if _, err := env.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName, nil, &c); err != nil {
			return false, err.Error(), nil
		}
		agents := map[string]api.AgentStatus{}
		for _, a := range c.Status.Agents {
			agents[a.Node] = a
			if a.Drift != "" {
				return false, fmt.Sprintf("%s drifted: %s", a.Node, a.Drift), nil
			}
		}
		var wrong []string
		for _, h := range cps {
			got := agents[h.Name].StaticPods
			for comp, image := range rel.Components.StaticPods {
				if got[comp] != image {
					wrong = append(wrong, fmt.Sprintf("%s: %s recorded %q, release %s names %s", h.Name, comp, got[comp], v, image))
				}
			}
		}
		sort.Strings(wrong)
		return len(wrong) == 0, strings.Join(wrong, "; "), nil
	})
}
