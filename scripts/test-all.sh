#!/usr/bin/env bash
# test-all: the README's test command (make test-all, what .ci/run runs) as stages:
# deps, build, then check (make check prebuild-test) beside the demo (make test-demo),
# then unit, mixed, linearizability, plan-demo, lab, e2e, vagrant. The first failing stage
# stops the run, which exits with that stage's exit code. At the end, on success or
# failure, a table of the stages run and their wall times is printed and written to
# $BIN/ci-stages.md.
#
# Called by the Makefile with MAKE and BIN set; every stage is a make target of it.
set -euo pipefail

MAKE=${MAKE:-make}
BIN=${BIN:-bin}
mk() { "$MAKE" --no-print-directory "$@"; }
# now: milliseconds since the epoch
now() { local us=${EPOCHREALTIME//[!0-9]/}; echo $((us / 1000)); }

names=() notes=() starts=() ends=() rcs=() # starts, ends: now
run_start=$(now)
check_i=''

# begin NAME NOTE: a stage starts now; its index is ${#names[@]}-1
begin() {
	names+=("$1") notes+=("$2") starts+=("$(now)") ends+=("") rcs+=("")
}

# run NAME CMD...: CMD as the stage NAME (with $note in the table's note column);
# returns its exit code
run() {
	local name=$1 rc=0 i
	shift
	begin "$name" "${note:-}"
	i=$((${#names[@]} - 1))
	printf '== stage %s (started %(%H:%M:%S)T)\n' "$name" $((starts[i] / 1000))
	"$@" || rc=$?
	ends[i]=$(now) rcs[i]=$rc
	return "$rc"
}

# stage NAME CMD...: run, and stop the whole run when the stage fails
stage() {
	local rc=0
	run "$@" || rc=$?
	[ "$rc" -eq 0 ] || exit "$rc"
}

# check_done: the check stage's end and exit code, from what its background job wrote
check_done() {
	[ -n "$check_i" ] && [ -z "${rcs[check_i]}" ] && [ -s "$BIN/check.rc" ] || return 0
	rcs[check_i]=$(cat "$BIN/check.rc")
	ends[check_i]=$(cat "$BIN/check.end" 2>/dev/null || now)
}

mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
# secs START END: the whole seconds between two nows, rounded
secs() { echo $((($2 - $1 + 500) / 1000)); }

table() {
	local rc=$1 i end secs result failed=
	echo '| stage | seconds | min:sec | result | note |'
	echo '|---|---:|---:|---|---|'
	for i in "${!names[@]}"; do
		end=${ends[i]:-$(now)}
		secs=$(secs "${starts[i]}" "$end")
		case ${rcs[i]} in
		0) result=ok ;;
		'') result='**interrupted**' ;;
		*) result="**FAILED** (exit ${rcs[i]})" ;;
		esac
		[ "${rcs[i]}" = 0 ] || failed+="${failed:+, }${names[i]}"
		printf '| %s | %d | %s | %s | %s |\n' "${names[i]}" "$secs" "$(mmss "$secs")" "$result" "${notes[i]}"
	done
	secs=$(secs "$run_start" "$(now)")
	if [ "$rc" -eq 0 ]; then result=ok; else result="**FAILED** (exit $rc${failed:+: $failed})"; fi
	printf '| **total** | %d | %s | %s | wall time from the start of deps%s |\n' "$secs" "$(mmss "$secs")" "$result" \
		"${check_i:+; check ran beside demo, so the stages add up to more}"
}

report() {
	local rc=$?
	set +e
	# Interrupted while check still runs: its session is not in this script's process
	# group, so nothing else stops it.
	if [ -n "$check_i" ] && [ ! -s "$BIN/check.rc" ] && [ -s "$BIN/check.pgid" ]; then
		kill -TERM -- "-$(cat "$BIN/check.pgid")" 2>/dev/null
	fi
	check_done
	echo
	echo "== test-all stages (finished $(date '+%F %T'), exit $rc; also in $BIN/ci-stages.md)"
	mkdir -p "$BIN"
	table "$rc" | tee "$BIN/ci-stages.md"
	exit "$rc"
}
trap report EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$BIN"
stage deps mk deps
stage build mk build

# While the demo's lab upgrade mostly waits on its hosts, check and the race build of
# every test binary run beside it at the lowest CPU priority; their output follows the demo's.
# Lowest means scripts/lowprio.sh, not only nice 19: with kernel autogroup on, nice ranks
# processes only inside one session, and every lab host is a session of its own that would
# share the cores with this script's session as an equal (the race build beside a cold
# demo doubled its upgrade); lowprio.sh gives the job a session and autogroup of its own at
# nice 19.
rm -f "$BIN/check.rc" "$BIN/check.end" "$BIN/check.pgid"
begin check "beside demo (lowest priority: own autogroup at nice 19; with prebuild-test)"
check_i=$((${#names[@]} - 1))
printf '== stage check (started %(%H:%M:%S)T; check and prebuild-test beside demo at the lowest priority, output after it)\n' $((starts[check_i] / 1000))
(
	rc=0
	LOWPRIO_PIDFILE="$BIN/check.pgid" bash scripts/lowprio.sh "$MAKE" --no-print-directory check prebuild-test >"$BIN/check.log" 2>&1 || rc=$?
	now >"$BIN/check.end"
	echo "$rc" >"$BIN/check.rc"
) &
bg=$!
rc=0
note="check beside it" run demo mk test-demo || rc=$?
wait "$bg" || true
check_done
echo "== check and prebuild-test (beside the demo):"
cat "$BIN/check.log"
[ "$rc" -eq 0 ] || exit "$rc"
[ "${rcs[check_i]}" = 0 ] || { echo "test-all: check or prebuild-test failed"; exit "${rcs[check_i]:-1}"; }

stage unit mk test
stage mixed mk test-mixed
stage linearizability mk test-linearizability
# test-linearizability has just made build, its prerequisite and test-plan-demo's: as when
# both ran in one make, build is not made again (-o build)
stage plan-demo mk -o build test-plan-demo
stage lab mk test-lab
stage e2e mk test-e2e
stage vagrant mk validate-vagrant
