package lab

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/cloud/labcloud"
)

// fakeMachines stands in for the hosts: the book's tests need no root.
// A real host is what lab_groups_lab_test.go boots.
type fakeMachines struct {
	mu sync.Mutex
	up map[string]machine
	// log records start/stop/stop-keep-node per instance, in order.
	log []string
	// failStarts makes the next n starts of an instance fail.
	failStarts map[string]int
	// hold, when set, makes starts wait until it is closed; each start
	// that waits says so on entered first.
	hold    chan struct{}
	entered chan string
}

func newFakeMachines() *fakeMachines {
	return &fakeMachines{up: map[string]machine{}, failStarts: map[string]int{}}
}

func (f *fakeMachines) checkRelease(_ context.Context, release string) error {
	if release == "0.0.0" {
		return fmt.Errorf("lab: release %s: no build: %w", release, cloud.ErrInvalid)
	}
	return nil
}

func (f *fakeMachines) start(ctx context.Context, m machine) error {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		f.entered <- m.Name
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "start "+m.Name+" "+m.Release+" "+m.IP)
	if f.failStarts[m.Name] > 0 {
		f.failStarts[m.Name]--
		return fmt.Errorf("%w: injected boot failure of %s", ErrHost, m.Name)
	}
	f.up[m.Name] = m
	return nil
}

func (f *fakeMachines) stop(_ context.Context, m machine, keepNode bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := "stop "
	if keepNode {
		what = "stop-keep-node "
	}
	f.log = append(f.log, what+m.Name)
	delete(f.up, m.Name)
	return nil
}

func (f *fakeMachines) running(m machine) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.up[m.Name]
	return ok
}

func (f *fakeMachines) hosts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.up {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (f *fakeMachines) events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func openGroups(t *testing.T, m machines, path string) *Groups {
	t.Helper()
	g, err := newGroups(GroupsConfig{Parallel: 3}, m, path, []string{"worker-1"}, nil)
	require.NoError(t, err)
	t.Cleanup(g.Close)
	return g
}

// groupsHarness runs the contract against the book over fake hosts,
// through the HTTP transport the coordinator members use.
type groupsHarness struct{}

func (groupsHarness) New(t *testing.T) cloudtest.Backend {
	m := newFakeMachines()
	g := openGroups(t, m, filepath.Join(t.TempDir(), "groups.json"))
	srv := httptest.NewServer(labcloud.Handler(g))
	t.Cleanup(srv.Close)
	base, err := g.EnsureTemplate(context.Background(), cloud.TemplateSpec{Release: "1.33.13"}, "harness/base")
	require.NoError(t, err)
	t.Cleanup(func() {
		// Whatever a case left, every instance's host goes with it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, in := range g.Instances() {
			ref := groupOfProviderID(t, in.ProviderID)
			require.NoError(t, g.DeleteGroup(ctx, ref, "harness/cleanup"))
		}
		assert.Empty(t, m.hosts(), "hosts left after every group was deleted")
	})
	return &groupsBackend{g: g, url: srv.URL, base: base}
}

func groupOfProviderID(t *testing.T, id string) cloud.GroupRef {
	rest, ok := strings.CutPrefix(id, ProviderIDScheme)
	require.True(t, ok, id)
	parts := strings.SplitN(rest, "/", 3)
	require.Len(t, parts, 3, id)
	return cloud.GroupRef{Zone: parts[0], Name: parts[1]}
}

type groupsBackend struct {
	g    *Groups
	url  string
	base string
}

func (b *groupsBackend) Provider(t *testing.T) cloud.Provider {
	p, err := labcloud.New(labcloud.Config{Endpoint: b.url})
	require.NoError(t, err)
	return p
}
func (b *groupsBackend) Zone() string         { return "zone-a" }
func (b *groupsBackend) BaseTemplate() string { return b.base }
func (b *groupsBackend) FinishCreating(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.g.Settle(ctx))
}
func (b *groupsBackend) SetQuota(_ *testing.T, zone string, limit int)  { b.g.SetQuota(zone, limit) }
func (b *groupsBackend) SetStockout(_ *testing.T, zone string, on bool) { b.g.SetStockout(zone, on) }
func (b *groupsBackend) TimeoutNext(*testing.T)                         { b.g.TimeoutNext() }

func TestGroupsContract(t *testing.T) {
	cloudtest.Run(t, groupsHarness{})
}

var bg = context.Background()

func settle(t *testing.T, g *Groups) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, g.Settle(ctx))
}

