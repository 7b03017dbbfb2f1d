// Package cloudtest is the contract every cloud.Provider keeps: one suite,
// Run, that the in-memory, GCE and lab adapters all pass. An adapter's test
// calls Run with a Harness that builds its backend and reaches into it for
// the few things a test must control (quota, stockout, a slow operation,
// instances finishing their creation).
//
// What the suite asserts is the behaviour the MIG strategies rely on:
// instance names and request IDs make every call safe to repeat, also from
// a new Provider value after a failover; a template change affects new
// instances only; quota and stockout are waited out or cleaned up without
// leaving stray instances; errors carry the cloud sentinels.
package cloudtest

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
)

// Harness builds the backends the suite runs against.
type Harness interface {
	// New returns a backend for one case of the suite. It may be fresh or
	// shared with earlier cases, as long as none of the groups the case
	// names exist (every case uses its own group names, prefixed "ct-").
	// Cleanup (registered with t.Cleanup) is the harness's.
	New(t *testing.T) Backend
}

// Backend is one provider's state and the test's hand on it. Hooks act on
// the backend, not on a Provider value, so they hold for every Provider
// value the backend has handed out.
type Backend interface {
	// Provider returns a Provider over the backend. Each call returns a
	// new value, built as a new leader would build it after a failover:
	// it shares the backend's state and nothing else.
	Provider(t *testing.T) cloud.Provider
	// Zone is the zone the suite creates its groups in.
	Zone() string
	// BaseTemplate is the TemplateSpec.Base the suite passes to
	// EnsureTemplate: an existing template, or "" for a provider whose
	// templates have no base.
	BaseTemplate() string
	// FinishCreating returns once every instance that can be created is:
	// CREATING and RECREATING instances RUNNING, DELETING ones gone.
	// Instances that quota or stockout keep from being created stay
	// CREATING (or RECREATING) with their LastError.
	FinishCreating(t *testing.T)
	// SetQuota limits the instances the zone's quota allows to limit
	// (> 0), and Quota(zone) reports it as Limit from then on. 0 lifts
	// that limit: the backend's own applies again (none, or one far
	// above what the suite uses).
	SetQuota(t *testing.T, zone string, limit int)
	// SetStockout says whether the zone has no capacity: while on,
	// instances created or recreated there stay CREATING (RECREATING)
	// with a LastError wrapping cloud.ErrStockout, also across
	// FinishCreating.
	SetStockout(t *testing.T, zone string, on bool)
	// TimeoutNext makes the next mutating call carry out its change but
	// return an error wrapping cloud.ErrTransient, as a call whose
	// operation outlived its deadline does.
	TimeoutNext(t *testing.T)
}

// Releaser is a Backend whose templates can name only some releases (the
// lab: the releases it has Kubernetes builds of). The suite makes its
// templates of these two, instead of 1.34.4 and 1.35.1.
type Releaser interface {
	Releases() (first, second string)
}

// Run runs the contract against the providers h builds. Each case is a
// subtest.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		fn   func(e *env)
	}{
		{"Templates", testTemplates},
		{"Groups", testGroups},
		{"CreateInstancesOnce", testCreateInstancesOnce},
		{"DeleteInstances", testDeleteInstances},
		{"ReplayAfterFailover", testReplay},
		{"OneReqManyCalls", testOneReqManyCalls},
		{"SetTemplateAffectsNewInstancesOnly", testSetTemplate},
		{"Resize", testResize},
		{"Autoscaling", testAutoscaling},
		{"QuotaLeavesNoStrayInstance", testQuota},
		{"StockoutLeavesNoStrayInstance", testStockout},
		{"TimeoutThenRetryConverges", testTimeout},
		{"Errors", testErrors},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := h.New(t)
			e := &env{t: t, b: b, p: b.Provider(t), ctx: context.Background(), zone: b.Zone(), r1: "1.34.4", r2: "1.35.1"}
			if r, ok := b.(Releaser); ok {
				e.r1, e.r2 = r.Releases()
			}
			c.fn(e)
		})
	}
}

