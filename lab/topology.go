package lab

import (
	"fmt"
	"net/netip"
)

// Addresses inside the lab. They exist only in the lab's network namespaces,
// never on the machine's own interfaces.
const (
	// Subnet is the lab bridge's subnet.
	Subnet = "10.77.0.0/24"
	// GatewayIP is the bridge's address inside the lab namespace; the lab
	// driver's own API clients dial from there.
	GatewayIP = "10.77.0.1"
	// ServiceCIDR is the cluster's service range.
	ServiceCIDR = "10.96.0.0/12"
	// ServiceClusterIP is the kubernetes.default service address.
	ServiceClusterIP = "10.96.0.1"
	// APIPort is where every apiserver and the control-plane LB listen.
	APIPort = 6443
)

// Role is a host's node-pool role (SPEC §2).
type Role string

// Node-pool roles.
const (
	RoleControlPlaneLB Role = "controlPlaneLB"
	RoleControlPlane   Role = "controlPlane"
	RoleLoadBalancer   Role = "loadBalancer"
	RoleWorker         Role = "worker"
)

// HostSpec is one host of a topology.
type HostSpec struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	IP   string `json:"ip"`
	// Zone and ProviderID are set for the instances of the lab's instance
	// groups (groups.go): the kubelet registers its Node with them
	// (topology.kubernetes.io/zone, spec.providerID).
	Zone       string `json:"zone,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
}

// Topology is the set of hosts a lab runs.
type Topology struct {
	Name  string     `json:"name"`
	Hosts []HostSpec `json:"hosts"`
}

// FullTopology is one control-plane LB, three control-plane hosts, one
// data-plane LB host and two workers.
func FullTopology() Topology {
	return Topology{Name: "full", Hosts: []HostSpec{
		{Name: "cplb-1", Role: RoleControlPlaneLB, IP: "10.77.0.10"},
		{Name: "cp-1", Role: RoleControlPlane, IP: "10.77.0.11"},
		{Name: "cp-2", Role: RoleControlPlane, IP: "10.77.0.12"},
		{Name: "cp-3", Role: RoleControlPlane, IP: "10.77.0.13"},
		{Name: "lb-1", Role: RoleLoadBalancer, IP: "10.77.0.20"},
		{Name: "worker-1", Role: RoleWorker, IP: "10.77.0.31"},
		{Name: "worker-2", Role: RoleWorker, IP: "10.77.0.32"},
	}}
}

// SmallTopology is one control-plane LB, one control-plane host and one worker.
func SmallTopology() Topology {
	return Topology{Name: "small", Hosts: []HostSpec{
		{Name: "cplb-1", Role: RoleControlPlaneLB, IP: "10.77.0.10"},
		{Name: "cp-1", Role: RoleControlPlane, IP: "10.77.0.11"},
		{Name: "worker-1", Role: RoleWorker, IP: "10.77.0.31"},
	}}
}

// WithRole returns the hosts that have role r, in topology order.
func (t Topology) WithRole(r Role) []HostSpec {
	var out []HostSpec
	for _, h := range t.Hosts {
		if h.Role == r {
			out = append(out, h)
		}
	}
	return out
}

// APIEndpoint is host:port of the control-plane load balancer, the address
// every kubeconfig uses.
func (t Topology) APIEndpoint() string {
	lbs := t.WithRole(RoleControlPlaneLB)
	if len(lbs) == 0 {
		return fmt.Sprintf("%s:%d", t.WithRole(RoleControlPlane)[0].IP, APIPort)
	}
	return fmt.Sprintf("%s:%d", lbs[0].IP, APIPort)
}

// Validate checks names and addresses are unique and inside Subnet.
func (t Topology) Validate() error {
	pfx := netip.MustParsePrefix(Subnet)
	seen := map[string]bool{}
	if len(t.WithRole(RoleControlPlane)) == 0 {
		return fmt.Errorf("%w: topology %s has no control-plane host", ErrTopology, t.Name)
	}
	for _, h := range t.Hosts {
		ip, err := netip.ParseAddr(h.IP)
		if err != nil || !pfx.Contains(ip) || h.IP == GatewayIP {
			return fmt.Errorf("%w: host %s address %q not a host address in %s", ErrTopology, h.Name, h.IP, Subnet)
		}
		if seen[h.Name] || seen[h.IP] {
			return fmt.Errorf("%w: duplicate host name or address %s/%s", ErrTopology, h.Name, h.IP)
		}
		seen[h.Name], seen[h.IP] = true, true
	}
	return nil
}
