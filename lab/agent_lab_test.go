//go:build lab

package lab

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAgentInstallsIntoLabHosts installs molt-agent with systemd/install.sh
// into every host of the small lab and checks the unit is active. No
// coordinator listens yet (10.77.0.1:7080 refuses inside the lab), so this
// proves installation and start only.
func TestAgentInstallsIntoLabHosts(t *testing.T) {
	requireLabTools(t)
	root := moduleRoot(t)
	bin := filepath.Join(t.TempDir(), "molt-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/molt-agent")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	l := newTestLab(t, SmallTopology(), func(cfg *Config) {
		cfg.AfterHost = func(ctx context.Context, h *Host, spec HostSpec) error {
			return InstallAgent(ctx, h, filepath.Join(root, "systemd", "install.sh"), bin,
				// No coordinator answers: the agent keeps trying to enroll
				// with a well-formed token and pin, and stays active.
				"coordinator=https://"+GatewayIP+":7080", "token=abcdef.0123456789abcdef", "ca_pin=sha256:"+strings.Repeat("0", 64), "cluster=lab", "node="+spec.Name)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, l.Up(ctx))
	for _, h := range l.Config().Topology.Hosts {
		out, err := l.Exec(ctx, h.Name, "systemctl", "is-active", "molt-agent.service")
		require.NoError(t, err, h.Name)
		require.Equal(t, "active\n", string(out), h.Name)
	}
}
