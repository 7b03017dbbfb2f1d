#!/usr/bin/env bash
# perf.sh — molt's performance table (docs/performance.md), measured in one
# go on this machine: every row's benchmark runs here, one after another,
# and the table is printed as Markdown (also written to bin/perf.md).
#
#   P1 makespan of a simulated 1,000-node upgrade vs the plan's critical path
#   P2 15,000 agents heartbeating at a 3-member coordinator: leader and follower path
#      (PERF_AGENTS=N: N agents at the same 1,500 beats/s, a shorter run on a busy machine)
#   P3 failover: leader killed, frozen or partitioned mid-upgrade → the next operation an agent runs
#   P4 commit latency: raftstore (3 members, fsync) vs etcd 3.6.4 (3 members on loopback, fsync)
#   P5 agent idle RSS; plan of 15,000 nodes; one tick of 15,000 nodes (Decide,
#      and the leader's whole tick with liveness)
#   lab: one upgrade of the lab without faults (molt-chaos --profile none) vs
#      the sum of its steps' lower bounds (as root; PERF_LAB=0 leaves it out)
#
# Needs the binaries (make build), etcd from scripts/install-deps.sh and,
# for the lab row, root and the lab's parts (make deps; one lab per
# machine). Runs about 25 minutes on 2 cores (15 without the lab row). Other work on the machine skews the
# figures: the load average before and after is printed with the table.
set -euo pipefail

main() {
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-bin}
CACHE=${MOLT_BUILD_CACHE:-${MOLT_CACHE:-/var/cache/molt}}
ETCD=${ETCD:-$CACHE/etcd/v3.6.4/bin/etcd}
out=$(mktemp -d /var/tmp/molt-perf.XXXXXX)
trap 'cleanup' EXIT
cleanup() {
	[[ -n "${etcd_pids:-}" ]] && kill $etcd_pids 2>/dev/null || true
	[[ -n "${agent_pid:-}" ]] && kill "$agent_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf --one-file-system "$out"
}
log() { printf '[perf %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
[[ -x "$ETCD" ]] || { echo "perf: no etcd at $ETCD (run scripts/install-deps.sh)"; exit 1; }
[[ -x "$BIN/molt-agent" ]] || { echo "perf: no $BIN/molt-agent (run make build)"; exit 1; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')

# metric FILE BENCH UNIT: the value before UNIT on BENCH's result line, or
# "failed" when that benchmark failed.
metric() {
	local v
	v=$(awk -v b="$2" -v u="$3" '$1 ~ b { for (i = 2; i <= NF; i++) if ($i == u) { print $(i-1); exit } }' "$1")
	echo "${v:-failed}"
}
bench() { # bench KEY PATTERN PKG BENCHTIME: go test -bench PATTERN, output in $out/KEY.txt
	log "benchmark $2 ($3, -benchtime $4)"
	if ! $GO test -run '^$' -bench "$2" -benchtime "$4" -timeout 60m "$3" >"$out/$1.txt" 2>&1; then
		# A failed row says so in the table; the others are still measured.
		failed+=("$1")
		grep -v 'level=INFO' "$out/$1.txt" | tail -n 20 >&2
	fi
}
failed=()

bench makespan 'Makespan1000' ./phases/ 1x
bench plan 'Plan15k$' ./phases/ 20x
bench tick 'Tick15k$' ./phases/ 200x
bench leadertick 'LeaderTick15k$' ./coordinator/ 200x
AGENTS=${PERF_AGENTS:-15000}
MOLT_BENCH_AGENTS=$AGENTS bench heartbeats 'Heartbeats3Members' ./coordinator/ 1x
bench failover 'FailoverToNextStep' ./coordinator/ 10x
bench apply 'ApplyLatency/members=3' ./raftstore/ 2000x
bench fsync 'Fsync' ./raftstore/ 1000x

log "etcd $("$ETCD" --version | sed -n 1p | awk '{print $3}'): 3 members on loopback"
ports=($(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))'))
cluster=""
for i in 0 1 2; do cluster+="${cluster:+,}e$i=http://127.0.0.1:${ports[$((3+i))]}"; done
etcd_pids=""
for i in 0 1 2; do
	"$ETCD" --name "e$i" --data-dir "$out/etcd$i" \
		--listen-client-urls "http://127.0.0.1:${ports[$i]}" --advertise-client-urls "http://127.0.0.1:${ports[$i]}" \
		--listen-peer-urls "http://127.0.0.1:${ports[$((3+i))]}" --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((3+i))]}" \
		--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token molt-perf \
		--log-level error >"$out/etcd$i.log" 2>&1 &
	etcd_pids+=" $!"
