package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/lab"
)

// The checks of a finished upgrade against the real cluster, as errors:
// the demo runs them after its upgrade (and fails when one fails), the e2e
// test through its require* wrappers. One definition, so the demo's
// "verified" means what the test asserts.

// problems collects what a check found, one sentence each.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check adds the sentence when ok is false.
func (p *problems) check(ok bool, format string, args ...any) {
	if !ok {
		p.addf(format, args...)
	}
}

func (p problems) err(what string) error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, strings.Join(p, "; "))
}

// VerifyOrder checks SPEC §4 from the recorded step history of a completed
// upgrade: control-plane LBs, then the control plane, then add-ons and the
// LB nodes, then the workers, then the final health checks; inside the
// control plane one node at a time; every step and node done, each node
// of a pool upgraded in place at the target.
func VerifyOrder(u *api.Upgrade) error {
	var p problems
	step := func(id string) (api.Step, bool) {
		s, ok := u.Step(id)
		if !ok {
			p.addf("no step %s", id)
			return api.Step{}, false
		}
		p.check(s.State == api.StepDone, "step %s is %s, not done", id, s.State)
		return *s, true
	}
	after := func(later, earlier string) {
		l, ok1 := step(later)
		e, ok2 := step(earlier)
		if ok1 && ok2 {
			p.check(!l.StartedAt.Before(e.FinishedAt), "%s started before %s finished", later, earlier)
		}
	}
	after("pool/cp", "pool/cplb")
	after("addons", "pool/cp")
	after("pool/lb", "pool/cp")
	after("pool/workers", "pool/lb")
	for _, s := range u.Steps {
		if s.ID != api.StepIDHealth {
			after(api.StepIDHealth, s.ID)
		}
	}
	if cp, ok := u.Pool("cp"); ok {
		cps := u.PoolNodes(cp)
		for i := 1; i < len(cps); i++ {
			p.check(!cps[i].StartedAt.Before(cps[i-1].FinishedAt), "%s overlapped %s", cps[i].Node, cps[i-1].Node)
		}
	} else {
		p.addf("no pool cp")
	}
	for _, n := range u.Nodes {
		p.check(n.State == api.StepDone, "node %s is %s, not done", n.Node, n.State)
		if migNodeUpgraded(u, &n) {
			p.check(n.Version == u.To, "node %s at %s, not %s", n.Node, n.Version, u.To)
		}
	}
	return p.err("order (SPEC §4)")
}

// migNodeUpgraded is for VerifyOrder: whether a node task ends at the
// target in place (a blue/green pool's blue nodes are replaced, not
// upgraded).
func migNodeUpgraded(u *api.Upgrade, n *api.NodeTask) bool {
	p, ok := u.Pool(n.Pool)
	return !ok || p.BlueGreen == nil
}

