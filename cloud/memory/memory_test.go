package memory_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/cloud/memory"
)

// harness runs the contract against a fresh Cloud per case.
type harness struct{ opts memory.Options }

func (h harness) New(t *testing.T) cloudtest.Backend {
	opts := h.opts
	opts.Templates = []string{"base"}
	return backend{memory.New(opts)}
}

type backend struct{ c *memory.Cloud }

// Provider returns the Cloud itself: it keeps no state outside the
// backend, so a new leader's value would be indistinguishable.
func (b backend) Provider(*testing.T) cloud.Provider             { return b.c }
func (b backend) Zone() string                                   { return "zone-a" }
func (b backend) BaseTemplate() string                           { return "base" }
func (b backend) FinishCreating(*testing.T)                      { b.c.Advance() }
func (b backend) SetQuota(_ *testing.T, zone string, limit int)  { b.c.SetQuota(zone, limit) }
func (b backend) SetStockout(_ *testing.T, zone string, on bool) { b.c.SetStockout(zone, on) }
func (b backend) TimeoutNext(*testing.T)                         { b.c.TimeoutNext() }

func TestContract(t *testing.T) {
	cloudtest.Run(t, harness{})
}

// With SyncQuota the quota case takes the contract's other branch: the
// call is refused and creates nothing.
func TestContractSyncQuota(t *testing.T) {
	cloudtest.Run(t, harness{opts: memory.Options{SyncQuota: true}})
}

// ListsToRun runs instances from ListInstances alone; Advance is not
// needed.
func TestContractListsToRun(t *testing.T) {
	cloudtest.Run(t, listsHarness{})
}

type listsHarness struct{}

func (listsHarness) New(t *testing.T) cloudtest.Backend {
	return listsBackend{backend{memory.New(memory.Options{Templates: []string{"base"}, ListsToRun: 1})}}
}

// listsBackend lets instances finish by listing every group once.
type listsBackend struct{ backend }

func (b listsBackend) FinishCreating(t *testing.T) {
	for _, c := range b.c.Calls() {
		if c.Group.Name != "" {
			_, _ = b.c.ListInstances(context.Background(), c.Group)
		}
	}
}

var ctx = context.Background()

func newGroup(t *testing.T, c *memory.Cloud, size int) cloud.GroupRef {
	t.Helper()
	g := cloud.GroupRef{Zone: "z", Name: "pool"}
	tmpl, err := c.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "1.34.4"}, "t")
	require.NoError(t, err)
	require.NoError(t, c.CreateGroup(ctx, g, tmpl, size, "g"))
	return g
}

func statuses(t *testing.T, c *memory.Cloud, g cloud.GroupRef) map[string]cloud.InstanceStatus {
	t.Helper()
	ins, err := c.ListInstances(ctx, g)
	require.NoError(t, err)
	out := map[string]cloud.InstanceStatus{}
	for _, in := range ins {
		out[in.Name] = in.Status
	}
	return out
}

func TestInstancesRunOnAdvance(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 2)
	want := map[string]cloud.InstanceStatus{"pool-0001": cloud.StatusCreating, "pool-0002": cloud.StatusCreating}
	assert.Equal(t, want, statuses(t, c, g))
	assert.Equal(t, want, statuses(t, c, g), "listing does not advance without ListsToRun")
	c.Advance()
	assert.Equal(t, map[string]cloud.InstanceStatus{"pool-0001": cloud.StatusRunning, "pool-0002": cloud.StatusRunning}, statuses(t, c, g))
}

func TestListsToRun(t *testing.T) {
	c := memory.New(memory.Options{ListsToRun: 2})
	g := newGroup(t, c, 1)
	assert.Equal(t, cloud.StatusCreating, statuses(t, c, g)["pool-0001"], "first list")
	assert.Equal(t, cloud.StatusRunning, statuses(t, c, g)["pool-0001"], "second list")
}

func TestQuotaFreedRunsWaitingInstance(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 1)
	c.Advance()
	c.SetQuota("z", 1)
	require.NoError(t, c.CreateInstances(ctx, g, []string{"b", "a"}, "surge"))
	c.Advance()
	ins, err := c.ListInstances(ctx, g)
	require.NoError(t, err)
	require.Len(t, ins, 3)
	for _, in := range ins[:2] {
		assert.Equal(t, cloud.StatusCreating, in.Status)
		assert.ErrorIs(t, in.LastError, cloud.ErrQuota)
	}
	require.NoError(t, c.DeleteInstances(ctx, g, []string{"pool-0001"}, "delete-old"))
	c.Advance()
	assert.Equal(t, map[string]cloud.InstanceStatus{"a": cloud.StatusRunning, "b": cloud.StatusCreating}, statuses(t, c, g), "the freed quota goes to the first name")
	q, err := c.Quota(ctx, "z")
	require.NoError(t, err)
	assert.Equal(t, cloud.Quota{Limit: 1, Usage: 1}, q)
}

