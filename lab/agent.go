package lab

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// InstallAgent installs molt-agent into a running host the way an operator
// does, with systemd/install.sh (--root pointing at the host's root from
// outside), then reloads the host's systemd and starts the unit. kv are
// install.sh's KEY=VALUE settings (coordinator=..., token=..., node=...).
// Use it from Config.AfterHost.
func InstallAgent(ctx context.Context, h *Host, installScript, binary string, kv ...string) error {
	args := append([]string{installScript, "--root", h.Root(), "--binary", binary}, kv...)
	if out, err := exec.CommandContext(ctx, "sh", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: install.sh on %s: %v: %s", ErrHost, h.Name, err, strings.TrimSpace(string(out)))
	}
	_, err := h.Exec(ctx, "sh", "-ec", "systemctl daemon-reload && systemctl restart molt-agent.service")
	return err
}
