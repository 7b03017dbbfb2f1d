// Package metrics defines every Prometheus metric molt exports and the
// alerting rules and dashboard that read them rely on.
//
// Two kinds of metric live here, kept apart on purpose:
//
//   - State metrics (NewCoordinatorCollector) are computed at scrape time from
//     a Source, a read-only view of the coordinator's replicated state. They
//     are never "set" by the code that changes state, so the metrics cannot
//     drift from the state an operator sees through the API.
//   - Event metrics (Recorder on the coordinator, AgentMetrics on the agent)
//     count and time things that happen: a node upgraded, a drain that timed
//     out, a Raft commit. They are updated where the event happens.
//
// The package does not import the coordinator: the coordinator adapts its
// state to the small view types below (ClusterView, PoolView, ...). Every
// exported metric is listed in Catalog, which the tests use to check that
// the shipped alerting rules, dashboard and docs/observability.md name only
// metrics that exist.
//
// Label values that come from the caller (pause reasons, drain left-behind
// reasons, preflight check names, operation kinds) must be short codes from
// a closed set, never free text, so that series stay bounded.
package metrics