func TestStockoutOnRecreate(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 1)
	c.Advance()
	c.SetStockout("z", true)
	require.NoError(t, c.RecreateInstances(ctx, g, []string{"pool-0001"}, "recreate"))
	c.Advance()
	ins, err := c.ListInstances(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusRecreating, ins[0].Status)
	assert.ErrorIs(t, ins[0].LastError, cloud.ErrStockout)
	c.SetStockout("z", false)
	c.Advance()
	assert.Equal(t, cloud.StatusRunning, statuses(t, c, g)["pool-0001"])
}

func TestFailNext(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 0)
	c.FailNext(2)
	_, err := c.GetGroup(ctx, g)
	assert.ErrorIs(t, err, cloud.ErrTransient)
	assert.ErrorIs(t, c.Resize(ctx, g, 2, "r"), cloud.ErrTransient)
	grp, err := c.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 0, grp.TargetSize, "a failed call changes nothing")
	require.NoError(t, c.Resize(ctx, g, 2, "r"), "nor does it use up the request ID")
	grp, err = c.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 2, grp.TargetSize)
}

func TestRepeatsAreRecorded(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 0)
	require.NoError(t, c.CreateInstances(ctx, g, []string{"a"}, "surge"))
	require.NoError(t, c.DeleteInstances(ctx, g, []string{"a"}, "delete"))
	require.NoError(t, c.CreateInstances(ctx, g, []string{"a"}, "surge"))
	assert.Empty(t, statuses(t, c, g), "the repeated create did not bring a back")
	assert.Equal(t, 1, c.Repeats("CreateInstances"))
	calls := c.Calls()
	last := calls[len(calls)-2]
	assert.Equal(t, memory.Call{Method: "CreateInstances", Group: g, Args: "names=[a]", Req: "surge", Repeat: true}, last)
	assert.ErrorIs(t, c.Resize(ctx, g, 1, ""), cloud.ErrInvalid, "a mutating call needs a req")
}

func TestStop(t *testing.T) {
	c := memory.New(memory.Options{})
	g := newGroup(t, c, 1)
	c.Advance()
	require.NoError(t, c.Stop(g, "pool-0001"))
	assert.Equal(t, cloud.StatusStopped, statuses(t, c, g)["pool-0001"])
	grp, err := c.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.True(t, grp.Stable, "a stopped instance is not an action in progress")
	require.NoError(t, c.RecreateInstances(ctx, g, []string{"pool-0001"}, "recreate"))
	c.Advance()
	assert.Equal(t, cloud.StatusRunning, statuses(t, c, g)["pool-0001"])
}

func TestConcurrentUse(t *testing.T) {
	c := memory.New(memory.Options{ListsToRun: 1})
	g := newGroup(t, c, 0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := string(rune('a' + i))
			assert.NoError(t, c.CreateInstances(ctx, g, []string{name}, "create-"+name))
			_, err := c.ListInstances(ctx, g)
			assert.NoError(t, err)
			c.Advance()
		}()
	}
	wg.Wait()
	grp, err := c.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 8, grp.TargetSize)
	assert.True(t, grp.Stable)
}

// AfterCall runs after the change, outside the lock; a caller whose
// context ended meanwhile gets its error, the change made.
func TestAfterCall(t *testing.T) {
	c := memory.New(memory.Options{})
	var seen []string
	cctx, cancel := context.WithCancel(ctx)
	g := cloud.GroupRef{Zone: "z", Name: "pool"}
	c.AfterCall(func(_ context.Context, call memory.Call) {
		seen = append(seen, call.Method)
		if call.Method == "CreateGroup" {
			_, err := c.GetGroup(context.Background(), g) // the lock is free, the group made
			assert.NoError(t, err)
			cancel()
		}
	})
	tmpl, err := c.EnsureTemplate(cctx, cloud.TemplateSpec{Release: "1.34.4"}, "t")
	require.NoError(t, err)
	require.ErrorIs(t, c.CreateGroup(cctx, g, tmpl, 1, "g"), context.Canceled)
	c.AfterCall(nil)
	_, err = c.GetGroup(ctx, g)
	require.NoError(t, err, "the change was made")
	assert.Equal(t, []string{"EnsureTemplate", "CreateGroup", "GetGroup"}, seen)
}