// VerifyClusterAt checks the real cluster after an upgrade to v: every
// Node Ready and schedulable at v (the nodes in others at the version
// others names instead: a pool rolled back), the control-plane static pods
// on v's images, every host's containerd the release's, the add-ons at v
// (kube-proxy's pods on v's image, Ready on every node; CoreDNS rolled
// out; status.appliedManifestsVersion = v and the add-ons step done), the
// sample workload serving, by pod and by Service name.
func VerifyClusterAt(ctx context.Context, env *Env, u *api.Upgrade, v string, others map[string]string) error {
	var p problems
	nodes, err := env.Lab.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("cluster at %s: nodes: %w", v, err)
	}
	count, err := env.NodeCount(ctx)
	if err != nil {
		return fmt.Errorf("cluster at %s: node count: %w", v, err)
	}
	p.check(len(nodes) == count, "%d Nodes, not one for each of the %d hosts and instances the cluster's pools list", len(nodes), count)
	for _, n := range nodes {
		want := v
		if o, ok := others[n.Name]; ok {
			want = o
		}
		p.check(n.Ready, "Node %s not Ready", n.Name)
		p.check(!n.Unschedulable, "Node %s unschedulable", n.Name)
		p.check(n.KubeletVersion == "v"+want, "Node %s's kubelet is %s, not v%s", n.Name, n.KubeletVersion, want)
	}
	images, err := env.Lab.StaticPodImages(ctx)
	if err != nil {
		return fmt.Errorf("cluster at %s: static pods: %w", v, err)
	}
	seen := 0
	for pod, image := range images {
		for _, comp := range lab.ControlPlaneComponents {
			if strings.HasPrefix(pod, comp+"-") {
				p.check(image == lab.ComponentImage(comp, v), "static pod %s runs %s, not %s", pod, image, lab.ComponentImage(comp, v))
				seen++
			}
		}
		if strings.HasPrefix(pod, "etcd-") {
			p.check(image == lab.EtcdImage(v), "static pod %s runs %s, not %s", pod, image, lab.EtcdImage(v))
		}
	}
	want := 3 * len(env.Lab.Config().Topology.WithRole(lab.RoleControlPlane))
	p.check(seen == want, "%d control-plane static pods, not %d: %v", seen, want, images)
	// Every host's containerd, asked through its API, is the release's.
	var rel api.Release
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+v, nil, &rel); err != nil {
		return fmt.Errorf("cluster at %s: release: %w", v, err)
	}
	ctrd, err := env.Lab.ContainerdVersions(ctx)
	if err != nil {
		return fmt.Errorf("cluster at %s: containerd: %w", v, err)
	}
	p.check(len(ctrd) == len(env.Lab.Config().Topology.Hosts), "containerd versions of %d hosts, not %d", len(ctrd), len(env.Lab.Config().Topology.Hosts))
	for host, got := range ctrd {
		p.check(got == rel.Components.Containerd.Version, "containerd on %s is %s, not the release's %s", host, got, rel.Components.Containerd.Version)
	}
	// The add-ons step applied the release's add-ons and they rolled out.
	p.check(len(rel.Components.Addons) == 2, "the release carries %d add-ons, not 2", len(rel.Components.Addons))
	if err := env.Lab.CheckAddons(ctx, v); err != nil {
		p.addf("add-ons: %v", err)
	}
	if cl, err := env.Cluster(ctx); err != nil {
		p.addf("cluster: %v", err)
	} else {
		p.check(cl.Status.AppliedManifestsVersion == v, "status.appliedManifestsVersion is %q, not %s", cl.Status.AppliedManifestsVersion, v)
	}
	if addons, ok := u.Step(api.StepIDAddons); !ok || addons.State != api.StepDone {
		p.addf("the add-ons step is not done")
	}
	if err := env.Lab.CheckServing(ctx); err != nil {
		p.addf("serving: %v", err)
	}
	if err := env.Lab.CheckWorkloadPaths(ctx); err != nil {
		p.addf("workload paths: %v", err)
	}
	return p.err("cluster at " + v)
}

// VerifyOperationsOnce reads every host's agent journal: each operation ID
// finished once, and no effect (binary renamed, manifests written, unit
// restarted) happened twice for one ID; every host ran an operation.
func VerifyOperationsOnce(ctx context.Context, env *Env) (int, error) {
	var p problems
	ops := 0
	for _, h := range env.Lab.Config().Topology.Hosts {
		out, err := env.Lab.Exec(ctx, h.Name, "cat", "/var/lib/molt-agent/journal.jsonl")
		if err != nil {
			p.addf("%s: journal: %v", h.Name, err)
			continue
		}
		counts := map[string]map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var r struct {
				ID   string `json:"id"`
				Step string `json:"step"`
			}
			if json.Unmarshal(sc.Bytes(), &r) != nil || strings.HasPrefix(r.ID, "preflight-") {
				continue
			}
			if counts[r.ID] == nil {
				counts[r.ID] = map[string]int{}
			}
			counts[r.ID][r.Step]++
		}
		p.check(len(counts) > 0, "%s ran no upgrade operation", h.Name)
		ops += len(counts)
		for id, steps := range counts {
			p.check(steps["finished"] == 1, "%s: %s finished %d times", h.Name, id, steps["finished"])
			for _, effect := range []string{"renamed", "written", "restarted"} {
				p.check(steps[effect] <= 1, "%s: %s %s %d times", h.Name, id, effect, steps[effect])
			}
		}
	}
	return ops, p.err("operations once")
}