done
(cd scripts/perf/etcdput && GOWORK=off $GO build -o "$out/etcdput" .)
etcd_best="" etcd_all=""
for i in 0 1 2; do
	r=$("$out/etcdput" -endpoints "http://127.0.0.1:${ports[$i]}" -n 2000)
	etcd_all+="${etcd_all:+ / }$(echo "$r" | awk '{print $1}')"
	if [[ -z "$etcd_best" ]] || awk -v a="$r" -v b="$etcd_best" 'BEGIN { split(a, x); split(b, y); exit !(x[1] < y[1]) }'; then etcd_best=$r; fi
done
kill $etcd_pids; wait $etcd_pids 2>/dev/null || true; etcd_pids=""

log "agent idle RSS: molt-agent against an unreachable coordinator for 30 s, no containerd"
mkdir -p "$out/agent"
# Its metrics listener on loopback: the Go runtime's own figures (heap, stacks) say what the
# anonymous part of the RSS holds.
"$BIN/molt-agent" --coordinator https://127.0.0.1:1 --cluster perf --node n1 --token abcdef.0123456789abcdef \
	--ca-pin sha256:$(printf '0%.0s' {1..64}) --host-root "$out/agent" --data-dir /data --listen 127.0.0.1:17493 >"$out/agent.log" 2>&1 &
agent_pid=$!
sleep 30
agent_rss="n/a (the agent exited: $(tail -1 "$out/agent.log"))"
if [[ -e "/proc/$agent_pid/status" ]]; then
	# kB → MiB of one line of /proc/PID/status
	st() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$agent_pid/status"; }
	# bytes → MiB of one go_memstats metric
	gm() { curl -fsS http://127.0.0.1:17493/metrics | awk -v k="go_memstats_$1_bytes" '$1 == k { printf "%.1f", $2 / 1048576 }'; }
	agent_rss="$(st VmRSS) MiB: $(st RssAnon) MiB anonymous (heap in use $(gm heap_inuse) MiB, of it live $(gm heap_alloc) MiB; stacks $(gm stack_inuse) MiB; the rest the runtime's GC metadata and idle heap), $(st RssFile) MiB pages of the binary file (shared, reclaimable)"
fi
kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""

lab_row="not measured here (PERF_LAB=0, or not root): the lab row of each completed \`make chaos\` run (docs/chaos.md)" lab_ratio="—"
if [[ "${PERF_LAB:-1}" != 0 && $(id -u) == 0 ]]; then
	log "lab: one upgrade without faults (molt-chaos --profile none)"
	$GO build -o "$BIN/" ./cmd/molt-chaos
	if "$BIN/molt-chaos" --profile none --runs 1 --seed 1 --bin "$BIN" --work-dir "$out/lab" >"$out/lab.txt" 2>&1; then
		# "lab row: wall 378s vs bound 328s: 1.15× (steps took/bound: …)"
		lab_row=$(sed -n 's/^ *lab row: \(wall [0-9]*s vs bound [0-9]*s\): \([0-9.]*\)×.*/\1/p' "$out/lab.txt" | head -1)
		lab_ratio=$(sed -n 's/^ *lab row: wall [0-9]*s vs bound [0-9]*s: \([0-9.]*\)×.*/\1/p' "$out/lab.txt" | head -1)
		lab_row=${lab_row:-failed} lab_ratio=${lab_ratio:-—}
	else
		failed+=(lab) lab_row=failed
		tail -n 20 "$out/lab.txt" >&2
	fi
fi

M="$out/makespan.txt" H="$out/heartbeats.txt" F="$out/failover.txt" R="$out/apply.txt"
raft_p50=$(metric "$R" 'ApplyLatency' p50-ms) raft_p99=$(metric "$R" 'ApplyLatency' p99-ms)
read -r etcd_p50 etcd_p99 <<<"$etcd_best"
lcpu=$(metric "$H" 'leader' cpu-µs/beat) fcpu=$(metric "$H" 'follower' cpu-µs/beat)
lkcpu=$(metric "$H" 'leader-kept' cpu-µs/beat) fkcpu=$(metric "$H" 'follower-kept' cpu-µs/beat)
KEPT=$(( AGENTS < 6000 ? AGENTS : 6000 ))
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "—" }'; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cat <<EOF
Measured $started on $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -sr), $(df -T . | awk 'NR == 2 { print $2 }') on the data disk; load average before $load_before, after $load_after; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown).

