// Package httpapi serves the coordinator's /v1 REST API with go-chi.
//
// It owns the HTTP edge: the route table with each route's role and how
// it is served (routes.go), authentication and authorization (auth.go,
// session.go), forwarding to the leader (forward.go), read consistency
// (consistency.go, fresh.go), the relay of agents' heartbeats (relay.go),
// the audit record of every write request (audit.go), and the mapping of
// every error to an RFC 9457 problem in one function (problems.go). It
// refuses bodies that are not application/json (UTF-8) JSON objects,
// unknown JSON fields, oversized bodies and wrong methods before anything
// changes (decode.go).
//
// It owns no state of the cluster. What it needs of a coordinator member
// it declares as small interfaces, each beside the handlers or the
// middleware that use it (Leadership in forward.go, Authenticator in
// auth.go, ClusterService in cluster_handlers.go, …), gathered in
// Services, which New takes; ServicesOf fills it from one
// *coordinator.Coordinator. Each group of handlers holds only its own
// interface. It answers with package api's wire types only: the engine
// values the interfaces return convert through api/convert, a stored
// preflight run in wire.go.
package httpapi
