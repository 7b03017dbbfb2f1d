// Package client is the typed Go client of the coordinator's /v1 API: it
// sends api's wire types over HTTP, fails over between the coordinator's
// members, and carries the read-your-writes index (api.IndexHeader). It is
// the I/O half of what package api declares; keeping it apart keeps api a
// pure package of types, problems and conversions that the engine and the
// state machine may import without reaching net/http.
//
// transport.go configures the HTTP transport every client of a member
// uses (HTTP/2 pings, bounded dial and handshake) and the protocols a
// member's API offers.
package client
