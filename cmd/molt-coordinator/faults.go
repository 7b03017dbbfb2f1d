//go:build faults

package main

import (
	"log/slog"
	"os"
	"path/filepath"
)

// The fault build of molt-coordinator (go build -tags faults), for the
// tests of the watchdog (systemd/watchdog_nspawn_test.go): they wedge the
// Raft apply loop of a real member under systemd and watch systemd
// restart it. Production binaries are built without the tag and carry no
// such hook.
func init() { applyHook = wedgeHook }

// wedgeFile is the file in the data directory (the unit's only writable
// place) whose presence wedges the apply loop.
const wedgeFile = "test-wedge"

// wedgeHook wedges the apply loop once: the next Apply after the wedge
// file appears removes it (so the member systemd starts next runs
// normally) and never returns, as an FSM stuck on a lock would.
func wedgeHook(dataDir string, log *slog.Logger) func() {
	path := filepath.Join(dataDir, wedgeFile)
	return func() {
		if _, err := os.Stat(path); err != nil {
			return
		}
		if err := os.Remove(path); err != nil {
			log.Error("test wedge: cannot remove the wedge file", "path", path, "err", err)
			return
		}
		log.Warn("test wedge: raft apply loop wedged")
		select {}
	}
}
