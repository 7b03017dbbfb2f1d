// Package convert is the one place where the REST API's wire types
// (package api) meet the engine's (phases, preflight): every engine value
// the API sends, and every wire value the engine reads, goes through a pair
// of functions here, ToAPI and FromAPI.
//
// The two sides are declared apart on purpose. The wire is a contract with
// operators' tools and scripts and never changes incompatibly; the engine
// changes its structs as it needs. A field added to either side must be
// added here too: the round-trip tests fill every field of both sides and
// fail when one is dropped. The coordinator (its views and its HTTP API)
// and moltctl (which runs the engine's forecast on what it fetched) both
// convert through this package.
//
// FromAPI functions fail only on a version that is not "1.N.X" (an empty
// version is the zero version); enumerations (kinds, roles, states) are
// carried over as they are and judged by the engine's own validation.
// Converted upgrades have their lookup indexes built
// (phases.Upgrade.BuildIndex), so they may be read concurrently.
package convert
