// Package api holds molt's wire types (the JSON of the /v1 REST API), the
// RFC 9457 problem types the coordinator answers with, and a typed Go client.
//
// The agent and moltctl import this package and nothing of the coordinator's
// insides, so everything they exchange with the coordinator is declared here.
package api
