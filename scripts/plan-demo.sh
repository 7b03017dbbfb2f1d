#!/usr/bin/env bash
# The planning walk-through (`make plan-demo`), no lab needed: one
# coordinator member with its state in a fresh data directory. It registers the release catalog and the
# lab cluster, shows the version rules refusing bad upgrades, plans the
# upgrade to the next minor (the dry run: steps, batches, timeline,
# disruption), and asks the maintenance policy it registered the cluster
# with when an automatic minor upgrade may run next. (The real upgrade of a real cluster is `make demo`.)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
ADDR=${MOLT_DEMO_ADDR:-127.0.0.1:7080}
RAFT=${MOLT_DEMO_RAFT:-127.0.0.1:7081}
DATA=$(mktemp -d /tmp/molt-demo.XXXXXX)
# moltctl trusts the member's CA and acts as its bootstrap admin.
export MOLT_SERVER=https://$ADDR MOLT_CA_FILE=$DATA/tls/ca.crt MOLT_TOKEN_FILE=$DATA/admin.token
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

"$BIN/molt-coordinator" --data-dir "$DATA" --http-addr "$ADDR" --raft-addr "$RAFT" --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$DATA"' EXIT
# Ready once it leads and has stored the bootstrap admin token.
for _ in $(seq 1 100); do
	"$BIN/moltctl" member list >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { echo "coordinator exited"; exit 1; }
	sleep 0.1
done

say "coordinator (embedded default: one Raft member, state in $DATA)"
"$BIN/moltctl" member list
say "release catalog"
for f in examples/release-*.yaml; do "$BIN/moltctl" release apply -f "$f"; done
"$BIN/moltctl" release list
say "register the lab cluster on channel regular, with its maintenance policy (weekend nights, no minor upgrades in the sales season) in the same request"
"$BIN/moltctl" cluster apply -f examples/cluster-lab.yaml --maintenance-policy examples/maintenance-policy.yaml
"$BIN/moltctl" cluster get lab
say "version rules refuse bad upgrades (nothing changes)"
"$BIN/moltctl" upgrade start lab 1.35.0 --dry-run || true # skips minor 1.34
"$BIN/moltctl" upgrade start lab 1.32.9 --dry-run || true # a downgrade
say "plan of the upgrade to 1.34.4 (dry run)"
"$BIN/moltctl" upgrade start lab 1.34.4 --dry-run
say "the maintenance policy stored with the registration, and when changes may run"
"$BIN/moltctl" maintenance get lab
"$BIN/moltctl" maintenance check lab --target controlPlane --change minor --at 2026-12-02T23:00:00Z
"$BIN/moltctl" maintenance check lab --target nodes --change patch --at 2026-12-05T23:00:00Z
say "metrics"
curl -fsS --cacert "$MOLT_CA_FILE" -H "Authorization: Bearer $(cat "$MOLT_TOKEN_FILE")" "https://$ADDR/metrics" | grep -E '^molt_(cluster_upgrade_phase|cluster_nodes|raft_state)' | grep -v ' 0$'
say "done"
