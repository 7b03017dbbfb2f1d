//go:build faults

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/moltproject/molt/agent"
)

// The fault build of molt-agent (go build -tags faults), for the tests of
// the watchdog (systemd/watchdog_nspawn_test.go): they wedge a loop of a
// real agent under systemd and watch systemd restart it. Production
// binaries are built without the tag and carry no such hook.
func init() { loopHook = wedgeHook }

// wedgeFile is where a test names the loop to wedge, in the agent's data
// directory: the unit's only writable place of its own.
const wedgeFile = "test-wedge"

// wedgeHook wedges a loop once: when the wedge file names it, the file is
// removed (so the agent systemd starts next runs normally) and the loop
// blocks until the agent is stopped, making no more progress.
func wedgeHook(cfg agent.Config, log *slog.Logger) func(context.Context, string) {
	path := filepath.Join(cfg.HostRoot, cfg.DataDir, wedgeFile)
	return func(ctx context.Context, loop string) {
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) != loop {
			return
		}
		if err := os.Remove(path); err != nil {
			log.Error("test wedge: cannot remove the wedge file", "path", path, "err", err)
			return
		}
		log.Warn("test wedge: loop wedged", "loop", loop)
		<-ctx.Done()
	}
}
