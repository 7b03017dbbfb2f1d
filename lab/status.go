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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cs, err := l.Clientset()
	if err != nil {
		st.APIError = err.Error()
		return st
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		st.APIError = err.Error()
		return st
	}
	for i := range st.Hosts {
		for _, n := range nodes.Items {
			if n.Name == st.Hosts[i].Name {
				st.Hosts[i].NodeReady = NodeReady(&n)
				st.Hosts[i].KubeletVersion = n.Status.NodeInfo.KubeletVersion
			}
		}
	}
	return st
}

// Print writes st as a table plus how to reach the API.
func (st Status) Print(w io.Writer, labNS string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tADDRESS\tRUNNING\tNODE READY\tKUBELET")
	for _, h := range st.Hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\n", h.Name, h.Role, h.IP, h.Running, h.NodeReady, h.KubeletVersion)
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
