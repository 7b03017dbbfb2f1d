package coordinator

import (
	"maps"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// MaxStaticPodRefLen bounds a static pod's name and image as stored; a
// longer one is left out of the record (not observed), never refused:
// the beat carrying it is the node's liveness.
const MaxStaticPodRefLen = 512

// staticPodImages is what beat h says of the node's static pods, as the
// replicated record keeps it (statemachine.AgentRecord.StaticPods): the
// image of each running container of a pod named "<name>-<node>" — the
// kubelet names a static pod after its manifest and its node — by name;
// a DaemonSet's or Deployment's pod in kube-system (a generated suffix)
// is not one. Two running containers of one pod (a restart caught
// midway) keep the lexically smaller image, so a beat reads the same
// whatever order the runtime listed them in. nil when none runs.
func staticPodImages(h api.AgentHealth) map[string]string {
	var out map[string]string
	suffix := "-" + h.Node
	for _, p := range h.StaticPods {
		name, ok := strings.CutSuffix(p.Name, suffix)
		if !p.Ready || !ok || name == "" || p.Image == "" || len(p.Name) > MaxStaticPodRefLen || len(p.Image) > MaxStaticPodRefLen {
			continue
		}
		if prev, seen := out[name]; seen && prev <= p.Image {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = p.Image
	}
	return out
}

// staticPodsReadable says whether every member reads the static pods of
// an AgentHealthCmd (statemachine.SinceStaticPods): until then a beat
// carries none, and a change of images alone commits nothing.
func (c *Coordinator) staticPodsReadable() bool {
	return c.checkReadable(needOf(statemachine.AgentHealthCmd{StaticPods: map[string]string{}})) == nil
}

// beatChanges reports whether beat h changes agent a's replicated record:
// back from missing, healthy ↔ unhealthy, new component versions, other
// static pods' images (once every member reads them; asked only when the
// images differ, so the common beat costs no look at the members).
func (c *Coordinator) beatChanges(a statemachine.AgentRecord, h api.AgentHealth) bool {
	if a.Missing || a.Healthy != beatHealthy(h) || a.Kubelet != h.Kubelet.Version || a.Containerd != h.Containerd.Version {
		return true
	}
	return !maps.Equal(a.StaticPods, staticPodImages(h)) && c.staticPodsReadable()
}

// healthCmd is the entry that records beat h at now: with its static
// pods' images when every member reads them.
func (c *Coordinator) healthCmd(h api.AgentHealth, now time.Time) statemachine.AgentHealthCmd {
	cmd := statemachine.AgentHealthCmd{Cluster: h.Cluster, Node: h.Node, Healthy: beatHealthy(h),
		Kubelet: h.Kubelet.Version, Containerd: h.Containerd.Version, Now: now}
	if c.staticPodsReadable() {
		cmd.StaticPods = staticPodImages(h)
		if cmd.StaticPods == nil {
			cmd.StaticPods = map[string]string{}
		}
	}
	return cmd
}
