// Package systemd is molt's only door to systemd: unit control over D-Bus
// (restart, start, stop, state) and the sd_notify protocol (READY, STATUS,
// watchdog pings). Everything else in molt sees small interfaces defined
// where they are used, so no other package imports go-systemd.
//
// The unit files and install script for the agent and the coordinator live
// beside this package: molt-agent.service, molt-coordinator.service and
// install.sh, with the environment files' templates (agent.env,
// coordinator.env) and the packages' maintainer scripts (deb/) that make
// release packs (docs/release.md).
package systemd
