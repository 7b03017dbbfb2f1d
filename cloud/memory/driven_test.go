package memory_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/cloud/memory"
)

// asyncDriver makes every machine at once, each in a goroutine of its
// own, as a driver with real machines does in the background.
type asyncDriver struct {
	c  *memory.Cloud
	wg sync.WaitGroup
}

func (d *asyncDriver) CheckRelease(context.Context, string) error { return nil }

func (d *asyncDriver) Wake(name string) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		m, ok := d.c.Machine(name)
		switch {
		case !ok:
		case m.Want == memory.WantRunning:
			d.c.Running(name, m.Gen)
		case m.Want == memory.WantGone:
			d.c.Removed(name)
		}
	}()
}

// drivenHarness runs the contract against a driven Cloud.
type drivenHarness struct{}

func (drivenHarness) New(t *testing.T) cloudtest.Backend {
	d := &asyncDriver{}
	d.c = memory.New(memory.Options{Templates: []string{"base"}, SyncQuota: true, Driver: d})
	t.Cleanup(d.wg.Wait)
	return drivenBackend{backend{d.c}}
}

type drivenBackend struct{ backend }

func (b drivenBackend) FinishCreating(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.c.Settle(ctx))
}

func TestContractDriven(t *testing.T) {
	cloudtest.Run(t, drivenHarness{})
}

// manualDriver remembers what it was woken for; the test reports.
type manualDriver struct {
	mu    sync.Mutex
	woken []string
}

func (d *manualDriver) CheckRelease(_ context.Context, release string) error {
	if release == "0.0.0" {
		return errors.New("no build of 0.0.0: " + cloud.ErrInvalid.Error())
	}
	return nil
}

func (d *manualDriver) Wake(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.woken = append(d.woken, name)
}

func (d *manualDriver) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.woken
	d.woken = nil
	return out
}

func machine(t *testing.T, c *memory.Cloud, name string) memory.Machine {
	t.Helper()
	m, ok := c.Machine(name)
	require.True(t, ok, name)
	return m
}

// A driven Cloud's instances run when the driver says their machine
// runs, and are DELETING until it says the machine is gone; a report
// about a machine the instance no longer wants changes nothing.
func TestDrivenLifecycle(t *testing.T) {
	d := &manualDriver{}
	c := memory.New(memory.Options{Driver: d, Machines: 3, MachinesAre: "addresses", Reserved: map[string]string{"cp-1": "a host"}})
	g := newGroup(t, c, 2)
	assert.Equal(t, []string{"pool-1", "pool-2"}, d.take(), "named <group>-N, the driver woken for each")
	m1 := machine(t, c, "pool-1")
	assert.Equal(t, memory.Machine{Name: "pool-1", Group: g, Release: "1.34.4", Slot: 0, Gen: 1, Status: cloud.StatusCreating, Want: memory.WantRunning}, m1)
	assert.Equal(t, 1, machine(t, c, "pool-2").Slot)
	c.Advance()
	assert.Equal(t, cloud.StatusCreating, statuses(t, c, g)["pool-1"], "the driver runs them, not Advance")

	c.Running("pool-1", 1)
	c.Running("pool-2", 1)
	require.NoError(t, c.RecreateInstances(ctx, g, []string{"pool-1"}, "recreate"))
	assert.Equal(t, []string{"pool-1"}, d.take())
	c.Running("pool-1", 1) // the old machine's late report
	assert.Equal(t, cloud.StatusRecreating, statuses(t, c, g)["pool-1"])
	c.Failed("pool-1", 2, errors.New("boot failed"))
	ins, err := c.ListInstances(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, cloud.StatusStopped, ins[0].Status)
	assert.EqualError(t, ins[0].LastError, "boot failed")

	require.NoError(t, c.DeleteInstances(ctx, g, []string{"pool-2"}, "delete"))
	assert.Equal(t, memory.WantGone, machine(t, c, "pool-2").Want)
	grp, err := c.GetGroup(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, 1, grp.TargetSize, "a DELETING instance is not in the target size")
	assert.False(t, grp.Stable)
	assert.ErrorIs(t, c.CreateInstances(ctx, g, []string{"pool-2"}, "again"), cloud.ErrTransient, "its name is still taken")
	c.Removed("pool-2")
	_, ok := c.Machine("pool-2")
	assert.False(t, ok)

	other := cloud.GroupRef{Zone: "y", Name: "other"}
	require.NoError(t, c.CreateGroup(ctx, other, grp.Template, 0, "other"))
	assert.ErrorIs(t, c.CreateInstances(ctx, other, []string{"pool-1"}, "steal"), cloud.ErrConflict, "names are the Cloud's")
	assert.ErrorIs(t, c.CreateInstances(ctx, other, []string{"cp-1"}, "reserved"), cloud.ErrConflict)
	err = c.Resize(ctx, other, 3, "too many")
	assert.ErrorIs(t, err, cloud.ErrQuota)
	assert.Contains(t, err.Error(), "2 addresses left")
	require.NoError(t, c.Resize(ctx, other, 2, "fits"))
	assert.Equal(t, 1, machine(t, c, "other-1").Slot, "the lowest free machine")

	_, err = c.EnsureTemplate(ctx, cloud.TemplateSpec{Release: "0.0.0"}, "unknown")
	assert.Error(t, err, "the driver cannot make machines at it")
}

// A driven DeleteGroup returns once the driver removed every machine.
func TestDrivenDeleteGroupWaits(t *testing.T) {
	d := &manualDriver{}
	c := memory.New(memory.Options{Driver: d})
	g := newGroup(t, c, 2)
	done := make(chan error, 1)
	go func() { done <- c.DeleteGroup(ctx, g, "delete") }()
	require.Eventually(t, func() bool { _, err := c.GetGroup(ctx, g); return errors.Is(err, cloud.ErrNotFound) }, 5*time.Second, time.Millisecond)
	c.Removed("pool-1")
	select {
	case err := <-done:
		t.Fatalf("DeleteGroup returned %v with pool-2 left", err)
	default:
	}
	c.Removed("pool-2")
	require.NoError(t, <-done)
	assert.Empty(t, c.Instances())
}

// The book survives in its file: a Cloud opened on it again has the
// groups, instances and request IDs; a file of another format is refused.
func TestOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "book.json")
	c, err := memory.Open(memory.Options{File: path, Driver: &manualDriver{}})
	require.NoError(t, err)
	g := newGroup(t, c, 1)
	c.Running("pool-1", 1)
	require.NoError(t, c.CreateInstances(ctx, g, []string{"pool-x"}, "surge"))
	c.Removed("pool-x") // nothing: it is not being deleted
	before, err := c.ListInstances(ctx, g)
	require.NoError(t, err)

	c2, err := memory.Open(memory.Options{File: path, Driver: &manualDriver{}})
	require.NoError(t, err)
	after, err := c2.ListInstances(ctx, g)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	require.NoError(t, c2.DeleteInstances(ctx, g, []string{"pool-x"}, "delete-x"))
	c2.Removed("pool-x")
	require.NoError(t, c2.CreateInstances(ctx, g, []string{"pool-x"}, "surge"), "a replayed request")
	assert.Len(t, c2.Instances(), 1, "creates nothing again")

	require.NoError(t, os.WriteFile(path, []byte(`{"groups":{"z/pool":{"zone":"z","name":"pool"}}}`), 0o600))
	_, err = memory.Open(memory.Options{File: path})
	assert.ErrorContains(t, err, "unknown field")
}