// env is one case's provider and backend with the helpers the cases share.
type env struct {
	t    *testing.T
	b    Backend
	p    cloud.Provider
	ctx  context.Context
	zone string
	// r1 and r2 are the releases of the templates the cases make.
	r1, r2 string
}

func (e *env) group(name string) cloud.GroupRef { return cloud.GroupRef{Zone: e.zone, Name: name} }

func (e *env) spec(release string) cloud.TemplateSpec {
	return cloud.TemplateSpec{Release: release, Base: e.b.BaseTemplate()}
}

// template ensures the template for release.
func (e *env) template(release, req string) string {
	e.t.Helper()
	name, err := e.p.EnsureTemplate(e.ctx, e.spec(release), req)
	require.NoError(e.t, err, "EnsureTemplate %s", release)
	return name
}

// newGroup creates a group of size running instances from the template
// of release r1.
func (e *env) newGroup(name string, size int) cloud.GroupRef {
	e.t.Helper()
	g := e.group(name)
	tmpl := e.template(e.r1, name+"/template")
	require.NoError(e.t, e.p.CreateGroup(e.ctx, g, tmpl, size, name+"/create"))
	e.b.FinishCreating(e.t)
	return g
}

func (e *env) get(g cloud.GroupRef) cloud.Group {
	e.t.Helper()
	grp, err := e.p.GetGroup(e.ctx, g)
	require.NoError(e.t, err, "GetGroup %s", g)
	return grp
}

// list lists g's instances and checks what every listing promises: sorted
// by name, unique names and provider IDs, a known status.
func (e *env) list(g cloud.GroupRef) []cloud.Instance {
	e.t.Helper()
	ins, err := e.p.ListInstances(e.ctx, g)
	require.NoError(e.t, err, "ListInstances %s", g)
	assert.True(e.t, sort.SliceIsSorted(ins, func(i, j int) bool { return ins[i].Name < ins[j].Name }), "ListInstances is sorted by name: %v", names(ins))
	ids := map[string]bool{}
	for i, in := range ins {
		if i > 0 {
			assert.NotEqual(e.t, ins[i-1].Name, in.Name, "instance names are unique")
		}
		assert.NotEmpty(e.t, in.ProviderID, "instance %s has a provider ID", in.Name)
		assert.False(e.t, ids[in.ProviderID], "provider ID %s is unique", in.ProviderID)
		ids[in.ProviderID] = true
		assert.Contains(e.t, []cloud.InstanceStatus{cloud.StatusCreating, cloud.StatusRunning, cloud.StatusDeleting, cloud.StatusRecreating, cloud.StatusStopped}, in.Status, "instance %s", in.Name)
	}
	return ins
}

// present lists g's instances that are not on their way out.
func (e *env) present(g cloud.GroupRef) []cloud.Instance {
	e.t.Helper()
	var out []cloud.Instance
	for _, in := range e.list(g) {
		if in.Status != cloud.StatusDeleting {
			out = append(out, in)
		}
	}
	return out
}

func names(ins []cloud.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.Name)
	}
	return out
}

func find(ins []cloud.Instance, name string) (cloud.Instance, bool) {
	for _, in := range ins {
		if in.Name == name {
			return in, true
		}
	}
	return cloud.Instance{}, false
}

// allRunning asserts that every instance of g runs, from template (when
// given), with no LastError, and that the group is stable.
func (e *env) allRunning(g cloud.GroupRef) []cloud.Instance {
	e.t.Helper()
	ins := e.list(g)
	for _, in := range ins {
		assert.Equal(e.t, cloud.StatusRunning, in.Status, "instance %s", in.Name)
		assert.NoError(e.t, in.LastError, "instance %s", in.Name)
	}
	assert.True(e.t, e.get(g).Stable, "group %s is stable once its instances run", g)
	return ins
}