// A group at a release boots one host per instance at that release, at
// addresses from 10.77.0.100 up, with provider IDs naming zone, group and
// instance; a recreate boots a new host under the same name, address and
// provider ID and keeps the Node; a delete removes the host and its Node.
func TestGroupsHosts(t *testing.T) {
	m := newFakeMachines()
	g := openGroups(t, m, "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t1")
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "mig-a"}
	require.NoError(t, g.CreateGroup(bg, ref, tmpl, 2, "create"))
	settle(t, g)
	ins, err := g.ListInstances(bg, ref)
	require.NoError(t, err)
	require.Len(t, ins, 2)
	assert.Equal(t, "mig-a-1", ins[0].Name)
	assert.Equal(t, "molt-lab://zone-a/mig-a/mig-a-1", ins[0].ProviderID)
	assert.Equal(t, []string{"mig-a-1", "mig-a-2"}, m.hosts())
	assert.ElementsMatch(t, []string{"start mig-a-1 1.34.3 10.77.0.100", "start mig-a-2 1.34.3 10.77.0.101"}, m.events())

	v2, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.4", Base: tmpl}, "t2")
	require.NoError(t, err)
	require.NoError(t, g.SetTemplate(bg, ref, v2, "set"))
	require.NoError(t, g.RecreateInstances(bg, ref, []string{"mig-a-1"}, "recreate"))
	settle(t, g)
	ins2, err := g.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, ins[0].ProviderID, ins2[0].ProviderID)
	assert.Equal(t, v2, ins2[0].Template)
	assert.Equal(t, cloud.StatusRunning, ins2[0].Status)
	assert.Equal(t, []string{"stop-keep-node mig-a-1", "start mig-a-1 1.34.4 10.77.0.100"}, m.events()[2:])

	require.NoError(t, g.DeleteInstances(bg, ref, []string{"mig-a-2"}, "delete"))
	settle(t, g)
	assert.Equal(t, "stop mig-a-2", m.events()[4])
	assert.Equal(t, []string{"mig-a-1"}, m.hosts())
	// The address is free again.
	require.NoError(t, g.CreateInstances(bg, ref, []string{"mig-a-x"}, "surge"))
	settle(t, g)
	assert.Equal(t, "start mig-a-x 1.34.4 10.77.0.101", m.events()[5])

	require.NoError(t, g.DeleteGroup(bg, ref, "delete-group"))
	assert.Empty(t, m.hosts(), "DeleteGroup returns once the hosts are gone")
	assert.Empty(t, g.Instances())
}

// Names are hostnames and Node names: unique in the lab.
func TestGroupsNames(t *testing.T) {
	g := openGroups(t, newFakeMachines(), "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	a := cloud.GroupRef{Zone: "zone-a", Name: "mig"}
	b := cloud.GroupRef{Zone: "zone-b", Name: "mig"}
	require.NoError(t, g.CreateGroup(bg, a, tmpl, 1, "a"))
	require.NoError(t, g.CreateGroup(bg, b, tmpl, 1, "b"))
	ia, err := g.ListInstances(bg, a)
	require.NoError(t, err)
	ib, err := g.ListInstances(bg, b)
	require.NoError(t, err)
	assert.Equal(t, "mig-1", ia[0].Name)
	assert.Equal(t, "mig-2", ib[0].Name, "a name the other zone's group took is skipped")

	err = g.CreateInstances(bg, b, []string{"mig-1"}, "steal")
	assert.ErrorIs(t, err, cloud.ErrConflict)
	err = g.CreateInstances(bg, a, []string{"worker-1"}, "topology")
	assert.ErrorIs(t, err, cloud.ErrConflict)
	assert.Contains(t, err.Error(), "topology")

	_, err = g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "0.0.0"}, "unknown")
	assert.ErrorIs(t, err, cloud.ErrInvalid, "a release the lab cannot boot")
	assert.ErrorIs(t, g.CreateGroup(bg, cloud.GroupRef{Zone: "Zone A", Name: "x"}, tmpl, 1, "zone"), cloud.ErrInvalid)
	assert.ErrorIs(t, g.Resize(bg, a, 1, ""), cloud.ErrInvalid, "a mutating call needs a request ID")
	settle(t, g)
}

// The lab has 151 instance addresses; asking for more is a quota error
// that creates nothing.
func TestGroupsAddressesRunOut(t *testing.T) {
	g := openGroups(t, newFakeMachines(), "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "big"}
	require.NoError(t, g.CreateGroup(bg, ref, tmpl, 150, "create"))
	err = g.Resize(bg, ref, 152, "resize")
	assert.ErrorIs(t, err, cloud.ErrQuota)
	assert.Contains(t, err.Error(), "addresses")
	grp, err := g.GetGroup(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, 150, grp.TargetSize)
	require.NoError(t, g.Resize(bg, ref, 151, "resize-151"))
	require.NoError(t, g.DeleteGroup(bg, ref, "delete"))
}

// A host that fails to boot is tried bootAttempts times, then the instance
// is STOPPED with the error; nothing of the failed hosts stays.
func TestGroupsBootFailure(t *testing.T) {
	m := newFakeMachines()
	m.failStarts["flaky-1"] = 1
	m.failStarts["broken-1"] = bootAttempts
	old := retryPause
	retryPause = time.Millisecond
	t.Cleanup(func() { retryPause = old })
	g := openGroups(t, m, "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	flaky := cloud.GroupRef{Zone: "zone-a", Name: "flaky"}
	broken := cloud.GroupRef{Zone: "zone-a", Name: "broken"}
	require.NoError(t, g.CreateGroup(bg, flaky, tmpl, 1, "a"))
	require.NoError(t, g.CreateGroup(bg, broken, tmpl, 1, "b"))
	settle(t, g)
	fi, err := g.ListInstances(bg, flaky)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusRunning, fi[0].Status, "a second boot worked")
	bi, err := g.ListInstances(bg, broken)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusStopped, bi[0].Status)
	require.Error(t, bi[0].LastError)
	assert.Contains(t, bi[0].LastError.Error(), "injected boot failure")
	assert.False(t, cloud.Retryable(bi[0].LastError))
	assert.Equal(t, []string{"flaky-1"}, m.hosts())
	// The caller recreates (or deletes) a stopped instance.
	require.NoError(t, g.RecreateInstances(bg, broken, []string{"broken-1"}, "again"))
	settle(t, g)
	bi, err = g.ListInstances(bg, broken)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusRunning, bi[0].Status)
	assert.NoError(t, bi[0].LastError)
}

