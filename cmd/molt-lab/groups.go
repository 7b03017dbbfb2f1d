package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moltproject/molt/lab"
)

// serveGroups serves the lab's instance groups (the "lab" cloud adapter's
// service) in the foreground until interrupted: the process that owns the
// instances' hosts. With an agent binary, every instance it boots gets
// molt-agent, enrolling with the token in tokenFile and the CA pin.
func serveGroups(ctx context.Context, l *lab.Lab, cfg lab.GroupsConfig, agentBin, coordinator, tokenFile, caPin, cluster string) error {
	if agentBin != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--agent needs --token-file: %w", err)
		}
		token := strings.TrimSpace(string(b))
		script := filepath.Join(l.Config().ModuleDir, "systemd", "install.sh")
		cfg.AfterInstance = func(ctx context.Context, h *lab.Host, spec lab.HostSpec) error {
			return lab.InstallAgent(ctx, h, script, agentBin,
				"coordinator="+coordinator, "token="+token, "ca_pin="+caPin, "cluster="+cluster, "node="+spec.Name)
		}
	}
	svc, err := l.ServeGroups(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("==> serving the lab's instance groups at %s (namespace %s) until interrupted\n", svc.Endpoint(), l.Network().LabNS())
	<-ctx.Done()
	return svc.Close()
}
