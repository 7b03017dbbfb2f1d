#!/usr/bin/env bash
# lowprio.sh CMD [ARG...]: runs CMD at the lowest CPU priority the machine
# gives, and exits with its exit code. scripts/test-all.sh runs the checks
# and the race build beside the demo with it. With LOWPRIO_PIDFILE set, the
# new session's id is written there: `kill -- -ID` stops CMD and everything
# it started (the session is outside the caller's process group, so a
# signal to that group no longer reaches it).
#
# Why more than `nice -n 19`: with kernel autogroup on
# (/proc/sys/kernel/sched_autogroup_enabled = 1, the default of many
# distributions), the scheduler first shares the CPU between autogroups —
# one per session — and only inside a group by nice (sched(7),
# "autogroup"). Each lab host (systemd-nspawn) is a session of its own, so
# a niced job in the CI script's session still got its session's full
# share beside every host: in a cold run the race build beside the demo
# doubled the demo's upgrade (4:47 → 9:32). So CMD gets a session, hence
# an autogroup, of its own (setsid), and that group's nice is set to 19
# (/proc/self/autogroup); CMD keeps nice 19 too, for machines where
# autogroup is off or absent, where that is the whole story and the
# autogroup step is skipped quietly.
set -euo pipefail

[[ $# -ge 1 ]] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }

if [[ "${LOWPRIO_IN_SESSION:-}" != 1 ]]; then
	# setsid forks only when the caller is a process group leader; -w then
	# waits and passes the exit code on.
	command -v setsid >/dev/null || exec nice -n 19 "$@"
	LOWPRIO_IN_SESSION=1 exec setsid -w "$BASH" "$0" "$@"
fi
unset LOWPRIO_IN_SESSION
# This process leads the new session and becomes CMD (exec): its pid is
# the session's process group.
if [[ -n "${LOWPRIO_PIDFILE:-}" ]]; then echo $$ >"$LOWPRIO_PIDFILE"; fi
unset LOWPRIO_PIDFILE
# The write sets this session's autogroup, which CMD (exec'd below) and
# its children stay in. It fails where autogroup is compiled out (no file);
# where it is off the file is there and the write does no harm.
{ echo 19 >/proc/self/autogroup; } 2>/dev/null || true
exec nice -n 19 "$@"