// A delete while the host boots waits for the boot, then removes it.
func TestGroupsDeleteWhileBooting(t *testing.T) {
	m := newFakeMachines()
	m.hold, m.entered = make(chan struct{}), make(chan string, 1)
	g := openGroups(t, m, "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "slow"}
	require.NoError(t, g.CreateGroup(bg, ref, tmpl, 1, "create"))
	require.Equal(t, "slow-1", <-m.entered, "the host is booting")
	require.NoError(t, g.DeleteInstances(bg, ref, []string{"slow-1"}, "delete"))
	ins, err := g.ListInstances(bg, ref)
	require.NoError(t, err)
	require.Len(t, ins, 1)
	assert.Equal(t, cloud.StatusDeleting, ins[0].Status)
	grp, err := g.GetGroup(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, 0, grp.TargetSize)
	assert.False(t, grp.Stable)
	close(m.hold)
	settle(t, g)
	ins, err = g.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.Empty(t, ins)
	assert.Empty(t, m.hosts())
	assert.Equal(t, []string{"start slow-1 1.34.3 10.77.0.100", "stop slow-1"}, m.events())
}

// The book survives its keeper: a new one (the lab driver started again)
// keeps the hosts that run, remembers the requests carried out, and marks
// an instance whose host was lost STOPPED.
func TestGroupsBookSurvivesRestart(t *testing.T) {
	m := newFakeMachines()
	path := filepath.Join(t.TempDir(), "groups.json")
	g, err := newGroups(GroupsConfig{}, m, path, nil, nil)
	require.NoError(t, err)
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "keep"}
	require.NoError(t, g.CreateGroup(bg, ref, tmpl, 2, "create"))
	require.NoError(t, g.SetAutoscaling(bg, ref, cloud.Autoscaling{Min: 2, Max: 2}, "pin"))
	settle(t, g)
	require.NoError(t, g.CreateInstances(bg, ref, []string{"keep-x"}, "surge"))
	settle(t, g)
	require.NoError(t, g.DeleteInstances(bg, ref, []string{"keep-x"}, "delete-x"))
	settle(t, g)
	before, err := g.ListInstances(bg, ref)
	require.NoError(t, err)
	g.Close()

	// keep-2's host is lost while no keeper runs.
	m.mu.Lock()
	delete(m.up, "keep-2")
	m.mu.Unlock()
	g2 := openGroups(t, m, path)
	grp, err := g2.GetGroup(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, cloud.Group{GroupRef: ref, TargetSize: 2, Template: tmpl, Stable: true, Autoscaling: cloud.Autoscaling{Min: 2, Max: 2}}, grp)
	after, err := g2.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, before[0], after[0])
	assert.Equal(t, cloud.StatusStopped, after[1].Status)
	require.Error(t, after[1].LastError)
	// The surge replayed by a new leader creates nothing again.
	require.NoError(t, g2.CreateInstances(bg, ref, []string{"keep-x"}, "surge"))
	after2, err := g2.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.Len(t, after2, 2)
	assert.Equal(t, []string{"keep-1"}, m.hosts())
}

// Quota and stockout wait, then run: a stockout's instance boots when it
// ends.
func TestGroupsStockoutEnds(t *testing.T) {
	m := newFakeMachines()
	g := openGroups(t, m, "")
	tmpl, err := g.EnsureTemplate(bg, cloud.TemplateSpec{Release: "1.34.3"}, "t")
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "out"}
	require.NoError(t, g.CreateGroup(bg, ref, tmpl, 0, "create"))
	g.SetStockout("zone-a", true)
	require.NoError(t, g.CreateInstances(bg, ref, []string{"out-a"}, "surge"))
	settle(t, g)
	ins, err := g.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.ErrorIs(t, ins[0].LastError, cloud.ErrStockout)
	assert.Empty(t, m.hosts())
	q, err := g.Quota(bg, "zone-a")
	require.NoError(t, err)
	assert.Equal(t, 0, q.Usage, "an instance waiting for capacity holds no quota")
	g.SetStockout("zone-a", false)
	settle(t, g)
	ins, err = g.ListInstances(bg, ref)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusRunning, ins[0].Status)
	assert.NoError(t, ins[0].LastError)
	assert.Equal(t, []string{"out-a"}, m.hosts())
}
