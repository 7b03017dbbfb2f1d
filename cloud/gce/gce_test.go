package gce_test

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/cloud/gce"
	"github.com/moltproject/molt/cloud/gce/gcefake"
	"github.com/moltproject/molt/internal/clock"
)

// Every test that talks to the fake compares the fake's request log with
// testdata/<test name>.golden; -update rewrites them.
var update = flag.Bool("update", false, "rewrite testdata/**/*.golden from the fake's request logs")

const (
	zone   = "us-central1-a"
	region = "us-central1"
	base   = "molt-base"
)

var ctx = context.Background()

// newServer starts a fake with the base template and checks its request
// log against the test's golden file at the end of a test that passed.
func newServer(t *testing.T) *gcefake.Server {
	t.Helper()
	srv := gcefake.New(gcefake.Config{})
	t.Cleanup(srv.Close)
	srv.AddTemplate(base, baseProperties())
	t.Cleanup(func() {
		if !t.Failed() {
			golden(t, srv.Log())
		}
	})
	return srv
}

func baseProperties() *compute.InstanceProperties {
	script := "#!/bin/sh\nexec /opt/molt/bootstrap\n"
	return &compute.InstanceProperties{
		MachineType: "e2-standard-4",
		Disks: []*compute.AttachedDisk{{
			Boot: true, AutoDelete: true,
			InitializeParams: &compute.AttachedDiskInitializeParams{SourceImage: "projects/debian-cloud/global/images/family/debian-12", DiskSizeGb: 50},
		}},
		NetworkInterfaces: []*compute.NetworkInterface{{Network: "global/networks/default"}},
		Metadata:          &compute.Metadata{Items: []*compute.MetadataItems{{Key: "startup-script", Value: &script}}},
	}
}

func newProvider(t *testing.T, srv *gcefake.Server) *gce.Provider {
	t.Helper()
	p, err := gce.New(ctx, gce.Config{
		Project:          srv.Project(),
		Endpoint:         srv.URL(),
		ClientOptions:    []option.ClientOption{option.WithoutAuthentication()},
		OperationTimeout: 10 * time.Second,
		PollInterval:     time.Second,
		Clock:            clock.NewInstant(time.Time{}),
	})
	require.NoError(t, err)
	return p
}

func golden(t *testing.T, log []string) {
	t.Helper()
	path := filepath.Join("testdata", filepath.FromSlash(t.Name())+".golden")
	got := strings.Join(log, "\n") + "\n"
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file; run go test ./cloud/gce -update")
	assert.Equal(t, string(want), got, "request log differs from %s (go test ./cloud/gce -update rewrites it)", path)
}

// harness runs the contract against the adapter over a fresh fake per
// case.
type harness struct{}

func (harness) New(t *testing.T) cloudtest.Backend { return backend{newServer(t)} }

type backend struct{ srv *gcefake.Server }

func (b backend) Provider(t *testing.T) cloud.Provider { return newProvider(t, b.srv) }
func (b backend) Zone() string                         { return zone }
func (b backend) BaseTemplate() string                 { return base }
func (b backend) FinishCreating(*testing.T)            { b.srv.Settle() }
func (b backend) SetQuota(_ *testing.T, z string, limit int) {
	b.srv.SetQuota(z[:strings.LastIndex(z, "-")], limit)
}
func (b backend) SetStockout(_ *testing.T, z string, on bool) { b.srv.SetStockout(z, on) }
func (b backend) TimeoutNext(*testing.T)                      { b.srv.HoldNextOperation() }

func TestContract(t *testing.T) {
	cloudtest.Run(t, harness{})
}

// group creates a group of size running instances.
func group(t *testing.T, srv *gcefake.Server, p *gce.Provider, name string, size int) cloud.GroupRef {
	t.Helper()
	g := cloud.GroupRef{Zone: zone, Name: name}
	tmpl, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4", Base: base}, "setup/template")
	require.NoError(t, err)
	require.NoError(t, p.CreateGroup(ctx, g, tmpl, size, "setup/group"))
	srv.Settle()
	return g
}