// VerifyContainerdChanged: every host's containerd changed (a release
// whose containerd differs from the one the hosts ran: the minor).
func VerifyContainerdChanged(before, after map[string]string) error {
	var p problems
	for host, was := range before {
		p.check(after[host] != "" && after[host] != was, "containerd on %s is still %s (now %q)", host, was, after[host])
	}
	return p.err("containerd changed")
}

// SurgeWatch samples the MIG pool's groups while an upgrade runs: how many
// instances each zone holds (not counting those being deleted).
type SurgeWatch struct {
	env    *Env
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	min, max map[string]int // zone → instances
	samples  int
	before   []string
}

// WatchSurge starts sampling the MIG pool every 250 ms until Verify.
func WatchSurge(ctx context.Context, env *Env) (*SurgeWatch, error) {
	before, err := env.PoolNodes(ctx, env.MIG().Name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &SurgeWatch{env: env, cancel: cancel, done: make(chan struct{}), min: map[string]int{}, max: map[string]int{}, before: before}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.sample(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w, nil
}

func (w *SurgeWatch) sample(ctx context.Context) {
	c, err := w.env.Cluster(ctx)
	if err != nil {
		return
	}
	g := w.env.GroupService().Groups()
	for _, p := range c.Spec.Pools {
		if p.Name != w.env.MIG().Name {
			continue
		}
		for _, grp := range p.Groups {
			ins, err := g.ListInstances(ctx, cloud.GroupRef{Zone: grp.Zone, Name: grp.Name})
			if err != nil {
				continue
			}
			n := 0
			for _, in := range ins {
				if in.Status != cloud.StatusDeleting {
					n++
				}
			}
			w.mu.Lock()
			if m, ok := w.min[grp.Zone]; !ok || n < m {
				w.min[grp.Zone] = n
			}
			w.max[grp.Zone] = max(w.max[grp.Zone], n)
			w.samples++
			w.mu.Unlock()
		}
	}
}

// Stop ends the sampling (Verify stops it too).
func (w *SurgeWatch) Stop() {
	w.cancel()
	<-w.done
}

// Sizes reports the samples: their count and each zone's least and
// largest size.
func (w *SurgeWatch) Sizes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d samples: min %v, max %v", w.samples, w.min, w.max)
}

// Verify checks what the surge upgrade u did to the MIG pool: every
// instance replaced by the one its deterministic name says, zone after
// zone, each zone's size within [size, size+maxSurge] at every sample and
// surged once; the replacements are the pool's nodes, Ready at the target
// with their provider IDs and zone labels, running the release's
// containerd; the hosts they replaced are gone, Nodes with them.
func (w *SurgeWatch) Verify(ctx context.Context, u *api.Upgrade, version string) error {
	w.Stop()
	var pr problems
	env, m := w.env, w.env.MIG()
	p, ok := u.Pool(m.Name)
	if !ok {
		return fmt.Errorf("MIG surge: no pool %s in the upgrade", m.Name)
	}
	pr.check(p.Strategy == api.StrategySurge, "pool %s's strategy is %s, not surge", m.Name, p.Strategy)
	s, _ := u.Step(api.PoolStepID(m.Name))
	lb, _ := u.Step(api.PoolStepID("lb"))
	if s == nil || lb == nil {
		return fmt.Errorf("MIG surge: no step for pool %s or lb", m.Name)
	}
	pr.check(s.State == api.StepDone, "step %s is %s, not done", s.ID, s.State)
	pr.check(!s.StartedAt.Before(lb.FinishedAt), "the MIG pool started before the LB pool finished")
	w.mu.Lock()
	for _, z := range m.Zones {
		pr.check(w.min[z] >= m.Size, "zone %s went below its size (%d < %d)", z, w.min[z], m.Size)
		pr.check(w.max[z] <= m.Size+1, "zone %s went above size + maxSurge (%d)", z, w.max[z])
		pr.check(w.max[z] == m.Size+1, "zone %s never surged (max %d)", z, w.max[z])
	}
	w.mu.Unlock()

	nodes := u.PoolNodes(p)
	var live []string
	zoneDone := map[string]time.Time{}
	for _, n := range nodes {
		pr.check(n.State == api.StepDone, "%s is %s, not done", n.Node, n.State)
		// The replacement's name is the engine's deterministic one (its
		// unit tests pin it); here: once the node is done, another
		// instance of the zone's group stands for it (the wire's Current;
		// Replacement names it only while the surge is under way).
		group := groupOf(p, n.Zone)
		pr.check(liveName(&n) != n.Node, "%s was not replaced: it still stands as itself", n.Node)
		pr.check(group != "" && strings.HasPrefix(liveName(&n), group+"-"), "%s's replacement %s is not named after its zone's group %q", n.Node, liveName(&n), group)
		live = append(live, liveName(&n))
		if n.FinishedAt.After(zoneDone[n.Zone]) {
			zoneDone[n.Zone] = n.FinishedAt
		}
	}
	for i, z := range m.Zones[1:] {
		for _, n := range nodes {
			if n.Zone == z {
				pr.check(!n.StartedAt.Before(zoneDone[m.Zones[i]]), "zone %s started before zone %s was done", z, m.Zones[i])
			}
		}
	}
	got, err := env.PoolNodes(ctx, m.Name)
	if err != nil {
		return fmt.Errorf("MIG surge: %w", err)
	}
	a, b := slices.Clone(live), slices.Clone(got)
	slices.Sort(a)
	slices.Sort(b)
	pr.check(slices.Equal(a, b), "the pool's nodes are %v, not the replacements %v", got, live)
	var rel api.Release
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+version, nil, &rel); err != nil {
		return fmt.Errorf("MIG surge: release: %w", err)
	}
	if err := VerifyInstanceNodes(ctx, env, live, version, rel.Components.Containerd.Version); err != nil {
		pr.addf("%v", err)
	}
	if err := VerifyHostsGone(ctx, env, w.before); err != nil {
		pr.addf("%v", err)
	}
	return pr.err("MIG surge")
}

