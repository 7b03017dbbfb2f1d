package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/phases"
)

// fleetPoll spaces the fleet's reads of the cloud and of the cluster: how
// soon after its machine runs an agent starts, not a wait for anything a
// test asserts.
const fleetPoll = 10 * time.Millisecond

// fleet plays the machines of a cluster's MIG pools as their instance
// template makes them: a machine that runs starts molt's agent, which
// enrolls. Every RUNNING instance of the pools' groups (the registered
// ones, and the green groups an upgrade made) whose node is in the
// cluster's spec — an agent is refused enrollment before — gets a
// simAgent that reports the kubelet of the release its template
// installs. An instance deleted, stopped or being recreated loses its
// agent; a recreated one gets a new agent, which enrolls again, once it
// runs from its new template. Agents of bare-metal nodes are runAgents'
// (bareMetalNodes).
//
// The fleet reads the cluster as the leader has it, and does nothing
// while there is no leader: agents are never stopped on a stale view.
type fleet struct {
	tc      *testCluster
	cluster string
	prov    cloud.Provider
	// base is the release of instances made from a template molt did not
	// make (the groups' own, as registered).
	base phases.Version

	mu     sync.Mutex
	agents map[string]*fleetAgent   // by instance name
	holds  map[string]chan struct{} // instances whose agents wait to start
	seed   int
}

type fleetAgent struct {
	template string
	agent    *simAgent
	stop     context.CancelFunc
	done     chan struct{} // closed when the agent has stopped
}

// startFleet runs the machines of cluster's MIG pools in prov until ctx
// ends; base is the cluster's version at registration. It may start
// before the cluster is registered.
func startFleet(ctx context.Context, tc *testCluster, cluster string, prov cloud.Provider, base string) *fleet {
	f := &fleet{tc: tc, cluster: cluster, prov: prov, base: phases.MustParseVersion(base),
		agents: map[string]*fleetAgent{}, holds: map[string]chan struct{}{}}
	go func() {
		tick := time.NewTicker(fleetPoll)
		defer tick.Stop()
		for {
			f.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return f
}

// hold keeps the agent of instance name from starting — its machine runs,
// its agent does not enroll — until release is called. Call it before the
// instance runs.
func (f *fleet) hold(name string) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.holds[name] = ch
	f.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

// sync starts an agent for every machine that runs without one and stops
// those whose machine is gone (or was recreated).
func (f *fleet) sync(ctx context.Context) {
	groups, members, ok := f.view()
	if !ok {
		return
	}
	running := map[string]string{} // instance → its template
	for _, g := range groups {
		insts, err := f.prov.ListInstances(ctx, g)
		if errors.Is(err, cloud.ErrNotFound) {
			continue // deleted, and its instances with it
		}
		if err != nil {
			return // not known now: change nothing
		}
		for _, in := range insts {
			if in.Status == cloud.StatusRunning && members[in.Name] {
				running[in.Name] = in.Template
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gone := map[string]chan struct{}{}
	for name, a := range f.agents {
		if tmpl, ok := running[name]; !ok || tmpl != a.template {
			a.stop()
			gone[name] = a.done
			delete(f.agents, name)
		}
	}
	for name, tmpl := range running {
		if _, ok := f.agents[name]; !ok {
			f.start(ctx, name, tmpl, gone[name])
		}
	}
}

// start runs the agent of a machine from template, once the agent of the
// machine it recreates (prev, nil if none) has stopped. f.mu is held.
func (f *fleet) start(ctx context.Context, name, template string, prev <-chan struct{}) {
	actx, stop := context.WithCancel(ctx)
	a := newSimAgent(f.cluster, name)
	a.kubelet = f.releaseOf(template).KubeletVersion()
	fa := &fleetAgent{template: template, agent: a, stop: stop, done: make(chan struct{})}
	f.agents[name] = fa
	hold := f.holds[name]
	f.seed++
	seed := f.seed
	go func() {
		defer close(fa.done)
		for _, wait := range []<-chan struct{}{prev, hold} {
			if wait == nil {
				continue
			}
			select {
			case <-wait:
			case <-actx.Done():
				return
			}
		}
		a.run(actx, f.tc, seed)
	}()
}

// view is what the leader has of the cluster: the groups of its MIG pools
// (as registered, as an upgrade started, and the green ones an upgrade
// made) and the nodes of those pools. ok is false without a leader or
// before the cluster is registered.
func (f *fleet) view() (groups []cloud.GroupRef, members map[string]bool, ok bool) {
	l := f.tc.leader()
	if l == nil {
		return nil, nil, false
	}
	c, err := l.c.Cluster(f.cluster)
	if err != nil {
		return nil, nil, false
	}
	seen := map[cloud.GroupRef]bool{}
	add := func(zone, name string) {
		g := cloud.GroupRef{Zone: zone, Name: name}
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	members = map[string]bool{}
	for _, p := range c.Spec.Pools {
		if p.Backing != api.BackingMIG {
			continue
		}
		for _, g := range p.Groups {
			add(g.Zone, g.Name)
		}
		for _, n := range p.Nodes {
			members[n.Name] = true
		}
	}
	if u := c.Status.Upgrade; u != nil {
		for _, p := range u.Pools {
			for _, g := range p.Groups {
				add(g.Zone, g.Name)
			}
			if p.BlueGreen != nil {
				for _, g := range p.BlueGreen.Green {
					add(g.Zone, g.Name)
				}
			}
		}
	}
	return groups, members, true
}

// releaseOf is the release a template installs: the one its name carries
// for a template molt made (cloud.TemplateName: "molt-1-34-4-<hash>"),
// else base.
func (f *fleet) releaseOf(template string) phases.Version {
	rest, ok := strings.CutPrefix(template, "molt-")
	if i := strings.LastIndexByte(rest, '-'); ok && i > 0 {
		if v, err := phases.ParseVersion(strings.ReplaceAll(rest[:i], "-", ".")); err == nil {
			return v
		}
	}
	return f.base
}

// bareMetalNodes lists the nodes of spec's pools that are not MIG-backed:
// the machines runAgents plays (a fleet plays the others).
func bareMetalNodes(spec api.ClusterSpec) []string {
	var out []string
	for _, p := range spec.Pools {
		if p.Backing == api.BackingMIG {
			continue
		}
		for _, n := range p.Nodes {
			out = append(out, n.Name)
		}
	}
	return out
}
