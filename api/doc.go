// Package api holds molt's wire types (the JSON of the /v1 REST API) and
// the RFC 9457 problem types the coordinator answers with. It does no I/O
// (internal/purity holds it to that): the typed Go client that sends these
// types is package api/client.
//
// The agent and moltctl import this package (and api/client) and nothing
// of the coordinator's insides, so everything they exchange with the
// coordinator is declared here.
// Nor does it import the engine (package phases): cluster specs, upgrades
// and plans have wire types of their own, with versions as "1.N.X"
// strings, so that the engine may change its structs without changing the
// API. Package api/convert converts between the two; testdata/wire pins
// the JSON of those types, which may only grow.
package api
