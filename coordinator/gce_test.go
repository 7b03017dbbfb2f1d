package coordinator_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/gce"
	"github.com/moltproject/molt/cloud/gce/gcefake"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

type gceClouds struct{ p *gce.Provider }

func (g gceClouds) Provider(spec phases.CloudSpec) (cloud.Provider, error) { return g.p, nil }

// TestSurgeOverGCERequestLog upgrades a surge pool of two zones through
// the real Compute client against the fake Compute server and compares
// the changes the server saw — every mutating request, with its request
// ID — with a golden log: the template made once from the base, each
// zone's template set, one replacement created, the old instance
// deleted, zone after zone. (go test ./coordinator -run RequestLog -update
// rewrites it.)
func TestSurgeOverGCERequestLog(t *testing.T) {
	srv := gcefake.New(gcefake.Config{})
	t.Cleanup(srv.Close)
	script := "#!/bin/sh\nexec /opt/molt/bootstrap\n"
	srv.AddTemplate("web-1-33-6", &compute.InstanceProperties{MachineType: "e2-standard-4",
		Metadata: &compute.Metadata{Items: []*compute.MetadataItems{{Key: "startup-script", Value: &script}}}})
	ctx := context.Background()
	prov, err := gce.New(ctx, gce.Config{Project: srv.Project(), Endpoint: srv.URL(),
		ClientOptions: []option.ClientOption{option.WithoutAuthentication()}, PollInterval: time.Second, Clock: clock.NewInstant(time.Time{})})
	require.NoError(t, err)
	for _, zone := range []string{"europe-west1-b", "europe-west1-c"} {
		require.NoError(t, prov.CreateGroup(ctx, cloud.GroupRef{Zone: zone, Name: "web-" + zone[len(zone)-1:]}, "web-1-33-6", 1, "setup/"+zone))
	}
	srv.Settle()
	srv.ResetLog()

	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, func(cfg *coordinator.Config) {
		cfg.Clouds = gceClouds{prov}
		cfg.InstancePoll = time.Millisecond
	})
	cl := tc.anyClient(0)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := migSpec(api.Pool{Name: "web", Role: api.RoleWorker, Backing: api.BackingMIG,
		Groups: []api.InstanceGroup{{Zone: "europe-west1-b", Name: "web-b"}, {Zone: "europe-west1-c", Name: "web-c"}}})
	spec.Cloud = &api.CloudSpec{Provider: phases.CloudGCE, Project: srv.Project()}
	put(t, cl, "/v1/clusters/cloudy", spec)
	reg := getCluster(t, cl, "cloudy").Spec
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runAgents(cctx, tc, "cloudy", bareMetalNodes(reg))
	startFleet(cctx, tc, "cloudy", prov, "1.33.6")
	waitAgents(t, tc, "cloudy", 3)
	_, err = cl.Do(cctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	waitUpgrade(cctx, t, tc, "upgrade done", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeDone })

	var changes []string
	for _, line := range srv.Log() {
		method, rest, _ := strings.Cut(line, " ")
		path, _, _ := strings.Cut(rest, " ")
		read := method == "GET" || strings.HasSuffix(path, "/wait") || strings.HasSuffix(path, "/listManagedInstances")
		if !read {
			changes = append(changes, line)
		}
	}
	got := strings.Join(changes, "\n") + "\n"
	path := filepath.Join("testdata", "gce-surge-two-zones.golden")
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "the changes the Compute API saw for a surge upgrade of two zones")
}