// EnsureTemplate is content-addressed and idempotent.
func testTemplates(e *env) {
	t := e.t
	a := e.template(e.r1, "ct/templates/a")
	assert.Equal(t, cloud.TemplateName(e.spec(e.r1)), a, "the template's name is TemplateName of its spec")
	assert.Equal(t, a, e.template(e.r1, "ct/templates/a"), "the same request")
	assert.Equal(t, a, e.template(e.r1, "ct/templates/again"), "a new request for the same spec")
	b := e.template(e.r2, "ct/templates/b")
	assert.NotEqual(t, a, b)
	assert.Equal(t, cloud.TemplateName(e.spec(e.r2)), b)

	_, err := e.p.EnsureTemplate(e.ctx, cloud.TemplateSpec{Base: e.b.BaseTemplate()}, "ct/templates/no-release")
	assert.ErrorIs(t, err, cloud.ErrInvalid, "a template needs a release")
	if e.b.BaseTemplate() != "" {
		_, err := e.p.EnsureTemplate(e.ctx, cloud.TemplateSpec{Release: e.r1, Base: "ct-no-such-base"}, "ct/templates/no-base")
		assert.ErrorIs(t, err, cloud.ErrNotFound, "a missing base template")
		// A step repeated after its instances moved to the release asks
		// with their template as the base: nothing new is made.
		same, err := e.p.EnsureTemplate(e.ctx, cloud.TemplateSpec{Release: e.r1, Base: a}, "ct/templates/base-at-release")
		require.NoError(t, err)
		assert.Equal(t, a, same, "a base that is already a template of the release is its own answer")
	}
}

// CreateGroup and DeleteGroup are idempotent.
func testGroups(e *env) {
	t := e.t
	g := e.group("ct-groups")
	_, err := e.p.GetGroup(e.ctx, g)
	require.ErrorIs(t, err, cloud.ErrNotFound, "before it is created")

	tmpl := e.template(e.r1, "ct/groups/template")
	require.NoError(t, e.p.CreateGroup(e.ctx, g, tmpl, 2, "ct/groups/create"))
	require.NoError(t, e.p.CreateGroup(e.ctx, g, tmpl, 2, "ct/groups/create"), "the same request")
	require.NoError(t, e.p.CreateGroup(e.ctx, g, tmpl, 5, "ct/groups/create-again"), "a group that exists is left as it is")
	grp := e.get(g)
	assert.Equal(t, g, grp.GroupRef)
	assert.Equal(t, 2, grp.TargetSize)
	assert.Equal(t, tmpl, grp.Template)
	assert.Equal(t, cloud.Autoscaling{}, grp.Autoscaling, "no autoscaling limits on a new group")

	e.b.FinishCreating(t)
	ins := e.allRunning(g)
	require.Len(t, ins, 2)
	for _, in := range ins {
		assert.Equal(t, tmpl, in.Template)
	}
	again := e.list(g)
	assert.Equal(t, ins, again, "listing twice gives the same instances and provider IDs")

	require.NoError(t, e.p.DeleteGroup(e.ctx, g, "ct/groups/delete"))
	e.b.FinishCreating(t)
	_, err = e.p.GetGroup(e.ctx, g)
	assert.ErrorIs(t, err, cloud.ErrNotFound, "after it is deleted")
	_, err = e.p.ListInstances(e.ctx, g)
	assert.ErrorIs(t, err, cloud.ErrNotFound, "listing a deleted group")
	require.NoError(t, e.p.DeleteGroup(e.ctx, g, "ct/groups/delete"), "the same request")
	require.NoError(t, e.p.DeleteGroup(e.ctx, g, "ct/groups/delete-again"), "deleting a missing group")
}