func TestEnsureTemplateCopiesBase(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	name, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4", Base: base}, "u1/template")
	require.NoError(t, err)
	got := srv.Template(name)
	require.NotNil(t, got)
	want := baseProperties()
	release := "1.34.4"
	want.Metadata.Items = append(want.Metadata.Items, &compute.MetadataItems{Key: gce.MetadataRelease, Value: &release})
	assert.Equal(t, want, got.Properties, "the base's properties and the release's metadata")
	assert.Contains(t, got.Description, "1.34.4")

	// A template made from one that names a release names the new one only.
	next, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.35.1", Base: name}, "u2/template")
	require.NoError(t, err)
	var releases []string
	for _, it := range srv.Template(next).Properties.Metadata.Items {
		if it.Key == gce.MetadataRelease {
			releases = append(releases, *it.Value)
		}
	}
	assert.Equal(t, []string{"1.35.1"}, releases)

	_, err = p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4"}, "u3/template")
	assert.ErrorIs(t, err, cloud.ErrInvalid, "GCE templates copy a base")
}

func TestCreateGroupIsOpportunisticAndNeverRepairs(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 1)

	// A group made by someone else, with GCE's defaults (PROACTIVE,
	// REPAIR), is patched before its template changes.
	svc, err := compute.NewService(ctx, option.WithEndpoint(srv.URL()+"/"), option.WithoutAuthentication())
	require.NoError(t, err)
	tmpl, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.35.1", Base: base}, "setup/template-2")
	require.NoError(t, err)
	_, err = svc.InstanceGroupManagers.Insert(srv.Project(), zone, &compute.InstanceGroupManager{
		Name: "theirs", BaseInstanceName: "theirs", InstanceTemplate: "global/instanceTemplates/" + base, TargetSize: 1,
	}).Do()
	require.NoError(t, err)
	srv.Settle()
	theirs := cloud.GroupRef{Zone: zone, Name: "theirs"}
	require.NoError(t, p.SetTemplate(ctx, theirs, tmpl, "u1/set-template"))
	require.NoError(t, p.SetTemplate(ctx, g, tmpl, "u1/set-template"), "ours needs no patch; the same req on another group is another request")
	igm, err := svc.InstanceGroupManagers.Get(srv.Project(), zone, "theirs").Do()
	require.NoError(t, err)
	assert.Equal(t, "OPPORTUNISTIC", igm.UpdatePolicy.Type)
	assert.Equal(t, "DO_NOTHING", igm.InstanceLifecyclePolicy.DefaultActionOnFailure)
	for _, ref := range []cloud.GroupRef{g, theirs} {
		ins, err := p.ListInstances(ctx, ref)
		require.NoError(t, err)
		require.Len(t, ins, 1)
		assert.Equal(t, cloud.StatusRunning, ins[0].Status, "no instance is replaced")
		assert.NotEqual(t, tmpl, ins[0].Template)
		grp, err := p.GetGroup(ctx, ref)
		require.NoError(t, err)
		assert.Equal(t, tmpl, grp.Template, "group %s", ref)
	}
}

func TestListInstances(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 0)
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-a-b", "pool-a-a"}, "u1/surge"))
	tmpl := cloud.TemplateName(cloud.TemplateSpec{Release: "1.34.4", Base: base})

	var seen [][]cloud.InstanceStatus
	for range 3 {
		ins, err := p.ListInstances(ctx, g)
		require.NoError(t, err)
		require.Len(t, ins, 2)
		assert.Equal(t, "pool-a-a", ins[0].Name, "sorted by name")
		assert.Equal(t, "gce://molt-test/us-central1-a/pool-a-a", ins[0].ProviderID)
		assert.Equal(t, tmpl, ins[0].Template)
		seen = append(seen, []cloud.InstanceStatus{ins[0].Status, ins[1].Status})
	}
	// The fake's InstancePolls is 2: two listings see them creating.
	assert.Equal(t, [][]cloud.InstanceStatus{
		{cloud.StatusCreating, cloud.StatusCreating},
		{cloud.StatusCreating, cloud.StatusCreating},
		{cloud.StatusRunning, cloud.StatusRunning},
	}, seen)
	grp, err := p.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, cloud.Group{GroupRef: g, TargetSize: 2, Template: tmpl, Stable: true}, grp)
}

