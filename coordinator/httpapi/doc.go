// Package httpapi serves the coordinator's /v1 REST API with go-chi.
//
// It declares the small Service interface it needs rather than importing
// the coordinator's insides, maps every error to an RFC 9457 problem in one
// function (problems.go), refuses bodies that are not application/json
// (UTF-8) JSON objects, unknown JSON fields, oversized bodies and wrong
// methods before anything changes (decode.go), forwards writes that land on a
// follower to the leader, and records every write request in the audit
// log (audit.go). It answers with package api's wire types only:
// the engine values the Service returns convert through api/convert, a
// stored preflight run in wire.go.
package httpapi
