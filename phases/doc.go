// Package phases is molt's pure upgrade engine.
//
// It holds the version rules (SPEC §3), the model of a cluster and its pools,
// the step graph of a cluster upgrade (SPEC §4), the per-node step machine of
// an in-place upgrade (SPEC §6), pool concurrency budgets, the molt step
// that replaces the hosts' agents before any Kubernetes step (molt.go), the
// Decide entry point the coordinator's leader calls on every tick, and the
// planner behind dry runs.
//
// Nothing here does I/O, logs, or reads the clock: time arrives as a value.
// The coordinator owns the replicated state and applies the transitions
// defined here from its FSM, so the same bytes replayed on any replica give
// the same state, and a stale decision (made on an older state) is refused
// by the expected-state checks every transition carries.
//
// The types here are not a format and carry no JSON tags: the REST API
// sends its own wire types (package api, converted by api/convert), and
// the coordinator's log and snapshots hold its own persisted types
// (coordinator/statemachine's persisted_v1_*.go). So these structs may
// change with the engine's needs; the conversions on both sides, and
// their round-trip tests, say what such a change must carry along. An
// Upgrade assembled from another format gets its lookup indexes from
// BuildIndex.
package phases