func TestStockoutAndQuotaInLastAttempt(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 1)

	srv.SetStockout(zone, true)
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-a-s"}, "u1/surge"))
	ins, err := p.ListInstances(ctx, g)
	require.NoError(t, err)
	require.Len(t, ins, 2)
	s := ins[1]
	assert.Equal(t, cloud.StatusCreating, s.Status)
	assert.ErrorIs(t, s.LastError, cloud.ErrStockout)
	var e *gce.Error
	require.ErrorAs(t, s.LastError, &e)
	assert.Equal(t, "ZONE_RESOURCE_POOL_EXHAUSTED", e.Code)
	require.NoError(t, p.DeleteInstances(ctx, g, []string{"pool-a-s"}, "u1/give-up"))
	srv.SetStockout(zone, false)

	srv.SetQuota(region, 1)
	require.NoError(t, p.CreateInstances(ctx, g, []string{"pool-a-q"}, "u1/surge-2"))
	ins, err = p.ListInstances(ctx, g)
	require.NoError(t, err)
	require.Len(t, ins, 2)
	q := ins[1]
	assert.Equal(t, cloud.StatusCreating, q.Status)
	assert.ErrorIs(t, q.LastError, cloud.ErrQuota)
	assert.Contains(t, q.LastError.Error(), "QUOTA_EXCEEDED")

	quota, err := p.Quota(ctx, zone)
	require.NoError(t, err)
	assert.Equal(t, cloud.Quota{Limit: 1, Usage: 1}, quota, "the INSTANCES quota of the region")
	_, err = p.Quota(ctx, "nozone")
	assert.ErrorIs(t, err, cloud.ErrInvalid)
}

func TestSynchronousErrors(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 0)
	cases := []struct {
		status int
		reason string
		want   error
	}{
		{http.StatusForbidden, "quotaExceeded", cloud.ErrQuota},
		{http.StatusForbidden, "rateLimitExceeded", cloud.ErrTransient},
		{http.StatusForbidden, "userRateLimitExceeded", cloud.ErrTransient},
		{http.StatusTooManyRequests, "rateLimitExceeded", cloud.ErrTransient},
		{http.StatusServiceUnavailable, "backendError", cloud.ErrTransient},
		{http.StatusInternalServerError, "", cloud.ErrTransient},
		{http.StatusConflict, "alreadyExists", cloud.ErrConflict},
		{http.StatusPreconditionFailed, "conditionNotMet", cloud.ErrConflict},
		{http.StatusBadRequest, "invalid", cloud.ErrInvalid},
		{http.StatusNotFound, "notFound", cloud.ErrNotFound},
		{http.StatusForbidden, "forbidden", nil},
	}
	for _, c := range cases {
		srv.FailNext("resize", c.status, c.reason)
		err := p.Resize(ctx, g, 1, "u1/resize")
		require.Error(t, err, "%d %s", c.status, c.reason)
		var e *gce.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, c.status, e.Status)
		if c.want == nil {
			assert.False(t, cloud.Retryable(err), "%d %s: a permission error is not waited out", c.status, c.reason)
			assert.Nil(t, e.Kind)
			continue
		}
		assert.ErrorIs(t, err, c.want, "%d %s", c.status, c.reason)
	}
	// A refused request used up nothing: its retry goes through.
	require.NoError(t, p.Resize(ctx, g, 1, "u1/resize"))
	grp, err := p.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 1, grp.TargetSize)
}

