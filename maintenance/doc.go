// Package maintenance is the pure policy that gates automatic upgrades:
// one recurring maintenance window per cluster plus up to twenty one-off
// exclusions, each with a scope that says which changes it blocks (SPEC §9).
//
// The package answers three questions for the coordinator: is a policy
// acceptable (Policy.Validate), may this change run now (Compiled.Allowed),
// and when may it run next (Compiled.NextOpportunity). It also holds the
// catch-up pacing rule (CatchUp) and the emergency override's rule
// (CheckOverrideReason).
//
// Everything here is pure: no I/O, no logging, no clock. Time always comes in
// as a value so the same policy gives the same answer on every Raft replica.
// All instants are UTC and every interval is half-open, [start, end).
//
// The types here are not a format and carry no JSON tags: the REST API
// carries the policy's wire twin (api.MaintenancePolicy, converted in
// api/convert) and the coordinator persists its own (policyV1 in
// coordinator/statemachine). internal/purity's tests hold the package to
// that and to importing no wire package.
//
// The operator-facing description lives in docs/maintenance.md.
package maintenance
