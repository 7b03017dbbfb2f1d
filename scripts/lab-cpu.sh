#!/usr/bin/env bash
# lab-cpu: where the machine's CPU goes while a lab runs, per lab host and per
# process (docs/lab.md, "Where the CPU goes"). Samples every process's CPU
# time (utime+stime from /proc/PID/stat) every INTERVAL seconds for DURATION
# seconds, adds up each process's increase, and attributes it to the lab host
# whose network namespace the process is in (the lab's hosts and instances
# each have one, /run/netns/<prefix><host>), or to "machine" for processes in
# the machine's namespace (the members run in the lab's namespace,
# <prefix>lab). A process that starts and ends between two samples is not
# seen: keep INTERVAL short against short-lived commands.
#
#   scripts/lab-cpu.sh [DURATION [INTERVAL [PREFIX]]]   (defaults 60 s, 2 s, mlab)
#
# Prints a table per host (CPU-seconds and share of the machine's cores over
# the window) and the top processes, ready for docs/lab.md.
set -euo pipefail
duration=${1:-60} interval=${2:-2} prefix=${3:-mlab}
hz=$(getconf CLK_TCK)
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# netns inode -> host name, for the lab's namespaces
: >"$tmp/ns"
for f in /run/netns/"$prefix"*; do
	[ -e "$f" ] || continue
	printf '%s %s\n' "$(stat -L -c %i "$f")" "$(basename "$f")" >>"$tmp/ns"
done
[ -s "$tmp/ns" ] || { echo "lab-cpu: no network namespace /run/netns/$prefix*: is a lab up?" >&2; exit 1; }

# sample: "pid ticks host comm" for every process, in three processes (a
# fork per process would itself cost a share of what is measured). A
# process belongs to the lab host whose namespace it or its nearest
# ancestor is in: a pod's processes have network namespaces of their own,
# but descend from the host's containerd shim.
sample() {
	{
		# processes come and go while these read: a vanished one is no error
		find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -printf 'NS %p %l\n' 2>/dev/null || true
		cat /proc/[0-9]*/stat 2>/dev/null || true
	} | awk -v nsfile="$tmp/ns" -v prefix="$prefix" '
		BEGIN { while ((getline l < nsfile) > 0) { split(l, a, " "); host[a[1]] = a[2] } }
		$1 == "NS" { split($2, p, "/"); ns = $3; gsub(/[^0-9]/, "", ns); netns[p[3]] = ns; next }
		{
			s = $0; i = index(s, "("); j = match(s, /\) [A-Z] /)
			c = substr(s, i + 1, j - i - 1); gsub(/ /, "_", c)
			split(substr(s, j + 2), f, " ")
			pid = $1; comm[pid] = c; ppid[pid] = f[2]; ticks[pid] = f[12] + f[13]
		}
		END {
			for (pid in ticks) {
				h = "machine"
				for (q = pid; q != "" && q != "0"; q = ppid[q]) if ((q in netns) && (netns[q] in host)) { h = host[netns[q]]; break }
				sub("^" prefix, "", h)
				print pid, ticks[pid], h, comm[pid]
			}
		}'
}

start=$(date +%s)
sample >"$tmp/prev"
: >"$tmp/delta"
while [ $(($(date +%s) - start)) -lt "$duration" ]; do
	sleep "$interval"
	sample >"$tmp/cur"
	# the increase of each pid seen twice; a new pid counts from 0 (it started
	# within the interval)
	awk 'NR == FNR { prev[$1] = $2; next } { d = $2 - (($1 in prev) ? prev[$1] : 0); if (d > 0) print $3, $4, d }' \
		"$tmp/prev" "$tmp/cur" >>"$tmp/delta"
	mv "$tmp/cur" "$tmp/prev"
done
window=$(($(date +%s) - start))

awk -v hz="$hz" -v cores="$cores" -v window="$window" '
	{ h = $1; byhost[h] += $3; byproc[h " " $2] += $3; total += $3 }
	END {
		printf "window %d s, %d cores: %.1f CPU-seconds in all, %.0f%% of the machine\n\n", window, cores, total / hz, 100 * total / hz / (window * cores)
		print "| host | CPU-s | % of machine |"; print "|---|---:|---:|"
		n = 0; for (h in byhost) keys[++n] = h
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (byhost[keys[j]] > byhost[keys[i]]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
		for (i = 1; i <= n; i++) printf "| %s | %.1f | %.1f |\n", keys[i], byhost[keys[i]] / hz, 100 * byhost[keys[i]] / hz / (window * cores)
		print ""; print "| host | process | CPU-s | % of machine |"; print "|---|---|---:|---:|"
		m = 0; for (k in byproc) pk[++m] = k
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (byproc[pk[j]] > byproc[pk[i]]) { t = pk[i]; pk[i] = pk[j]; pk[j] = t }
		for (i = 1; i <= m && i <= 25; i++) { split(pk[i], hp, " "); printf "| %s | %s | %.1f | %.1f |\n", hp[1], hp[2], byproc[pk[i]] / hz, 100 * byproc[pk[i]] / hz / (window * cores) }
	}' "$tmp/delta"