// VerifyInstanceNodes: each instance is a lab host, its Node Ready at
// version and schedulable, with its provider ID and zone label, and its
// containerd the release's.
func VerifyInstanceNodes(ctx context.Context, env *Env, names []string, version, containerd string) error {
	var p problems
	all, err := env.Lab.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("instance nodes: %w", err)
	}
	inst := map[string]cloud.Instance{}
	for _, in := range env.GroupService().Groups().Instances() {
		inst[in.Name] = in
	}
	for _, name := range names {
		i := slices.IndexFunc(all, func(n kube.NodeInfo) bool { return n.Name == name })
		if i < 0 {
			p.addf("no Node %s", name)
			continue
		}
		n := all[i]
		p.check(n.Ready, "Node %s not Ready", name)
		p.check(!n.Unschedulable, "Node %s unschedulable", name)
		p.check(n.KubeletVersion == "v"+version, "Node %s's kubelet is %s, not v%s", name, n.KubeletVersion, version)
		in, ok := inst[name]
		if !ok {
			p.addf("%s is not an instance of the lab's groups", name)
			continue
		}
		p.check(in.Status == cloud.StatusRunning, "instance %s is %s", name, in.Status)
		p.check(in.ProviderID == n.ProviderID, "%s: provider ID %s on the instance, %s on the Node", name, in.ProviderID, n.ProviderID)
		p.check(strings.HasPrefix(n.ProviderID, lab.ProviderIDScheme+n.Labels[lab.ZoneLabel]+"/"), "%s: provider ID %s, zone %q", name, n.ProviderID, n.Labels[lab.ZoneLabel])
		got, err := env.Lab.ContainerdVersion(ctx, name)
		if err != nil {
			p.addf("containerd on %s: %v", name, err)
			continue
		}
		p.check(got == containerd, "containerd on %s is %s, not %s", name, got, containerd)
	}
	return p.err("instance nodes")
}

// VerifyHostsGone: the instances' hosts are stopped and their Nodes
// deleted.
func VerifyHostsGone(ctx context.Context, env *Env, names []string) error {
	var p problems
	all, err := env.Lab.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("hosts gone: %w", err)
	}
	for _, name := range names {
		_, err := env.Lab.Host(name)
		p.check(err != nil, "the host of %s still runs", name)
		p.check(!slices.ContainsFunc(all, func(n kube.NodeInfo) bool { return n.Name == name }), "the Node %s is not deleted", name)
	}
	for _, in := range env.GroupService().Groups().Instances() {
		p.check(!slices.Contains(names, in.Name), "instance %s is not gone", in.Name)
	}
	return p.err("hosts gone")
}
