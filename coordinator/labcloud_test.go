package coordinator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/labcloud"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// labClouds builds the lab adapter for a cluster's endpoint, as
// molt-coordinator does (a client per spec).
type labClouds struct{}

func (labClouds) Provider(spec phases.CloudSpec) (cloud.Provider, error) {
	if spec.Provider != phases.CloudLab {
		return nil, &coordinator.RuleError{Rule: "cloud-provider", Detail: "only lab here", Err: coordinator.ErrInvalid}
	}
	return labcloud.New(labcloud.Config{Endpoint: spec.Endpoint})
}

// TestLabAdapterRegistrationAndSurge registers a cluster whose MIG pool is
// the lab's, reached over HTTP at its cloud spec's endpoint (the service
// here serves the in-memory provider), and upgrades it by surge through
// that transport. Registration fills the pool's nodes from the groups'
// instances and refuses, naming the rule, a group the service does not
// have, a lab cloud without a usable endpoint, or one nothing answers at.
func TestLabAdapterRegistrationAndSurge(t *testing.T) {
	mem := newMIGCloud(t,
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "mig-a"}, TargetSize: 1},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-b", Name: "mig-b"}, TargetSize: 1})
	srv := httptest.NewServer(labcloud.Handler(mem))
	defer srv.Close()
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, func(cfg *coordinator.Config) {
		cfg.Clouds = labClouds{}
		cfg.InstancePoll = 5 * time.Millisecond
	})
	cl := tc.anyClient(0)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	one := 1
	pool := api.Pool{Name: "mig", Role: api.RoleWorker, Backing: api.BackingMIG, Settings: api.UpgradeSettings{MaxSurge: &one},
		Groups: []api.InstanceGroup{{Zone: "zone-a", Name: "mig-a"}, {Zone: "zone-b", Name: "mig-b"}}}
	spec := migSpec(pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	refused := func(endpoint string, groups []api.InstanceGroup, rule string) {
		t.Helper()
		s := migSpec(pool)
		s.Cloud = &api.CloudSpec{Provider: phases.CloudLab, Endpoint: endpoint}
		s.Pools[1].Groups = groups
		_, err := cl.Do(ctx, http.MethodPut, "/v1/clusters/cloudy", s, nil)
		var p *api.Problem
		require.ErrorAs(t, err, &p, "endpoint %q groups %v", endpoint, groups)
		require.Equal(t, rule, p.Rule, "endpoint %q groups %v: %v", endpoint, groups, err)
	}
	refused(srv.URL, []api.InstanceGroup{{Zone: "zone-a", Name: "mig-z"}}, "cloud-group-not-found")
	refused("", pool.Groups, "cloud-provider")
	refused("10.77.0.1:7090", pool.Groups, "cloud-provider")
	refused("http://127.0.0.1:1", pool.Groups, "cloud-unreachable")
	_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/cloudy", nil, nil)
	require.Error(t, err, "nothing was registered")

	spec.Cloud = &api.CloudSpec{Provider: phases.CloudLab, Endpoint: srv.URL}
	put(t, cl, "/v1/clusters/cloudy", spec)
	reg := getCluster(t, cl, "cloudy").Spec
	var nodes []api.Node
	for _, p := range reg.Pools {
		if p.Name == "mig" {
			nodes = p.Nodes
		}
	}
	require.Equal(t, []api.Node{{Name: "mig-a-0001", Zone: "zone-a"}, {Name: "mig-b-0001", Zone: "zone-b"}}, nodes, "the groups' instances are the pool's nodes")

	runAgents(ctx, tc, "cloudy", bareMetalNodes(reg))
	// The lab's machines, as the service here has them.
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	waitAgents(t, tc, "cloudy", len(nodeNames(reg)))
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	u := waitUpgrade(ctx, t, tc, "upgrade done", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeDone })
	p, _ := u.Pool("mig")
	for _, n := range u.PoolNodes(p) {
		require.Equal(t, phases.ReplacementName(p.GroupOf(&n), u.ID, n.Node), n.Live())
		ins, err := mem.ListInstances(ctx, cloud.GroupRef{Zone: n.Zone, Name: p.GroupOf(&n)})
		require.NoError(t, err)
		require.Len(t, ins, 1)
		require.Equal(t, n.Live(), ins[0].Name, "only the replacement is left")
	}
	require.Equal(t, "1.34.4", getCluster(t, cl, "cloudy").Status.Version)
}