// Creating an instance twice under one name makes one instance.
func testCreateInstancesOnce(e *env) {
	t := e.t
	g := e.newGroup("ct-once", 0)
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-once-b"}, "ct/once/1"))
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-once-b"}, "ct/once/1"), "the same request")
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-once-b"}, "ct/once/2"), "a new request for the same name")
	assert.Equal(t, []string{"ct-once-b"}, names(e.list(g)))
	assert.Equal(t, 1, e.get(g).TargetSize)

	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-once-b", "ct-once-a"}, "ct/once/3"), "one new name among existing ones")
	assert.Equal(t, []string{"ct-once-a", "ct-once-b"}, names(e.list(g)))
	assert.Equal(t, 2, e.get(g).TargetSize)
	for _, in := range e.list(g) {
		assert.Contains(t, []cloud.InstanceStatus{cloud.StatusCreating, cloud.StatusRunning}, in.Status, "a new instance %s", in.Name)
	}

	e.b.FinishCreating(t)
	ins := e.allRunning(g)
	assert.Equal(t, []string{"ct-once-a", "ct-once-b"}, names(ins))
	assert.Equal(t, 2, e.get(g).TargetSize)
}

// Deleting a missing instance, or from a missing group, succeeds.
func testDeleteInstances(e *env) {
	t := e.t
	g := e.newGroup("ct-delete", 0)
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-delete-a", "ct-delete-b"}, "ct/delete/create"))
	e.b.FinishCreating(t)

	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-delete-missing"}, "ct/delete/missing"), "a name that does not exist")
	assert.Equal(t, 2, e.get(g).TargetSize)
	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-delete-a", "ct-delete-missing"}, "ct/delete/a"))
	assert.Equal(t, []string{"ct-delete-b"}, names(e.present(g)), "right after the call")
	assert.Equal(t, 1, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	assert.Equal(t, []string{"ct-delete-b"}, names(e.allRunning(g)))

	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-delete-a"}, "ct/delete/a"), "the same request")
	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-delete-a"}, "ct/delete/a-again"), "a new request for a deleted instance")
	assert.Equal(t, 1, e.get(g).TargetSize)
	require.NoError(t, e.p.DeleteInstances(e.ctx, e.group("ct-delete-nogroup"), []string{"ct-delete-a"}, "ct/delete/nogroup"), "a group that does not exist")
}

// A new leader that repeats the steps of the old one, with the same
// request IDs, on a new Provider value, changes nothing.
func testReplay(e *env) {
	t := e.t
	g := e.group("ct-replay")
	steps := []struct {
		what string
		do   func(p cloud.Provider) error
	}{
		{"template 1.34.4", func(p cloud.Provider) error {
			_, err := p.EnsureTemplate(e.ctx, e.spec(e.r1), "ct/replay/t1")
			return err
		}},
		{"create group", func(p cloud.Provider) error {
			return p.CreateGroup(e.ctx, g, cloud.TemplateName(e.spec(e.r1)), 2, "ct/replay/group")
		}},
		{"resize to 3", func(p cloud.Provider) error { return p.Resize(e.ctx, g, 3, "ct/replay/resize") }},
		{"template 1.35.1", func(p cloud.Provider) error {
			_, err := p.EnsureTemplate(e.ctx, e.spec(e.r2), "ct/replay/t2")
			return err
		}},
		{"set template", func(p cloud.Provider) error {
			return p.SetTemplate(e.ctx, g, cloud.TemplateName(e.spec(e.r2)), "ct/replay/set-template")
		}},
		{"surge x", func(p cloud.Provider) error {
			return p.CreateInstances(e.ctx, g, []string{"ct-replay-x"}, "ct/replay/surge-x")
		}},
		{"surge y", func(p cloud.Provider) error {
			return p.CreateInstances(e.ctx, g, []string{"ct-replay-y"}, "ct/replay/surge-y")
		}},
		{"delete x", func(p cloud.Provider) error {
			return p.DeleteInstances(e.ctx, g, []string{"ct-replay-x"}, "ct/replay/delete-x")
		}},
		{"recreate y", func(p cloud.Provider) error {
			return p.RecreateInstances(e.ctx, g, []string{"ct-replay-y"}, "ct/replay/recreate-y")
		}},
		{"autoscaling", func(p cloud.Provider) error {
			return p.SetAutoscaling(e.ctx, g, cloud.Autoscaling{Min: 4, Max: 4}, "ct/replay/pin")
		}},
	}
	for _, s := range steps {
		require.NoError(t, s.do(e.p), "first run: %s", s.what)
		e.b.FinishCreating(t)
	}
	before := e.allRunning(g)
	beforeGroup := e.get(g)
	require.Len(t, before, 4, "3 from the resize, y surged, x surged and deleted")
	_, hasX := find(before, "ct-replay-x")
	assert.False(t, hasX)

	p2 := e.b.Provider(t)
	for _, s := range steps {
		require.NoError(t, s.do(p2), "replay: %s", s.what)
	}
	after, err := p2.ListInstances(e.ctx, g)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the replay creates, deletes and recreates nothing (before any instance could finish)")
	afterGroup, err := p2.GetGroup(e.ctx, g)
	require.NoError(t, err)
	assert.Equal(t, beforeGroup, afterGroup)
	e.b.FinishCreating(t)
	assert.Equal(t, before, e.allRunning(g))
}

// Under one req, calls that differ in group or arguments are different
// requests: an action that works on every zone's group, or creates its
// instances one call at a time, reaches them all.
func testOneReqManyCalls(e *env) {
	t := e.t
	a := e.newGroup("ct-onereq-a", 0)
	b := e.newGroup("ct-onereq-b", 0)
	v2 := e.template(e.r2, "ct/onereq/v2")
	const req = "ct/onereq/action"
	for _, g := range []cloud.GroupRef{a, b} {
		require.NoError(t, e.p.SetTemplate(e.ctx, g, v2, req), "%s", g)
		require.NoError(t, e.p.Resize(e.ctx, g, 1, req), "%s", g)
		require.NoError(t, e.p.SetAutoscaling(e.ctx, g, cloud.Autoscaling{Min: 1, Max: 3}, req), "%s", g)
	}
	require.NoError(t, e.p.CreateInstances(e.ctx, a, []string{"ct-onereq-x"}, req))
	require.NoError(t, e.p.CreateInstances(e.ctx, a, []string{"ct-onereq-y"}, req), "other names")
	e.b.FinishCreating(t)
	for _, g := range []cloud.GroupRef{a, b} {
		grp := e.get(g)
		assert.Equal(t, v2, grp.Template, "%s", g)
		assert.Equal(t, cloud.Autoscaling{Min: 1, Max: 3}, grp.Autoscaling, "%s", g)
	}
	assert.Equal(t, 3, e.get(a).TargetSize)
	assert.Equal(t, 1, e.get(b).TargetSize)
	ins := e.allRunning(a)
	assert.Len(t, ins, 3)
	for _, n := range []string{"ct-onereq-x", "ct-onereq-y"} {
		_, ok := find(ins, n)
		assert.True(t, ok, "%s created", n)
	}
}

// SetTemplate changes the template of instances created from then on; the
// running ones keep theirs until they are recreated.
func testSetTemplate(e *env) {
	t := e.t
	g := e.newGroup("ct-settemplate", 1)
	v1 := e.get(g).Template
	old := e.allRunning(g)
	require.Len(t, old, 1)
	v2 := e.template(e.r2, "ct/settemplate/v2")

	require.NoError(t, e.p.SetTemplate(e.ctx, g, v2, "ct/settemplate/set"))
	require.NoError(t, e.p.SetTemplate(e.ctx, g, v2, "ct/settemplate/set"), "the same request")
	assert.Equal(t, v2, e.get(g).Template)
	e.b.FinishCreating(t)
	assert.Equal(t, old, e.allRunning(g), "the running instance is neither replaced nor recreated")

	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-settemplate-new"}, "ct/settemplate/surge"))
	require.NoError(t, e.p.Resize(e.ctx, g, 3, "ct/settemplate/resize"))
	e.b.FinishCreating(t)
	ins := e.allRunning(g)
	require.Len(t, ins, 3)
	for _, in := range ins {
		want := v2
		if in.Name == old[0].Name {
			want = v1
		}
		assert.Equal(t, want, in.Template, "instance %s", in.Name)
	}

	require.NoError(t, e.p.RecreateInstances(e.ctx, g, []string{old[0].Name, "ct-settemplate-missing"}, "ct/settemplate/recreate"))
	assert.Equal(t, 3, e.get(g).TargetSize, "recreating keeps the target size")
	e.b.FinishCreating(t)
	ins = e.allRunning(g)
	require.Len(t, ins, 3)
	for _, in := range ins {
		assert.Equal(t, v2, in.Template, "instance %s after the recreate", in.Name)
	}
	recreated, ok := find(ins, old[0].Name)
	require.True(t, ok, "a recreated instance keeps its name")
	assert.Equal(t, old[0].ProviderID, recreated.ProviderID, "and its provider ID")
}

// Resize sets the target size; the provider names the instances.
func testResize(e *env) {
	t := e.t
	g := e.newGroup("ct-resize", 0)
	require.NoError(t, e.p.Resize(e.ctx, g, 2, "ct/resize/2"))
	assert.Equal(t, 2, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	assert.Len(t, e.allRunning(g), 2)

	require.NoError(t, e.p.Resize(e.ctx, g, 2, "ct/resize/2-again"), "to the size it has")
	require.NoError(t, e.p.Resize(e.ctx, g, 1, "ct/resize/1"))
	assert.Equal(t, 1, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	assert.Len(t, e.allRunning(g), 1)

	assert.ErrorIs(t, e.p.Resize(e.ctx, g, -1, "ct/resize/negative"), cloud.ErrInvalid)
	assert.Equal(t, 1, e.get(g).TargetSize)
}

// SetAutoscaling round-trips through GetGroup.
func testAutoscaling(e *env) {
	t := e.t
	g := e.newGroup("ct-autoscaling", 1)
	for i, a := range []cloud.Autoscaling{{Min: 1, Max: 5}, {Min: 1, Max: 5}, {Min: 3, Max: 3}, {Min: 0, Max: 2}, {}, {}, {Min: 2, Max: 4}} {
		req := "ct/autoscaling/" + string(rune('a'+i))
		require.NoError(t, e.p.SetAutoscaling(e.ctx, g, a, req), "%+v", a)
		assert.Equal(t, a, e.get(g).Autoscaling, "after setting %+v", a)
	}
	for _, bad := range []cloud.Autoscaling{{Min: 5, Max: 2}, {Min: -1, Max: 2}, {Min: 1, Max: 0}} {
		assert.ErrorIs(t, e.p.SetAutoscaling(e.ctx, g, bad, "ct/autoscaling/bad"), cloud.ErrInvalid, "%+v", bad)
	}
	assert.Equal(t, cloud.Autoscaling{Min: 2, Max: 4}, e.get(g).Autoscaling, "refused limits change nothing")
	assert.Equal(t, 1, e.get(g).TargetSize, "limits do not resize the group")
}

// Without quota, CreateInstances is refused with ErrQuota or its instances
// wait with a LastError wrapping ErrQuota; the caller that gives up
// deletes the names it asked for, and nothing remains.
func testQuota(e *env) {
	t := e.t
	g := e.newGroup("ct-quota", 1)
	q, err := e.p.Quota(e.ctx, e.zone)
	require.NoError(t, err)
	require.GreaterOrEqual(t, q.Usage, 1, "the group's instance uses quota")
	e.b.SetQuota(t, e.zone, q.Usage)
	t.Cleanup(func() { e.b.SetQuota(t, e.zone, 0) })
	q2, err := e.p.Quota(e.ctx, e.zone)
	require.NoError(t, err)
	assert.Equal(t, cloud.Quota{Limit: q.Usage, Usage: q.Usage}, q2)
	assert.Equal(t, 0, q2.Free())

	err = e.p.CreateInstances(e.ctx, g, []string{"ct-quota-a"}, "ct/quota/create")
	if err != nil {
		assert.ErrorIs(t, err, cloud.ErrQuota, "a refused call says why")
		assert.True(t, cloud.Retryable(err))
		_, listed := find(e.list(g), "ct-quota-a")
		assert.False(t, listed, "a refused call creates nothing")
	} else {
		e.b.FinishCreating(t)
		in, ok := find(e.list(g), "ct-quota-a")
		require.True(t, ok, "an accepted call lists the instance")
		assert.Equal(t, cloud.StatusCreating, in.Status, "it waits for quota")
		assert.ErrorIs(t, in.LastError, cloud.ErrQuota)
		assert.True(t, cloud.Retryable(in.LastError))
		assert.False(t, e.get(g).Stable)
	}

	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-quota-a"}, "ct/quota/give-up"))
	e.b.FinishCreating(t)
	ins := e.allRunning(g)
	assert.Len(t, ins, 1, "no stray instance")
	assert.Equal(t, 1, e.get(g).TargetSize)
	q3, err := e.p.Quota(e.ctx, e.zone)
	require.NoError(t, err)
	assert.Equal(t, q.Usage, q3.Usage, "no quota held by the instance given up")

	e.b.SetQuota(t, e.zone, 0)
	q4, err := e.p.Quota(e.ctx, e.zone)
	require.NoError(t, err)
	assert.Greater(t, q4.Free(), 0, "room again")
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-quota-b"}, "ct/quota/create-b"))
	e.b.FinishCreating(t)
	assert.Equal(t, []string{ins[0].Name, "ct-quota-b"}, sorted(names(e.allRunning(g))))
}

// In a stockout the instances wait, CREATING with a LastError wrapping
// ErrStockout; the caller that gives up deletes them, and nothing remains.
func testStockout(e *env) {
	t := e.t
	g := e.newGroup("ct-stockout", 1)
	running := e.allRunning(g)
	e.b.SetStockout(t, e.zone, true)
	t.Cleanup(func() { e.b.SetStockout(t, e.zone, false) })

	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-stockout-a"}, "ct/stockout/create"), "the call is accepted")
	e.b.FinishCreating(t)
	ins := e.list(g)
	in, ok := find(ins, "ct-stockout-a")
	require.True(t, ok)
	assert.Equal(t, cloud.StatusCreating, in.Status, "it waits for capacity")
	assert.ErrorIs(t, in.LastError, cloud.ErrStockout)
	assert.True(t, cloud.Retryable(in.LastError))
	old, ok := find(ins, running[0].Name)
	require.True(t, ok)
	assert.Equal(t, running[0], old, "the running instance is untouched")
	grp := e.get(g)
	assert.Equal(t, 2, grp.TargetSize)
	assert.False(t, grp.Stable)

	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-stockout-a"}, "ct/stockout/give-up"))
	e.b.FinishCreating(t)
	assert.Equal(t, running, e.allRunning(g), "no stray instance")
	assert.Equal(t, 1, e.get(g).TargetSize)

	e.b.SetStockout(t, e.zone, false)
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-stockout-b"}, "ct/stockout/create-b"))
	e.b.FinishCreating(t)
	assert.Equal(t, sorted([]string{running[0].Name, "ct-stockout-b"}), names(e.allRunning(g)))
}

// A call whose operation outlives its deadline returns ErrTransient; the
// caller's retry with the same req converges, doing nothing twice.
func testTimeout(e *env) {
	t := e.t
	g := e.newGroup("ct-timeout", 0)

	e.b.TimeoutNext(t)
	err := e.p.CreateInstances(e.ctx, g, []string{"ct-timeout-a"}, "ct/timeout/create")
	require.ErrorIs(t, err, cloud.ErrTransient, "the create timed out")
	assert.True(t, cloud.Retryable(err))
	require.NoError(t, e.p.CreateInstances(e.ctx, g, []string{"ct-timeout-a"}, "ct/timeout/create"), "the retry")
	assert.Equal(t, []string{"ct-timeout-a"}, names(e.list(g)))
	assert.Equal(t, 1, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	e.allRunning(g)

	e.b.TimeoutNext(t)
	require.ErrorIs(t, e.p.Resize(e.ctx, g, 3, "ct/timeout/resize"), cloud.ErrTransient, "the resize timed out")
	require.NoError(t, e.p.Resize(e.ctx, g, 3, "ct/timeout/resize"), "the retry")
	assert.Equal(t, 3, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	assert.Len(t, e.allRunning(g), 3)

	e.b.TimeoutNext(t)
	require.ErrorIs(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-timeout-a"}, "ct/timeout/delete"), cloud.ErrTransient, "the delete timed out")
	require.NoError(t, e.p.DeleteInstances(e.ctx, g, []string{"ct-timeout-a"}, "ct/timeout/delete"), "the retry")
	assert.Equal(t, 2, e.get(g).TargetSize)
	e.b.FinishCreating(t)
	ins := e.allRunning(g)
	assert.Len(t, ins, 2)
	_, hasA := find(ins, "ct-timeout-a")
	assert.False(t, hasA)
}

// Errors carry the cloud sentinels.
func testErrors(e *env) {
	t := e.t
	g := e.newGroup("ct-errors", 0)
	tmpl := e.get(g).Template
	missing := e.group("ct-errors-missing")
	ctx := e.ctx
	p := e.p
	cases := []struct {
		what string
		err  error
		want error
	}{
		{"GetGroup of a missing group", second(p.GetGroup(ctx, missing)), cloud.ErrNotFound},
		{"ListInstances of a missing group", second(p.ListInstances(ctx, missing)), cloud.ErrNotFound},
		{"CreateInstances in a missing group", p.CreateInstances(ctx, missing, []string{"ct-errors-a"}, "ct/errors/1"), cloud.ErrNotFound},
		{"RecreateInstances in a missing group", p.RecreateInstances(ctx, missing, []string{"ct-errors-a"}, "ct/errors/2"), cloud.ErrNotFound},
		{"Resize of a missing group", p.Resize(ctx, missing, 1, "ct/errors/3"), cloud.ErrNotFound},
		{"SetTemplate of a missing group", p.SetTemplate(ctx, missing, tmpl, "ct/errors/4"), cloud.ErrNotFound},
		{"SetAutoscaling of a missing group", p.SetAutoscaling(ctx, missing, cloud.Autoscaling{Min: 1, Max: 2}, "ct/errors/5"), cloud.ErrNotFound},
		{"SetTemplate to a missing template", p.SetTemplate(ctx, g, "ct-no-such-template", "ct/errors/6"), cloud.ErrNotFound},
		{"CreateGroup from a missing template", p.CreateGroup(ctx, missing, "ct-no-such-template", 1, "ct/errors/7"), cloud.ErrNotFound},
		{"CreateInstances with a bad name", p.CreateInstances(ctx, g, []string{"Not_A_Name"}, "ct/errors/8"), cloud.ErrInvalid},
		{"CreateGroup with a bad name", p.CreateGroup(ctx, e.group("Not_A_Group"), tmpl, 1, "ct/errors/9"), cloud.ErrInvalid},
		{"Resize to a negative size", p.Resize(ctx, g, -2, "ct/errors/10"), cloud.ErrInvalid},
	}
	for _, c := range cases {
		assert.ErrorIs(t, c.err, c.want, c.what)
		assert.False(t, cloud.Retryable(c.err), "%s is not retryable", c.what)
		for _, other := range []error{cloud.ErrQuota, cloud.ErrStockout, cloud.ErrNotFound, cloud.ErrConflict, cloud.ErrTransient, cloud.ErrInvalid} {
			if other != c.want {
				assert.False(t, errors.Is(c.err, other), "%s is not %v", c.what, other)
			}
		}
	}
	_, err := p.GetGroup(ctx, missing)
	assert.ErrorIs(t, err, cloud.ErrNotFound, "the failed CreateGroup created nothing")
	assert.Empty(t, e.list(g), "the failed calls created nothing")
}

func second[T any](_ T, err error) error { return err }

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
