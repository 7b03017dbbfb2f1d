package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/moltproject/molt/api"
)

// The tests read an upgrade as the API shows it (api.Upgrade) and import
// no engine package (internal/purity holds them to that): what they need
// beyond the wire's fields is here.

// liveName is the instance that stands for the node: its replacement once
// replaced (Current), else the node itself.
func liveName(n *api.NodeTask) string {
	if n.Current != "" {
		return n.Current
	}
	return n.Node
}

// groupOf is a MIG pool's instance group in zone ("" if none).
func groupOf(p *api.PoolTrack, zone string) string {
	i := slices.IndexFunc(p.Groups, func(g api.InstanceGroup) bool { return g.Zone == zone })
	if i < 0 {
		return ""
	}
	return p.Groups[i].Name
}

// kubeVersion is a Kubernetes release "1.N.X" (a leading v allowed), as
// the version rules compare them; the zero value is no version.
type kubeVersion [3]int

func parseKubeVersion(s string) (kubeVersion, error) {
	var v kubeVersion
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return kubeVersion{}, fmt.Errorf("version %q: want MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return kubeVersion{}, fmt.Errorf("version %q: component %q", s, p)
		}
		v[i] = n
	}
	return v, nil
}

func (v kubeVersion) IsZero() bool            { return v == kubeVersion{} }
func (v kubeVersion) Less(w kubeVersion) bool { return slices.Compare(v[:], w[:]) < 0 }
func (v kubeVersion) String() string          { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// operationID is the ID the coordinator gives the agent operation a node
// runs at a cursor and attempt (upgrade/node/cursor/aN), as agents report
// it.
func operationID(u *api.Upgrade, node string, cursor, attempt int) string {
	return fmt.Sprintf("%s/%s/%d/a%d", u.ID, node, cursor, attempt)
}
