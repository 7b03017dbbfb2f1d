package lab

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/moltproject/molt/cloud/memory"
	"github.com/moltproject/molt/kube"
)

// HostStatus is one host as `status` sees it.
type HostStatus struct {
	HostSpec
	// Running: its systemd-nspawn process exists.
	Running   bool
	NspawnPID int
	// Node fields are empty when the API is unreachable or the Node absent.
	NodeReady      bool
	KubeletVersion string
	// Instance is the status of an instance group's instance ("" for a
	// host of the topology).
	Instance string
}

// Status is the lab as it is now.
type Status struct {
	Version    string
	Topology   string
	Kubeconfig string
	Hosts      []HostStatus
	// APIError is why the API could not be asked, if it could not.
	APIError string
}

// Status looks at the hosts and, when the API answers, the Nodes.
func (l *Lab) Status(ctx context.Context) Status {
	st := Status{Version: l.cfg.Version, Topology: l.cfg.Topology.Name, Kubeconfig: l.Kubeconfig()}
	for _, h := range l.cfg.Topology.Hosts {
		hs := HostStatus{HostSpec: h}
		if rh, ok := findHost(h.Name, l.net.HostNS(h.Name)); ok {
			hs.Running, hs.NspawnPID = true, rh.nspawnPID
		}
		st.Hosts = append(st.Hosts, hs)
	}
	// The instance groups' hosts, as their book lists them.
	if book, err := memory.Load(memory.Options{File: groupsBookPath(l.cfg.StateDir)}); err == nil {
		for _, m := range book.Machines() {
			in := machineOf(m)
			hs := HostStatus{HostSpec: HostSpec{Name: in.Name, Role: RoleWorker, IP: in.IP, Zone: in.Zone, ProviderID: in.providerID()}, Instance: string(m.Status)}
			if rh, ok := findHost(in.Name, l.net.HostNS(in.Name)); ok {
				hs.Running, hs.NspawnPID = true, rh.nspawnPID
			}
			st.Hosts = append(st.Hosts, hs)
		}
	}
	nodes, err := l.Nodes(ctx)
	if err != nil {
		st.APIError = err.Error()
		return st
	}
	for i := range st.Hosts {
		for _, n := range nodes {
			if n.Name == st.Hosts[i].Name {
				st.Hosts[i].NodeReady = n.Ready
				st.Hosts[i].KubeletVersion = n.KubeletVersion
			}
		}
	}
	return st
}

// Nodes lists the cluster's Nodes (name, Ready, kubelet version,
// unschedulable), sorted by name.
func (l *Lab) Nodes(ctx context.Context) ([]kube.NodeInfo, error) {
	kc, err := l.Kube()
	if err != nil {
		return nil, err
	}
	return kc.ListNodes(ctx)
}

// StaticPodImages maps every kube-system mirror pod's containers to their
// images, keyed "POD/CONTAINER": "kube-apiserver-cp-1/kube-apiserver" →
// "registry.k8s.io/kube-apiserver:v1.34.4". Mirror pods are the kubelets'
// report of the static pods they run, so this is what the control plane
// runs now, as far as the API server has heard.
func (l *Lab) StaticPodImages(ctx context.Context) (map[string]string, error) {
	kc, err := l.Kube()
	if err != nil {
		return nil, err
	}
	pods, err := kc.ListPods(ctx, "kube-system", "")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods {
		if !p.Mirror {
			continue
		}
		for _, c := range p.Containers {
			out[p.Name+"/"+c.Name] = c.Image
		}
	}
	return out, nil
}

// Print writes st as a table plus how to reach the API.
func (st Status) Print(w io.Writer, labNS string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tADDRESS\tRUNNING\tNODE READY\tKUBELET\tINSTANCE")
	for _, h := range st.Hosts {
		inst := "-"
		if h.Instance != "" {
			inst = h.ProviderID + " " + h.Instance
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\t%s\n", h.Name, h.Role, h.IP, h.Running, h.NodeReady, h.KubeletVersion, inst)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "topology %s, version v%s\n", st.Topology, st.Version)
	if st.APIError != "" {
		fmt.Fprintf(w, "API: unreachable: %s\n", st.APIError)
	}
	fmt.Fprintf(w, "kubeconfig: %s\nreach the API: ip netns exec %s kubectl --kubeconfig %s get nodes\n", st.Kubeconfig, labNS, st.Kubeconfig)
}

// killNamespacePIDs kills any process still inside the lab's namespaces
// (normally none once the hosts are stopped) so the namespaces can go.
func killNamespacePIDs(ctx context.Context, namespaces []string) error {
	for _, ns := range namespaces {
		if !nsExists(ns) {
			continue
		}
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return nil
}

// DescribePods writes to the lab's Out every pod of namespaces with its
// node, phase, readiness and images, and the end of the log of every pod
// that is not Ready: what the API server knows of a workload or an add-on
// that did not come up. Tests call it when they fail.
func (l *Lab) DescribePods(ctx context.Context, namespaces ...string) {
	kc, err := l.Kube()
	if err != nil {
		fmt.Fprintf(l.cfg.Out, "--- pods: %v\n", err)
		return
	}
	for _, ns := range namespaces {
		pods, err := kc.ListPods(ctx, ns, "")
		fmt.Fprintf(l.cfg.Out, "--- pods in %s (err %v)\n", ns, err)
		for _, p := range pods {
			var images []string
			for _, c := range p.Containers {
				images = append(images, c.Image)
			}
			fmt.Fprintf(l.cfg.Out, "    %s on %s: %s ready=%v %s\n", p.Name, p.NodeName, p.Phase, p.Ready, strings.Join(images, ","))
		}
		for _, p := range pods {
			if p.Ready || p.Mirror {
				continue
			}
			out, err := kc.PodLogs(ctx, ns, p.Name, "")
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			fmt.Fprintf(l.cfg.Out, "--- log of %s/%s (err %v, last %d lines)\n%s\n", ns, p.Name, err, min(len(lines), 20), strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	}
}