| row | what | figure | ratio (goal) |
|---|---|---|---|
| P1 | makespan of a simulated 1,000-node upgrade, mean of 10 (node times log-normal σ 0.25 around the defaults) vs the plan's critical path | $(metric "$M" Makespan1000 makespan-h) h vs $(metric "$M" Makespan1000 critical-path-h) h; worst of 10 $(metric "$M" Makespan1000 worst-ratio)×; every node at its mean $(metric "$M" Makespan1000 ratio-fixed-times)×; vs the bound of the simulated times $(metric "$M" Makespan1000 ratio-to-realized-bound)× | $(metric "$M" Makespan1000 ratio) (≤ 1.05) |
| P2 | $AGENTS agents beating at a 3-member coordinator at 1,500 beats/s (15,000 agents every 10 s), **leader** path (new TLS connection per beat, session resumed) | p50 $(metric "$H" leader p50-µs) µs, p99 $(metric "$H" leader p99-µs) µs, $(metric "$H" leader beats/s) beats/s, $lcpu µs CPU/beat, $(metric "$H" leader raft-entries/s) Raft entries/s, RSS $(metric "$H" leader rss-MiB) MiB (whole test process) | 1 |
| P2 | the same at a **follower**, which relays the beats that change nothing to the leader in batches | p50 $(metric "$H" follower p50-µs) µs, p99 $(metric "$H" follower p99-µs) µs, $(metric "$H" follower beats/s) beats/s, $fcpu µs CPU/beat, $(metric "$H" follower raft-entries/s) Raft entries/s, RSS $(metric "$H" follower rss-MiB) MiB | $(ratio "$fcpu" "$lcpu") of the leader's CPU/beat (a TLS handshake per beat dominates both) |
| P2 | $KEPT agents, **kept connections** as real agents keep them, same rate, at the **leader** | p50 $(metric "$H" leader-kept p50-µs) µs, p99 $(metric "$H" leader-kept p99-µs) µs, $(metric "$H" leader-kept beats/s) beats/s, $lkcpu µs CPU/beat | 1 |
| P2 | the same at a **follower** | p50 $(metric "$H" follower-kept p50-µs) µs, p99 $(metric "$H" follower-kept p99-µs) µs, $(metric "$H" follower-kept beats/s) beats/s, $fkcpu µs CPU/beat | $(ratio "$fkcpu" "$lkcpu") of the leader's CPU/beat (≤ 1.5) |
| P3 | leader SIGKILLed mid-upgrade → next operation an agent runs, 10 runs | median $(metric "$F" 'kill' median-s) s, max $(metric "$F" 'kill' max-s) s | — |
| P3 | leader frozen (all its connections stop) mid-upgrade → next operation, 10 runs | median $(metric "$F" 'freeze' median-s) s, max $(metric "$F" 'freeze' max-s) s | ≤ 5 s |
| P3 | leader cut off from the other members (its Raft connections stop; agents still reach it) mid-upgrade → next operation, 10 runs | median $(metric "$F" 'partition' median-s) s, max $(metric "$F" 'partition' max-s) s | ≤ 5 s |
| P4 | commit latency, one small command at a time, 3 members on loopback, fsync on: raftstore Apply (in process) vs etcd put (gRPC client) | raftstore p50 $raft_p50 ms, p99 $raft_p99 ms; etcd p50 $etcd_p50 ms, p99 $etcd_p99 ms (best endpoint; p50 by endpoint $etcd_all ms) | $(ratio "$raft_p50" "$etcd_p50") (≤ 1) |
| P4 | where a commit's time goes: one small append and fsync on this disk (a commit on 3 members waits for two in a row: the leader's append, then a follower's) | p50 $(metric "$out/fsync.txt" Fsync p50-ms) ms, p99 $(metric "$out/fsync.txt" Fsync p99-ms) ms | — |
| P5 | agent idle RSS after 30 s, unreachable coordinator, no containerd | $agent_rss | — (goal 20 MiB: see P5 below) |
| P5 | plan of a 15,000-node cluster | $(metric "$out/plan.txt" Plan15k ns/op | awk '{ printf "%.1f", $1 / 1e6 }') ms | — |
| P5 | one tick (Decide) of a 15,000-node upgrade, 20 nodes in flight | $(metric "$out/tick.txt" Tick15k ns/op | awk '{ printf "%.2f", $1 / 1e6 }') ms | — |
| P5 | one leader tick (plan, act, liveness) of a 15,000-node upgrade, every agent registered and beating | $(metric "$out/leadertick.txt" LeaderTick15k ns/op | awk '{ printf "%.2f", $1 / 1e6 }') ms | ≤ 5 ms |
| — | lab upgrade wall time (full topology and a MIG pool of two zones, v1.33.13 → v1.34.3, no faults) vs the sum of its steps' lower bounds | $lab_row | $lab_ratio |
EOF
if ((${#failed[@]})); then echo; echo "Benchmarks that failed in this run: ${failed[*]} (their output is above, on stderr)."; fi
}

mkdir -p "${BIN:-bin}"
main "$@" | tee "${BIN:-bin}/perf.md"; exit "${PIPESTATUS[0]}"