func TestOperationErrors(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 0)
	cases := []struct {
		status int
		code   string
		want   error
	}{
		{http.StatusForbidden, "QUOTA_EXCEEDED", cloud.ErrQuota},
		{http.StatusServiceUnavailable, "ZONE_RESOURCE_POOL_EXHAUSTED", cloud.ErrStockout},
		{http.StatusServiceUnavailable, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", cloud.ErrStockout},
		{http.StatusNotFound, "RESOURCE_NOT_FOUND", cloud.ErrNotFound},
		{http.StatusBadRequest, "CONDITION_NOT_MET", cloud.ErrConflict},
		{http.StatusInternalServerError, "SOMETHING_NEW", cloud.ErrTransient},
	}
	for i, c := range cases {
		srv.FailNextOperation("resize", c.status, c.code, "injected "+c.code)
		req := "u1/resize/" + string(rune('a'+i))
		err := p.Resize(ctx, g, 2, req)
		assert.ErrorIs(t, err, c.want, c.code)
		var e *gce.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, c.code, e.Code)
		grp, gerr := p.GetGroup(ctx, g)
		require.NoError(t, gerr)
		assert.Equal(t, 0, grp.TargetSize, "%s: a failed operation changed nothing", c.code)
		// GCE keeps the failed operation under its request ID.
		assert.ErrorIs(t, p.Resize(ctx, g, 2, req), c.want, "%s: repeated with the same req", c.code)
	}
	require.NoError(t, p.Resize(ctx, g, 2, "u1/resize/next-attempt"), "a new req tries again")
}

func TestOperationTimeoutThenRetry(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 1)

	srv.HoldNextOperation()
	start := time.Now()
	err := p.Resize(ctx, g, 3, "u1/resize")
	assert.Less(t, time.Since(start), 5*time.Second, "the deadline runs on the injected clock")
	require.ErrorIs(t, err, cloud.ErrTransient)
	assert.Contains(t, err.Error(), "still RUNNING after 10s")
	require.NoError(t, p.Resize(ctx, g, 3, "u1/resize"), "the retry gets the same operation, which has finished")
	srv.Settle()
	ins, err := p.ListInstances(ctx, g)
	require.NoError(t, err)
	assert.Len(t, ins, 3, "resized once")
}

func TestDeleteGroupDeletesItsAutoscalerFirst(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 2)
	require.NoError(t, p.SetAutoscaling(ctx, g, cloud.Autoscaling{Min: 1, Max: 3}, "u1/limits"))
	require.NoError(t, p.DeleteGroup(ctx, g, "u1/delete"))
	_, err := p.GetGroup(ctx, g)
	assert.ErrorIs(t, err, cloud.ErrNotFound)
}

func TestUnreachableIsTransient(t *testing.T) {
	srv := gcefake.New(gcefake.Config{})
	p := newProvider(t, srv)
	srv.Close()
	_, err := p.GetGroup(ctx, cloud.GroupRef{Zone: zone, Name: "pool-a"})
	assert.ErrorIs(t, err, cloud.ErrTransient)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p.GetGroup(cctx, cloud.GroupRef{Zone: zone, Name: "pool-a"})
	assert.ErrorIs(t, err, context.Canceled, "the caller's cancellation is not a provider error")
	assert.False(t, errors.Is(err, cloud.ErrTransient))
}

func TestPollFailures(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv)
	g := group(t, srv, p, "pool-a", 2)
	ins, err := p.ListInstances(ctx, g)
	require.NoError(t, err)

	// A poll that fails for a moment is polled again.
	srv.FailNext("/wait", http.StatusServiceUnavailable, "backendError")
	require.NoError(t, p.Resize(ctx, g, 3, "u1/resize"))

	// A poll that cannot find the operation says nothing about the
	// instances: not "not found" (which DeleteInstances would take for
	// success) but transient, and the retry finds the operation.
	srv.FailNext("/wait", http.StatusNotFound, "notFound")
	err = p.DeleteInstances(ctx, g, []string{ins[0].Name}, "u1/delete")
	require.ErrorIs(t, err, cloud.ErrTransient)
	assert.False(t, errors.Is(err, cloud.ErrNotFound))
	require.NoError(t, p.DeleteInstances(ctx, g, []string{ins[0].Name}, "u1/delete"))
	grp, err := p.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 2, grp.TargetSize)
}
